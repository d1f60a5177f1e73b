"""RAGQuestEval (seed ``003_…``, CRUD-RAG): questions from the reference, answered twice.

The judge picks the reference's key information and writes one question per item (prompt
``questions.v1.txt``), then answers every question from the reference and from the generated answer
(``answers.v1.txt``) (``UNANSWERABLE`` when the text
does not say; CRUD's own data writes "无法推断"). Questions the reference cannot answer are
dropped. Of the rest:

- ``questeval_recall`` = questions the generated answer answers / questions kept;
- ``questeval_precision`` = mean token F1 between the two answers, over the questions both answer
  (SQuAD normalisation for English, jieba words for Chinese: :func:`ragexp.common.text.answer_tokens`).

Questions and the reference's answers depend on the reference text alone, so the judge cache
makes a sweep generate them once per reference.

An empty answer (``answer: ""``) is a miss: it answers none of the questions (that side is not
asked), so recall is 0 and precision undefined — no question is answered by both — unless
``zero_division`` gives it a value. Undefined (status ``undefined``, left out of the mean and
counted): no reference answer, a reference the judge finds no key information in or that
answers none of its own questions. An absent field is ``missing_field``.

The seed's worked example: three questions, the answer answers two of them, with F1 0.5 and 1:

    >>> ref = ["Paris", "1889", "Gustave Eiffel"]
    >>> gen = ["Paris France", None, "Gustave Eiffel"]
    >>> recall, precision = questeval_values(ref, gen)
    >>> recall == 2 / 3
    True
    >>> precision == (2 * (1/2 * 1) / (1/2 + 1) + 1.0) / 2   # F1("Paris", "Paris France") = 2/3
    True
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any, Sequence

from ragexp.common.text import answer_tokens
from ragexp.judge.errors import ParseError
from ragexp.metrics.base import Judged, Score, register
from ragexp.metrics.judged import (NO_REFERENCE, PROMPT_VERSION, STR, Verdict, VerdictKind, blank, decided, detail,
                                   failed, listed, obj, references, text_item)

UNANSWERABLE = "UNANSWERABLE"
#: Replies meaning "the text does not say" (normalised: lowercase, no surrounding brackets or dots).
UNANSWERABLE_MARKERS = frozenset({
    "unanswerable", "not answerable", "cannot be answered", "can't be answered", "no answer", "n/a",
    "无法推断", "无法回答", "无法确定", "不可回答",
})


def is_unanswerable(answer: Any) -> bool:
    """True for a judge's "the text does not say": None, empty, or one of :data:`UNANSWERABLE_MARKERS`."""
    if answer is None:
        return True
    if not isinstance(answer, str):
        return False
    v = answer.strip().strip("<>[]()\"'`*.。 ").lower()
    return v == "" or v in UNANSWERABLE_MARKERS


def answer_f1(reference: str, generated: str) -> float:
    """Token F1 between two short answers (multiset overlap of :func:`ragexp.common.text.answer_tokens`).

    >>> answer_f1("儿童青少年的近视问题", "近视问题") == 2 * (2/5 * 2/2) / (2/5 + 2/2)
    True
    """
    r, g = Counter(answer_tokens(reference)), Counter(answer_tokens(generated))
    overlap = sum((r & g).values())
    if overlap == 0:
        return 0.0
    p, rec = overlap / sum(g.values()), overlap / sum(r.values())
    return 2 * p * rec / (p + rec)


def questeval_values(reference_answers: Sequence[str | None], generated_answers: Sequence[str | None],
                     zero_division: float | None = None) -> tuple[float | None, float | None]:
    """(recall, precision) from the per-question answers of the reference and of the generated text.

    ``None`` or an unanswerable marker means "not answerable from that text". Recall is None when
    the reference answers none of its own questions; precision is ``zero_division`` (None =
    undefined) when no question is answered by both.
    """
    if len(reference_answers) != len(generated_answers):
        raise ValueError(f"one answer per question from each text, got {len(reference_answers)} "
                         f"and {len(generated_answers)}")
    kept = [(r, g) for r, g in zip(reference_answers, generated_answers) if not is_unanswerable(r)]
    if not kept:
        return None, None
    both = [(r, g) for r, g in kept if not is_unanswerable(g)]
    recall = len(both) / len(kept)
    if not both:
        return recall, zero_division
    return recall, sum(answer_f1(r, g) for r, g in both) / len(both)


def _questions(value: Any, field: str, ctx: dict[str, Any]) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise ParseError("'questions' must be a list of {key_info, question} objects")
    questions = tuple(text_item(item, ("question",)) for item in value)
    if any(q is None for q in questions):
        raise ParseError("every item of 'questions' needs a non-empty 'question'")
    return questions  # type: ignore[return-value]


def _answers(value: Any, field: str, ctx: dict[str, Any]) -> tuple[str | None, ...]:
    if not isinstance(value, list):
        raise ParseError("'answers' must be a list with one answer per question")
    n = ctx.get("n_questions")
    if n is not None and len(value) != n:
        raise ParseError(f"'answers' must hold {n} answers (one per question, in order), got {len(value)}")
    answers: list[str | None] = []
    for a in value:
        if isinstance(a, dict):
            a = text_item(a, ("answer", "text"))
        if a is not None and not isinstance(a, str):
            a = str(a)
        answers.append(None if is_unanswerable(a) else a.strip())  # type: ignore[union-attr]
    return tuple(answers)


QUESTIONS = VerdictKind("questions", ("questions",), "a list of questions", _questions,
                        obj(questions={"type": "array", "items": obj(key_info=STR, question=STR)}))
ANSWERS = VerdictKind("answers", ("answers",), "a list of answers", _answers,
                      obj(answers={"type": "array", "items": STR}))


async def _questeval(ask: Any, answer: str, reference_answers: list[str], version: str,
                     zero_division: float | None, which: str) -> Score:
    refs = references(reference_answers)
    if not refs:
        return Score.undefined(NO_REFERENCE)
    reference = "\n\n".join(refs)
    questions = await listed(ask, QUESTIONS, version, "the judge found no key information in the reference",
                             text=reference)
    if isinstance(questions, Score):
        return questions
    ctx = {"n_questions": len(questions)}
    # The questions and the reference's answers depend on the reference alone (shared, cached); an
    # empty answer answers none of them, so its side is not asked.
    generated = (decided(Verdict((None,) * len(questions))) if blank(answer)
                 else ask(ANSWERS, version, ctx, text=answer, questions=questions))
    ref_ans, gen_ans = await asyncio.gather(ask(ANSWERS, version, ctx, text=reference, questions=questions), generated)
    bad = failed([ref_ans, gen_ans])
    if bad:
        return bad
    recall, precision = questeval_values(ref_ans.verdict.value, gen_ans.verdict.value, zero_division=zero_division)
    shown = detail(questions=questions, reference_answers=list(ref_ans.verdict.value),
                   answers=list(gen_ans.verdict.value))
    value = recall if which == "recall" else precision
    if value is None:
        why = ("the reference answers none of its own questions" if recall is None
               else "no question is answered by both the reference and the answer"
               + (" (the answer is empty)" if blank(answer) else ""))
        return Score.undefined(f"{why}: {shown}")
    return Score(value, detail=shown)


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(QUESTIONS, ANSWERS)))
async def questeval_recall(ask, answer: str, reference_answers: list[str], *, prompt_version: str = "v1") -> Score:
    """Share of the reference's answerable questions that the generated answer answers.

    Several reference answers are joined (blank line between) into one reference text. An empty
    answer answers none of its questions: 0.

    >>> questeval_values(["陕西西安市", "500万元", "173家"], ["西安市", "无法推断", "173家"])[0] == 2 / 3
    True
    """
    return await _questeval(ask, answer, reference_answers, prompt_version, None, "recall")


@register(option_rules=PROMPT_VERSION, judge=Judged(asks=(QUESTIONS, ANSWERS)))
async def questeval_precision(ask, answer: str, reference_answers: list[str], *, prompt_version: str = "v1",
                              zero_division: float | None = None) -> Score:
    """Mean token F1 of the two answers over the questions both texts answer.

    ``zero_division``: the value when no question is answered by both — an empty answer's case
    too (None = undefined, status ``undefined``, left out of the mean; 0.0 = count it as 0).

    >>> questeval_values(["173家"], ["无法推断"], zero_division=0.0)
    (0.0, 0.0)
    """
    return await _questeval(ask, answer, reference_answers, prompt_version, zero_division, "precision")
