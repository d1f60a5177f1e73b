"""Binary answer consistency (seed ``001_…``, Tonic Validate): 1 when everything in the answer comes from the passages.

One verdict on the whole answer and the retrieved passages (prompt ``full_support.v1.txt``).
Nothing retrieved: 0 (not asked); an empty answer: undefined (nothing to attribute). A 0/1 verdict:
with ``judge.samples`` the majority decides, a tie is 0.
"""

from __future__ import annotations

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import PROMPT_VERSION, blank, passages, yes_no

FULL_SUPPORT = yes_no("full_support", "fully_supported")


def answer_consistency_binary_value(fully_supported: bool) -> float:
    """1 if everything in the answer comes from the contexts, else 0.

    >>> answer_consistency_binary_value(False)
    0.0
    """
    return 1.0 if fully_supported else 0.0


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(FULL_SUPPORT,), scale=1.0), binary=True)
async def answer_consistency_binary(ask, answer: str, contexts: list[str], *, prompt_version: str = "v1") -> Score:
    """1 when everything in the answer can be attributed to the contexts, else 0.

    >>> answer_consistency_binary_value(True)
    1.0
    """
    if blank(answer):
        return Score.undefined("empty answer: nothing to attribute to the passages")
    if not passages(contexts):
        return Score(answer_consistency_binary_value(False),
                     detail="nothing retrieved: nothing to attribute the answer to (not asked)")
    out = await ask(FULL_SUPPORT, prompt_version, answer=answer, contexts=contexts)
    if not out.ok:
        return Score(None, out.status, out.detail)
    return Score(answer_consistency_binary_value(out.verdict.value), detail=out.verdict.reason)
