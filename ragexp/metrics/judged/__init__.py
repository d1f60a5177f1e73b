"""LLM-judge metrics: one module per metric, with the prompts it asks (``<verdict>.v1.txt``) beside it.

A judge metric is a registered ``async`` function, its *plan*: ``metric(ask, <record fields>, *,
<options>) -> Score``. ``ask(kind, version, ctx=None, **values)`` is passed in by
:mod:`ragexp.judge.engine` (concurrent, cached, budgeted) and returns the :class:`Outcome` of one
:class:`VerdictKind` — a prompt file of this folder, the JSON schema of its reply and the reader of its
main field, together. The arithmetic on the verdicts is a pure function of the same module, with its
worked example. ``@register(judge=Judged(asks=..., scale=...), binary=...)`` says what the metric is
(docs/metrics.md, "Adding a metric").

Absent fields never reach a plan (the judge gives them ``missing_field``). A present but empty output
of the system under test is a miss decided in the plan without asking the judge what no verdict could
change: no passage retrieved is nothing relevant, nothing used and nothing supported (0); an empty
answer is 0 similar and answers no question. Only what the definition has no value for is
``undefined``: no reference answer, an answer without a main point (an empty one has none), no
question answered by both texts.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ragexp.judge.errors import ParseError
from ragexp.metrics.base import Score

#: where the judge metrics' prompt files are: beside their modules
PROMPTS = Path(__file__).parent


@dataclass(frozen=True)
class Verdict:
    """A judge's verdict: ``value`` is its kind's main field — a bool; a 0–5 score; a tuple of main points,
    of questions, or of answers (None: unanswerable from the text) — and ``reason`` the judge's why."""

    value: Any
    reason: str = ""


@dataclass
class Outcome:
    """A verdict, or why there is none (a status, docs/metrics.md#how-to-read-a-value, and the detail to show)."""

    verdict: Any
    status: str = "ok"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class VerdictKind:
    """One question put to the judge: prompt ``<folder>/<name>.<version>.txt``, the reply's JSON ``schema``
    (sent as ``response_format`` where the provider takes one), the names its main field goes by (the
    first is the one asked for), what it holds (for error messages) and ``read(value, field, ctx)``."""

    name: str
    fields: tuple[str, ...]
    holds: str
    read: Callable[[Any, str, dict[str, Any]], Any]
    schema: dict[str, Any]
    one_line: bool = False  # a verdict that may stand on a line of its own (``relevant: yes``)
    folder: Path = PROMPTS


def obj(**props: Any) -> dict[str, Any]:
    """The JSON schema of an object with exactly these properties."""
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


STR = {"type": "string"}
BOOL = {"type": "boolean"}
ABSENT = object()  # a field the reply's object does not have

_TRUE = {"true", "yes", "y", "1", "relevant", "used", "supported"}
_FALSE = {"false", "no", "n", "0", "not relevant", "irrelevant", "not used", "unsupported", "not supported"}


def read_flag(value: Any, field: str, ctx: dict[str, Any]) -> bool:
    if value is ABSENT:
        raise ParseError(f"no '{field}' field")
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        v = value.strip().strip(".*`\"'").lower()
        if v in _TRUE:
            return True
        if v in _FALSE:
            return False
    raise ParseError(f"'{field}' must be true or false, got {value!r}")


def read_score(value: Any, field: str, ctx: dict[str, Any], low: float = 0, high: float = 5) -> float:
    if value is ABSENT:
        raise ParseError(f"no '{field}' field")
    if isinstance(value, str):
        m = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*\d+)?\s*", value)
        value = float(m.group(1)) if m else value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ParseError(f"'{field}' must be a number from {low:g} to {high:g}, got {value!r}")
    if not low <= value <= high:
        raise ParseError(f"'{field}' must be from {low:g} to {high:g}, got {value!r}")
    return float(value)


def text_item(item: Any, keys: tuple[str, ...]) -> str | None:
    """A list item as text: a string, or the first non-empty of ``keys`` of an object."""
    if isinstance(item, str):
        return item.strip() or None
    if isinstance(item, dict):
        for k in keys:
            if isinstance(item.get(k), str) and item[k].strip():
                return item[k].strip()
    return None


def read_sentences(value: Any, field: str, ctx: dict[str, Any]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ParseError(f"'{field}' must be a list of sentences")
    texts = tuple(text_item(p, ("point", "text", "statement", "claim")) for p in value)
    if any(t is None for t in texts):
        raise ParseError(f"every item of '{field}' must be a non-empty sentence")
    return texts  # type: ignore[return-value]


def yes_no(name: str, field: str) -> VerdictKind:
    """A verdict that is one true/false field and a reason."""
    return VerdictKind(name, (field,), "true or false", read_flag, obj(**{field: BOOL, "reason": STR}), one_line=True)


#: the rule of a judge metric's ``prompt_version`` option (:attr:`~ragexp.metrics.base.MetricInfo.option_rules`)
PROMPT_VERSION = {"prompt_version": (lambda v: isinstance(v, str) and v != "", lambda: "a prompt version such as 'v1'")}


# -- plan steps the metrics share ----------------------------------------------------------------

NO_REFERENCE = "no reference answer (empty ground truth)"


def blank(text: str | None) -> bool:
    return text is None or not text.strip()


def passages(contexts: Sequence[str] | None) -> list[str]:
    """The retrieved passages that hold text (empty when nothing was retrieved)."""
    return [c for c in contexts or [] if not blank(c)]


def references(reference_answers: Sequence[str] | None) -> list[str]:
    """The reference answers, blank ones left out (as the deterministic metrics do)."""
    return [x for x in reference_answers or [] if not blank(x)]


def detail(**parts: Any) -> str:
    return json.dumps(parts, ensure_ascii=False)


def failed(outcomes: Sequence[Outcome]) -> Score | None:
    """The first failure among the outcomes as a score, None when every one has a verdict."""
    for o in outcomes:
        if not o.ok:
            return Score(None, o.status, o.detail)
    return None


def of_verdicts(value: Callable[[list[Any]], Any], name: str, outs: Sequence[Outcome], **before: Any) -> Score:
    """``value`` of the verdicts' values, shown as ``name`` with their reasons (after ``before``); or the
    first failure among them."""
    bad = failed(outs)
    if bad:
        return bad
    values = [x.verdict.value for x in outs]
    return Score(value(values), detail=detail(**before, **{name: values}, reasons=[x.verdict.reason for x in outs]))


async def listed(ask: Any, kind: VerdictKind, version: str, none: str, ctx: dict[str, Any] | None = None,
                 **values: Any) -> list[Any] | Score:
    """The items of a list verdict (claims, questions), or the score when there are none: the failure's,
    or undefined saying ``none``."""
    found = await ask(kind, version, ctx, **values)
    if not found.ok:
        return Score(None, found.status, found.detail)
    return list(found.verdict.value) or Score.undefined(none)


async def decided(verdict: Verdict) -> Outcome:
    """A verdict the material decides without a judge (an empty passage is relevant to nothing)."""
    return Outcome(verdict, "ok", "decided without asking: " + verdict.reason)


async def per_passage(ask: Any, contexts: Sequence[str], kind: VerdictKind, version: str, **values: Any
                      ) -> list[Outcome]:
    """Verdict ``kind`` on each retrieved passage; an empty one is relevant to nothing and used by nothing."""
    return list(await asyncio.gather(*[
        decided(Verdict(False, "empty passage")) if blank(c) else ask(kind, version, context=c, **values)
        for c in contexts or []]))


def share_true(flags: Sequence[bool]) -> float | None:
    """Share of True among the verdicts; None when there is none."""
    if not flags:
        return None
    return sum(1 for f in flags if f) / len(flags)
