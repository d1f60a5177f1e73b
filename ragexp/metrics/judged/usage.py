"""Augmentation accuracy (seed ``001_…``, Tonic Validate): share of retrieved passages the answer uses.

The judge reads each retrieved passage with the answer (prompt ``usage.v1.txt``). Nothing retrieved,
or an empty answer, is 0 without asking: nothing is used.
"""

from __future__ import annotations

from typing import Sequence

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import PROMPT_VERSION, blank, of_verdicts, passages, per_passage, share_true, yes_no

USAGE = yes_no("usage", "used")


def augmentation_accuracy_value(used: Sequence[bool]) -> float:
    """Contexts the answer uses / contexts; 0 when nothing was retrieved (nothing used).

    >>> augmentation_accuracy_value([True, False, False]) == 1 / 3
    True
    >>> augmentation_accuracy_value([])
    0.0
    """
    return share_true(used) if used else 0.0


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(USAGE,), scale=1.0))
async def augmentation_accuracy(ask, answer: str, contexts: list[str], *, prompt_version: str = "v1") -> Score:
    """Share of retrieved contexts whose information the answer uses (prompt ``usage``).

    >>> augmentation_accuracy_value([True, True, False, False]) == 2 / 4
    True
    """
    if not passages(contexts):
        return Score(augmentation_accuracy_value([]), detail="nothing retrieved: no passage used (not asked)")
    if blank(answer):
        flags = [False] * len(contexts or [])
        return Score(augmentation_accuracy_value(flags), detail="empty answer: it uses no passage (not asked)")
    outs = await per_passage(ask, contexts, USAGE, prompt_version, answer=answer)
    return of_verdicts(augmentation_accuracy_value, "used", outs)
