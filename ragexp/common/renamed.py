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
"""

from __future__ import annotations

from typing import Any, Mapping


#: old key → today's key (the keyword verdict's confusion with the label, seed 004)
RENAMED_METRICS: dict[str, str] = {
    "accuracy": "keyword_verdict_accuracy",
    "precision": "keyword_verdict_precision",
    "recall": "keyword_verdict_recall",
    "f1": "keyword_verdict_f1",
}


def current_key(key: str) -> str:
    """Today's name of a metric key (its part before a ``/`` renamed); other keys unchanged."""
    base, slash, rest = str(key).partition("/")
    return RENAMED_METRICS.get(base, base) + slash + rest


def current_keys(values: Mapping[str, Any]) -> dict[str, Any]:
    """A run's metrics with old keys in today's names (a key already present in today's name wins)."""
    return {current_key(k): v for k, v in values.items() if current_key(k) == k or current_key(k) not in values}


def renamed_note(key: str, written: str) -> str | None:
    """The one line said when a user writes an old key (None for a current one); ``written`` is the
    setting as the user wrote it."""
    new = current_key(key)
    if new == key:
        return None
    return (f"{written} uses the old name '{key}'; the keyword verdict's {key} against people's label is now "
            f"called {new}. It is read as {new} this time; write that instead.")
