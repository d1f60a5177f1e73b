"""What answering costs: the retrieved context's size in tokens (``context_tokens``, a memory layer's
footprint in the prompt) and percentiles of a pipeline stage's seconds (``stage_latency``).
Definitions: docs/metrics.md#context_tokens, docs/metrics.md#stage_latency.
"""

from __future__ import annotations

import math
from typing import Any

from ragexp.common.tokenizers import load_tokenizer
from ragexp.metrics.base import Score, register

_PERCENTILE = {"percentile": (lambda v: isinstance(v, str) and v[:1] == "p" and v[1:].isdigit() and 0 <= int(v[1:]) <= 100,
                              lambda: "'p<0-100>' such as 'p50' or 'p95' (or a list of them)"),
               "stage": (lambda v: isinstance(v, str) and v != "", lambda: "a stage name such as 'search' (or a list)")}


@register(bounds=(0.0, math.inf), unit="tokens", higher_is_better=False)
def context_tokens(contexts: list[str], *, tokenizer: str = "cl100k_base") -> float:
    """Tokens of the retrieved passages, summed (what the answer's prompt must carry); nothing retrieved is 0.
    ``tokenizer``: a tiktoken encoding name or a path to a ``tokenizer.json``.

    >>> context_tokens(["hello world", "hello"])  # 2 + 1 tokens in cl100k_base
    3.0
    """
    encode = load_tokenizer(tokenizer).encode
    return float(sum(len(encode(c)) for c in contexts))


def interpolated_percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile of ``values`` by linear interpolation between the closest ranks (numpy's
    default, type 7 of Hyndman and Fan).

    >>> interpolated_percentile([1.0, 2.0, 3.0, 4.0], 50), interpolated_percentile([1.0, 2.0, 3.0, 4.0], 95)  # 2.5; 3 + 0.85 * (4 - 3)
    (2.5, 3.85)
    """
    ordered = sorted(values)
    at = (len(ordered) - 1) * q / 100
    low = math.floor(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@register(level="dataset", bounds=(0.0, math.inf), unit="s", higher_is_better=False,
          variant_params=("stage", "percentile"),
          option_rules=_PERCENTILE)
def stage_latency(timings: list[Any], *, stage: Any = "search", percentile: Any = "p50") -> float | Score:
    """A percentile of one pipeline stage's seconds over the records that timed it (``timings[stage]``);
    logged as ``stage_latency/<stage>/<percentile>`` when the options are lists. Undefined when no record
    timed the stage.

    >>> stage_latency([{"search": 0.5}, {"search": 1.5}, None, {"answer": 2.0}], stage="search", percentile="p50")
    1.0
    """
    seconds = [t[stage] for t in timings if t and t.get(stage) is not None]
    if not seconds:
        return Score.undefined(f"no record timed the stage '{stage}'")
    return interpolated_percentile(seconds, float(percentile[1:]))


__all__ = ["context_tokens", "interpolated_percentile", "stage_latency"]
