"""Answer similarity (seed ``001_…``, Tonic Validate): 0–5, how close in meaning the answer is to a reference.

The judge grades the answer against each reference answer on a described 0–5 scale (prompt
``similarity.v1.txt``); the value is the best grade. An empty answer is 0 (a miss, not asked); no
reference answer leaves it undefined.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import (NO_REFERENCE, PROMPT_VERSION, STR, VerdictKind, blank, obj, of_verdicts,
                                   read_score, references)

SIMILARITY = VerdictKind("similarity", ("score",), "a number from 0 to 5", read_score,
                         obj(score={"type": "integer"}, reason=STR), one_line=True)


def answer_similarity_value(scores: Sequence[float]) -> float | None:
    """The best 0–5 score over the reference answers (one verdict per reference).

    >>> answer_similarity_value([3, 5])
    5.0
    """
    return float(max(scores)) if scores else None


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(SIMILARITY,), scale=5.0), bounds=(0.0, 5.0))
async def answer_similarity(ask, query: str, answer: str, reference_answers: list[str], *,
                            prompt_version: str = "v1") -> Score:
    """0–5: how close in meaning the answer is to the reference answer (best over references)."""
    refs = references(reference_answers)
    if not refs:
        return Score.undefined(NO_REFERENCE)
    if blank(answer):
        return Score(0.0, detail="empty answer: a miss, 0 against every reference (not asked)")
    outs = await asyncio.gather(*[ask(SIMILARITY, prompt_version, question=query, reference_answer=ref,
                                      answer=answer) for ref in refs])
    return of_verdicts(answer_similarity_value, "scores", list(outs))
