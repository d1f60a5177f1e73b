"""Metric keys that were renamed, and the one place an old key is read as today's (docs/metrics.md,
"Renamed keys").

Seed 004's confusion of the keyword verdict with people's label was logged as ``accuracy``,
``precision``, ``recall`` and ``f1`` — names every reader takes for something else. They are now
``keyword_verdict_accuracy`` … ``keyword_verdict_f1``. The old names stay accepted where a user types a
metric key (``stats.primary=``, ``gate.min.<key>=``, ``gate.max_drop.<key>=``), with one line saying
the new name, and a run logged under the old names reads as today's, so ``ragexp.compare`` pairs it
with a new one.

    >>> current_key("precision")
    'keyword_verdict_precision'
    >>> current_key("answer_token_f1"), current_key("f1/x")
    ('answer_token_f1', 'keyword_verdict_f1/x')
    >>> current_keys({"f1": 0.5, "mrr": 0.7})
    {'keyword_verdict_f1': 0.5, 'mrr': 0.7}
    >>> print(renamed_note("recall", "stats.primary=recall"))
    stats.primary=recall uses the old name 'recall'; the keyword verdict's recall against people's label is now called keyword_verdict_recall. It is read as keyword_verdict_recall this time; write that instead.

A cut-off's key was ``<metric>/k<N>`` (``hit_rate/k1``), which MLflow's run page titles "k1" (it titles a
chart by a key's last segment); it now names its metric, ``hit_rate/hit_rate_at_1`` (``recall_at_k/recall_at_5``
for the metrics named ``…_at_k``). The old form is read the same way:

    >>> current_key("hit_rate/k1"), current_key("recall_at_k/k5/ci_low"), current_key("context_recall/rouge_chunk/k3")
    ('hit_rate/hit_rate_at_1', 'recall_at_k/recall_at_5/ci_low', 'context_recall/rouge_chunk/context_recall_at_3')
    >>> print(renamed_note("mrr/k10", "gate.min.mrr.k10"))
    gate.min.mrr.k10 uses the old name 'mrr/k10'; a cut-off's key now names its metric: mrr/mrr_at_10. It is read as mrr/mrr_at_10 this time; write that instead.
"""

from __future__ import annotations

import re
from typing import Any, Mapping


#: old key → today's key (the keyword verdict's confusion with the label, seed 004)
RENAMED_METRICS: dict[str, str] = {
    "accuracy": "keyword_verdict_accuracy",
    "precision": "keyword_verdict_precision",
    "recall": "keyword_verdict_recall",
    "f1": "keyword_verdict_f1",
}


#: a cut-off's old key segment (``hit_rate/k1``), before a key named its metric
_OLD_CUTOFF = re.compile(r"k(\d+)")


def cutoff_key(metric: str, k: Any) -> str:
    """The key segment of ``metric``'s cut-off ``k``: ``hit_rate_at_5``; ``recall_at_5`` for ``recall_at_k``."""
    stem = metric[: -len("_at_k")] if metric.endswith("_at_k") else metric
    return f"{stem}_at_{k}"


def current_key(key: str) -> str:
    """Today's name of a metric key (its part before a ``/`` renamed, an old cut-off segment ``k<N>`` among the
    two after it named as :func:`cutoff_key` names it); other keys unchanged."""
    base, slash, rest = str(key).partition("/")
    base = RENAMED_METRICS.get(base, base)
    parts = rest.split("/") if rest else []
    for i, part in enumerate(parts[:2]):
        old = _OLD_CUTOFF.fullmatch(part)
        if old:
            parts[i] = cutoff_key(base, old.group(1))
            break
    return base + slash + "/".join(parts)


def current_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    """A run's metrics with old keys in today's names (a key already present in today's name wins)."""
    return {current_key(k): v for k, v in values.items() if current_key(k) == k or current_key(k) not in values}


def renamed_note(key: str, written: str) -> str | None:
    """The one line said when a user writes an old key (None for a current one); ``written`` is the
    setting as the user wrote it."""
    new = current_key(key)
    if new == key:
        return None
    base = str(key).partition("/")[0]
    said = (f"the keyword verdict's {base} against people's label is now called {new}" if base in RENAMED_METRICS
            else f"a cut-off's key now names its metric: {new}")
    return f"{written} uses the old name '{key}'; {said}. It is read as {new} this time; write that instead."
