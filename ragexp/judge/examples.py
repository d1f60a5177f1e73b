"""``judge.examples=k``: k of people's labelled records shown to the judge as worked examples, drawn from
the ``dev`` part of the dataset only (docs/judge-trust.md, "Improving the judge with your labels").

The rule, seeded and written down so that a run can be repeated and checked:

1. the candidates are the ``dev`` records (``dataset.split=dev`` with the run's ``split_seed`` and
   ``split_fraction``) with people's 0/1 label for the metric, a non-blank answer and a retrieved passage;
2. each label class is ordered by record id and shuffled with ``numpy.random.default_rng(judge.seed)``;
3. the examples alternate the classes, people's 1 first (1, 0, 1, 0, ...), so k = 4 shows two of each;
   a class that runs out leaves the rest to the other.

Each example is the metric's own prompt filled with the record's material, followed by people's verdict
in the reply's JSON form; the examples go into the system message (the question itself stays the first
user message). Only a 0/1 metric with one yes/no question takes examples (answer_consistency_binary).
"""

from __future__ import annotations

import json
from typing import Any, Sequence

from ragexp.errors import ConfigError

_HEAD = ("Worked examples, with the verdict people gave. Grade the new material that follows on its own "
         "merits, in the same way:")


def eligible(spec: Any) -> Any:
    """The one yes/no question of a 0/1 judge metric, or a ConfigError saying which metrics take examples."""
    judged = getattr(spec.info, "judge", None)
    asks = getattr(judged, "asks", ()) if judged else ()
    if not (spec.info.binary and len(asks) == 1 and len(asks[0].fields) == 1
            and asks[0].schema.get("properties", {}).get(asks[0].fields[0], {}).get("type") == "boolean"):
        raise ConfigError(f"judge.examples: metric '{spec.key}' cannot take worked examples (only a 0/1 judge metric "
                          f"with one yes/no question can, such as answer_consistency_binary); set judge.examples=0")
    return asks[0]


def pick(records: Sequence[Any], key: str, k: int, seed: int | None) -> list[Any]:
    """The k example records of ``key`` from ``records`` (the dev part) by the module's rule."""
    import numpy as np

    classes: dict[float, list[Any]] = {1.0: [], 0.0: []}
    for r in sorted(records, key=lambda r: str(r.id)):
        label = (r.human or {}).get(key)
        if label in classes and r.answer and r.answer.strip() and any(c and c.strip() for c in r.contexts or ()):
            classes[label].append(r)
    rng = np.random.default_rng(0 if seed is None else seed)
    for group in classes.values():
        order = rng.permutation(len(group))
        group[:] = [group[i] for i in order]
    out: list[Any] = []
    ones, zeros = classes[1.0], classes[0.0]
    while len(out) < k and (ones or zeros):
        for group in (ones, zeros):
            if group and len(out) < k:
                out.append(group.pop(0))
    if len(out) < k:
        raise ConfigError(f"judge.examples={k}: the dev part has only {len(out)} records labelled for '{key}' with an "
                          f"answer and passages")
    return out


def system_text(ask: Any, version: str, examples: Sequence[Any], key: str) -> str:
    """The worked examples as text for the system message."""
    from ragexp.judge.templates import load_prompt

    prompt = load_prompt(ask.name, version, ask.folder)
    parts = [_HEAD]
    for i, r in enumerate(examples, start=1):
        material = prompt.render(answer=r.answer, contexts=[c for c in r.contexts if c and c.strip()],
                                 query=r.query)[-1]["content"]
        verdict = {ask.fields[0]: bool(r.human[key]), "reason": "people's label"}
        parts.append(f"--- Example {i}\n{material}\n\nThe verdict: {json.dumps(verdict)}")
    parts.append("--- End of the examples")
    return "\n\n".join(parts)


def with_examples(messages: list[dict[str, str]], text: str) -> list[dict[str, str]]:
    """``messages`` with ``text`` at the end of the system message (one is added when there is none)."""
    if messages and messages[0]["role"] == "system":
        return [{"role": "system", "content": messages[0]["content"] + "\n\n" + text}, *messages[1:]]
    return [{"role": "system", "content": text}, *messages]


def attach(judge: Any, specs: Sequence[Any], dev: Sequence[Any], records: Sequence[Any]) -> list[str]:
    """Give ``judge`` the worked examples of every judge metric of ``specs`` (``judge.examples`` of them each,
    from the ``dev`` records); the run's own copies of those records lose that label, so that no example is
    counted in the judge's agreement with people. Returns the example ids."""
    k, ids = judge.settings.examples, []
    for spec in specs:
        ask = eligible(spec)
        chosen = pick(dev, spec.key, k, judge.settings.seed)
        version = str(spec.options.get("prompt_version", spec.info.options.get("prompt_version", "v1")))
        judge.shots[ask.name] = system_text(ask, version, chosen, spec.key)
        ids += [str(r.id) for r in chosen if str(r.id) not in ids]
        mine = set(str(r.id) for r in chosen)
        for r in records:
            if str(r.id) in mine and r.human and spec.key in r.human:
                r.human = {h: v for h, v in r.human.items() if h != spec.key} or None
    judge.example_ids = ids
    return ids
