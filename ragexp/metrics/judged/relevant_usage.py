"""Augmentation precision (seed ``001_…``, Tonic Validate): of the relevant passages, the share the answer uses.

It reuses the verdicts of ``retrieval_precision`` (``relevance``) and ``augmentation_accuracy``
(``usage``): in a run with those, it asks nothing new. No relevant passage — nothing retrieved
included — gives 0 by definition; an empty answer uses none: 0, not asked.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import PROMPT_VERSION, blank, detail, failed, passages, per_passage
from ragexp.metrics.judged.usage import USAGE
from ragexp.metrics.judged.relevance import RELEVANCE


def augmentation_precision_value(relevant: Sequence[bool], used: Sequence[bool]) -> float:
    """Relevant-and-used contexts / relevant contexts; 0 when no context is relevant,
    nothing retrieved included.

    >>> augmentation_precision_value(relevant=[True, True, False], used=[True, False, True])  # 1 of 2 relevant used
    0.5
    >>> augmentation_precision_value(relevant=[False, False], used=[True, True])  # none relevant: 0 by definition
    0.0
    >>> augmentation_precision_value([], [])
    0.0
    """
    if len(relevant) != len(used):
        raise ValueError(f"one relevance and one usage verdict per context, got {len(relevant)} and {len(used)}")
    n_relevant = sum(1 for r in relevant if r)
    if n_relevant == 0:
        return 0.0
    return sum(1 for r, u in zip(relevant, used) if r and u) / n_relevant


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(RELEVANCE, USAGE), scale=1.0))
async def augmentation_precision(ask, query: str, answer: str, contexts: list[str], *,
                                 prompt_version: str = "v1") -> Score:
    """Relevant contexts the answer uses / relevant contexts; 0 when none is relevant.

    >>> augmentation_precision_value([True, False], [True, True]) == 1 / 1
    True
    """
    if not passages(contexts):
        return Score(augmentation_precision_value([], []), detail="nothing retrieved: no relevant passage (not asked)")
    if blank(answer):  # nothing used: 0 whatever is relevant
        n = len(contexts or [])
        return Score(augmentation_precision_value([True] * n, [False] * n),
                     detail="empty answer: it uses no passage, relevant or not (not asked)")
    rel, use = await asyncio.gather(per_passage(ask, contexts, RELEVANCE, prompt_version, question=query),
                                    per_passage(ask, contexts, USAGE, prompt_version, answer=answer))
    bad = failed(rel + use)
    if bad:
        return bad
    relevant = [x.verdict.value for x in rel]
    used = [x.verdict.value for x in use]
    return Score(augmentation_precision_value(relevant, used), detail=detail(relevant=relevant, used=used))
