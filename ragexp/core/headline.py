"""The metrics a run leads with (docs/uncertainty.md, "Headline metrics").

A suite names them under ``_headline_`` (the default suite: ``answer_token_f1`` for the answers and
``context_recall`` for the retrieval); ``stats.primary`` comes first when set. The console table,
the run's MLflow description, the sweep leaderboard and its pictures and ``ragexp.compare`` lead
with these keys; every other value is still in ``summary.json`` and MLflow.

    >>> keys = ["token_precision", "context_recall", "hit_rate/hit_rate_at_1", "hit_rate/hit_rate_at_3", "answer_token_f1"]
    >>> headline_keys(["answer_token_f1", "context_recall"], keys)
    ['answer_token_f1', 'context_recall']
    >>> headline_keys(["answer_token_f1", "hit_rate"], keys, primary="token_precision")
    ['token_precision', 'answer_token_f1', 'hit_rate/hit_rate_at_1']
    >>> headline_keys([], keys)          # a suite that names none: its first metric
    ['token_precision']
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

#: the suite setting (conf/metric/*.yaml) that names the headline metrics
SUITE_KEY = "_headline_"


def declared(metric_cfg: Any) -> list[str]:
    """The ``_headline_`` names of a composed ``metric`` node (a string or a list), in order."""
    if metric_cfg is None:
        return []
    value = metric_cfg.get(SUITE_KEY) if hasattr(metric_cfg, "get") else None
    if value is None:
        return []
    return [str(value)] if isinstance(value, str) else [str(v) for v in value]


def headline_keys(names: Iterable[str], keys: Sequence[str], primary: str | None = None) -> list[str]:
    """The aggregate keys a run leads with: ``primary`` (when among ``keys``), then each named metric
    (a key, or a metric name standing for its first cut-off: ``hit_rate`` → ``hit_rate/hit_rate_at_1``); when
    none of them was computed, the first key that is not a latency."""
    out = [primary] if primary and primary in keys else []
    for name in names:
        match = name if name in keys else next((k for k in keys if k.split("/", 1)[0] == name), None)
        if match is not None and match not in out:
            out.append(match)
    if not out:
        out = [k for k in keys if not k.startswith("latency/") and k != "avg_latency"][:1] or list(keys[:1])
    return out
