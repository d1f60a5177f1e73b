"""Answer correctness judged against the reference, in the style of Mem0's "J" score on LoCoMo: one
yes/no verdict on whether the answer gives what the reference gives (prompt ``correct.v1.txt``, ragexp's
own wording). Lenient on form, strict on substance: a paraphrase, extra detail that does not contradict,
or a date in another format is correct; a different fact, a missing key part or an evasion is not.

With several reference answers, correct against any of them is correct (one verdict each). An empty
answer is 0 (a miss, not asked); no reference answer leaves it undefined. A 0/1 verdict: with
``judge.samples`` the majority decides, a tie is 0. Where the token-overlap ``locomo_qa`` gives a correct
paraphrase 0, this gives it 1; it costs a judge call per question and reference.
"""

from __future__ import annotations

import asyncio
from typing import Sequence

from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import NO_REFERENCE, PROMPT_VERSION, blank, of_verdicts, references, yes_no

CORRECT = yes_no("correct", "correct")


def answer_correct_value(verdicts: Sequence[bool]) -> float:
    """1 when the answer is correct against some reference answer (one verdict per reference), else 0.

    >>> answer_correct_value([False, True]), answer_correct_value([False])
    (1.0, 0.0)
    """
    return 1.0 if any(verdicts) else 0.0


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(CORRECT,), scale=1.0), binary=True)
async def answer_correct(ask, query: str, answer: str, reference_answers: list[str], *,
                         prompt_version: str = "v1") -> Score:
    """1 when a judge finds the answer gives what a reference answer gives, else 0.

    >>> answer_correct_value([True])
    1.0
    """
    refs = references(reference_answers)
    if not refs:
        return Score.undefined(NO_REFERENCE)
    if blank(answer):
        return Score(0.0, detail="empty answer: a miss, 0 (not asked)")
    outs = await asyncio.gather(*[ask(CORRECT, prompt_version, question=query, reference_answer=ref, answer=answer)
                                  for ref in refs])
    return of_verdicts(answer_correct_value, "correct", list(outs))
