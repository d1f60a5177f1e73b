"""Answer consistency (seed ``001_…``, Tonic Validate): share of the answer's main points the passages support.

The judge lists the answer's main points (prompt ``main_points.v1.txt``), then says of each whether
it can be derived from the retrieved passages (``support.v1.txt``). An answer without any main point
(a refusal, an empty answer) is undefined; with nothing retrieved no point is derivable: 0, and only
the main points are asked.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import (PROMPT_VERSION, STR, VerdictKind, blank, detail, listed, obj, of_verdicts,
                                   passages, read_sentences, share_true, yes_no)

MAIN_POINTS = VerdictKind("main_points", ("points", "main_points"), "a list of sentences", read_sentences,
                          obj(points={"type": "array", "items": STR}))
SUPPORT = yes_no("support", "supported")


def answer_consistency_value(supported: Sequence[bool]) -> float | None:
    """Main points derivable from the contexts / main points; None (undefined) when the answer has
    no point. With nothing retrieved no point is derivable: all False, 0.

    >>> answer_consistency_value([True, False])      # one of two main points derivable from the contexts
    0.5
    >>> answer_consistency_value([False, False])
    0.0
    >>> answer_consistency_value([]) is None
    True
    """
    return share_true(supported)


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(MAIN_POINTS, SUPPORT), scale=1.0))
async def answer_consistency(ask, answer: str, contexts: list[str], *, prompt_version: str = "v1") -> Score:
    """The judge lists the answer's main points; share of them derivable from the contexts.

    >>> answer_consistency_value([True, True, False]) == 2 / 3
    True
    """
    if blank(answer):
        return Score.undefined("empty answer: no main point to check against the passages")
    points = await listed(ask, MAIN_POINTS, prompt_version, "the judge found no main point in the answer",
                          answer=answer)
    if isinstance(points, Score):
        return points
    if not passages(contexts):  # the points depend on the answer alone; none can be derived from nothing
        flags = [False] * len(points)
        return Score(answer_consistency_value(flags), detail=detail(
            points=points, supported=flags, reasons=["nothing retrieved (not asked)"] * len(flags)))
    outs = await asyncio.gather(*[ask(SUPPORT, prompt_version, statement=p, contexts=contexts) for p in points])
    return of_verdicts(answer_consistency_value, "supported", list(outs), points=points)
