"""Retrieval precision (seed ``001_…``, Tonic Validate): share of retrieved passages relevant to the question.

The judge reads each retrieved passage with the question (prompt ``relevance.v1.txt``). Nothing
retrieved (``contexts: []``) is 0, a miss, without asking; an empty passage is relevant to nothing.
"""

from __future__ import annotations

from typing import Sequence

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import PROMPT_VERSION, of_verdicts, passages, per_passage, share_true, yes_no

RELEVANCE = yes_no("relevance", "relevant")


def retrieval_precision_value(relevant: Sequence[bool]) -> float:
    """Relevant contexts / contexts; 0 when nothing was retrieved (nothing relevant, a miss).

    >>> retrieval_precision_value([True, False, True, False]) == 2 / 4
    True
    >>> retrieval_precision_value([])
    0.0
    """
    return share_true(relevant) if relevant else 0.0


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(RELEVANCE,), scale=1.0))
async def retrieval_precision(ask, query: str, contexts: list[str], *, prompt_version: str = "v1") -> Score:
    """Share of retrieved contexts the judge finds relevant to the question (prompt ``relevance``).

    >>> retrieval_precision_value([True, False]) == 1 / 2
    True
    """
    if not passages(contexts):
        return Score(retrieval_precision_value([]), detail="nothing retrieved: no relevant passage (not asked)")
    outs = await per_passage(ask, contexts, RELEVANCE, prompt_version, question=query)
    return of_verdicts(retrieval_precision_value, "relevant", outs)
