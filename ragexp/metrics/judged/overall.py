"""Overall score (seed ``001_…``, Tonic Validate): the mean of a sample's normalised judge values.

Each judge metric that declares a ``scale`` (``Judged(scale=...)``) may take part: its value divided
by it lies in [0, 1] (``answer_similarity / 5``, the shares as they are). Nothing is asked: the
value is computed from the run's other judge scores of the sample.

    >>> overall_value({"answer_similarity": 4.0, "retrieval_precision": 0.5, "answer_consistency": 1.0}) == (4/5 + 0.5 + 1.0) / 3
    True
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ragexp.errors import ConfigError
from ragexp.metrics.base import Judged, Score, load_all, register
from ragexp.metrics.judged import detail


def scales() -> dict[str, float]:
    """The judge metrics the overall score may average, and what each is divided by to lie in [0, 1]."""
    return {name: info.judge.scale for name, info in sorted(load_all().items())
            if info.judge is not None and info.judge.scale is not None}


def overall_value(values: Mapping[str, float]) -> float | None:
    """Mean of the normalised values (``answer_similarity / 5``, the others as they are)."""
    parts, scale = [], scales()
    for key, v in values.items():
        name = key.split("/", 1)[0]
        if name not in scale:
            raise ValueError(f"overall_score averages {', '.join(scale)}; got {key!r}")
        parts.append(v / scale[name])
    if not parts:
        return None
    return math.fsum(parts) / len(parts)


def chosen_parts(spec: Any, specs: Sequence[Any]) -> list[str]:
    """The keys of the run's judge metrics an overall_score ``spec`` averages (its ``metrics`` option)."""
    scale = scales()
    chosen = {**spec.info.options, **spec.options}.get("metrics")
    candidates = [s.key for s in specs if s.info.name in scale]
    if chosen is not None:
        unknown = [m for m in chosen if m not in scale]
        if unknown:
            raise ConfigError(f"metric '{spec.key}': metrics may name {', '.join(scale)}; got {unknown}")
        missing = [m for m in chosen if not any(k.split("/")[0] == m for k in candidates)]
        if missing:
            raise ConfigError(f"metric '{spec.key}' averages {missing}, which this run does not compute; "
                              "add them to the metric suite")
        candidates = [k for k in candidates if k.split("/")[0] in chosen]
    return candidates


@register(judge=Judged(parts=chosen_parts), fields=())
def overall_score(parts: Mapping[str, Score], *, metrics: list[str] | None = None) -> Score:
    """Mean of the normalised values of the judge metrics above computed in the run, per sample.

    ``metrics`` restricts it to some of them (None = every one the run computes). A sample's
    overall score is ``ok`` only when each of its parts is; otherwise it carries the first
    part's status that is not ok (``undefined`` for an answer without a main point, a failure's
    own status), so a parse error never makes the overall score silently easier. Parts that are 0
    because nothing was retrieved or the answer is empty count as 0.
    """
    if not parts:
        return Score.undefined("no answer_similarity / retrieval / augmentation / consistency metric in this run")
    for key, s in parts.items():
        if s.status != "ok":
            return Score(None, s.status, f"{key}: {s.detail}" if s.detail else key)
    values = {k: s.value for k, s in parts.items()}
    return Score(overall_value(values), detail=detail(**values))  # type: ignore[arg-type]
