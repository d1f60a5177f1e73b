"""LLM-judge metrics of the Tonic Validate family and the overall score (seed ``001_…``, Tonic Validate).

The judge (``conf/judge/``, any litellm model) gives typed verdicts; the arithmetic on them is
the pure functions below, each with its worked example. The runner scores a whole dataset
through :class:`ragexp.judge.engine.Judge` (concurrent, cached, budgeted); the registered metric
functions score one record when given a judge, for use from Python::

    from ragexp.judge import build_judge
    judge = build_judge("gpt4o_mini")
    answer_consistency("Paris is the capital. It has 3 m people.", ["Paris is the capital of France."], judge=judge)

Verdicts are shared: ``augmentation_precision`` reuses the relevance verdicts of
``retrieval_precision`` and the usage verdicts of ``augmentation_accuracy`` — no new request.

Empty outputs are misses (docs/records.md#absent-is-not-the-same-as-empty), scored without asking the judge: ``contexts: []`` (nothing
retrieved) gives 0 for retrieval_precision, augmentation_accuracy, augmentation_precision,
answer_consistency and answer_consistency_binary; ``answer: ""`` gives answer_similarity 0 and
augmentation_accuracy / augmentation_precision 0 (it uses no passage). Undefined (status
``undefined``, left out of the mean and counted): no reference answer, and an answer without a
main point for the two consistency metrics — an empty answer has none. An absent field is
``missing_field``.

Worked cases (the seed's definitions):

    >>> answer_consistency_value([True, False])      # one of two main points derivable from the contexts
    0.5
    >>> augmentation_precision_value(relevant=[True, True, False], used=[True, False, True])  # 1 of 2 relevant used
    0.5
    >>> augmentation_precision_value(relevant=[False, False], used=[True, True])  # none relevant: 0 by definition
    0.0
    >>> overall_value({"answer_similarity": 4.0, "retrieval_precision": 0.5, "answer_consistency": 1.0}) == (4/5 + 0.5 + 1.0) / 3
    True
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from ragexp.errors import ConfigError
from ragexp.metrics.base import Score, register

#: The judge metrics the overall score may average, and what each is divided by to lie in [0, 1].
TONIC_SCALE = {
    "answer_similarity": 5.0,
    "retrieval_precision": 1.0,
    "augmentation_accuracy": 1.0,
    "augmentation_precision": 1.0,
    "answer_consistency": 1.0,
    "answer_consistency_binary": 1.0,
}


# -- the arithmetic on verdicts (pure) -----------------------------------------------------------

def share_true(flags: Sequence[bool]) -> float | None:
    """Share of True among the verdicts; None when there is none."""
    if not flags:
        return None
    return sum(1 for f in flags if f) / len(flags)


def answer_similarity_value(scores: Sequence[float]) -> float | None:
    """The best 0–5 score over the reference answers (one verdict per reference).

    >>> answer_similarity_value([3, 5])
    5.0
    """
    return float(max(scores)) if scores else None


def retrieval_precision_value(relevant: Sequence[bool]) -> float:
    """Relevant contexts / contexts; 0 when nothing was retrieved (nothing relevant, a miss).

    >>> retrieval_precision_value([True, False, True, False]) == 2 / 4
    True
    >>> retrieval_precision_value([])
    0.0
    """
    return share_true(relevant) if relevant else 0.0


def augmentation_accuracy_value(used: Sequence[bool]) -> float:
    """Contexts the answer uses / contexts; 0 when nothing was retrieved (nothing used).

    >>> augmentation_accuracy_value([True, False, False]) == 1 / 3
    True
    >>> augmentation_accuracy_value([])
    0.0
    """
    return share_true(used) if used else 0.0


def augmentation_precision_value(relevant: Sequence[bool], used: Sequence[bool]) -> float:
    """Relevant-and-used contexts / relevant contexts; 0 when no context is relevant,
    nothing retrieved included.

    >>> augmentation_precision_value([], [])
    0.0
    """
    if len(relevant) != len(used):
        raise ValueError(f"one relevance and one usage verdict per context, got {len(relevant)} and {len(used)}")
    n_relevant = sum(1 for r in relevant if r)
    if n_relevant == 0:
        return 0.0
    return sum(1 for r, u in zip(relevant, used) if r and u) / n_relevant


def answer_consistency_value(supported: Sequence[bool]) -> float | None:
    """Main points derivable from the contexts / main points; None (undefined) when the answer has
    no point. With nothing retrieved no point is derivable: all False, 0.

    >>> answer_consistency_value([False, False])
    0.0
    >>> answer_consistency_value([]) is None
    True
    """
    return share_true(supported)


def answer_consistency_binary_value(fully_supported: bool) -> float:
    """1 if everything in the answer comes from the contexts, else 0.

    >>> answer_consistency_binary_value(False)
    0.0
    """
    return 1.0 if fully_supported else 0.0


def overall_value(values: Mapping[str, float]) -> float | None:
    """Mean of the normalised values (``answer_similarity / 5``, the others as they are)."""
    parts = []
    for key, v in values.items():
        name = key.split("/", 1)[0]
        if name not in TONIC_SCALE:
            raise ValueError(f"overall_score averages {', '.join(TONIC_SCALE)}; got {key!r}")
        parts.append(v / TONIC_SCALE[name])
    if not parts:
        return None
    return math.fsum(parts) / len(parts)


# -- registered metrics: one record through a judge ----------------------------------------------

def through_judge(name: str, judge: Any, fields: dict[str, Any], options: dict[str, Any]) -> Score:
    """One record's value of judge metric ``name``, asked of ``judge`` (a :class:`ragexp.judge.engine.Judge`).

    The judge object is passed in, never imported: metrics sit below the judge.
    """
    if judge is None or not hasattr(judge, "score_one"):
        raise ConfigError(f"{name} asks an LLM judge: pass judge=build_judge('<name>') (from ragexp.judge), "
                          f"got {judge!r}")
    return judge.score_one(name, fields, options)


@register(judge=True, bounds=(0.0, 5.0))
def answer_similarity(query: str, answer: str, reference_answers: list[str], *, prompt_version: str = "v1",
                      judge: Any = None) -> Score:
    """0–5: how close in meaning the answer is to the reference answer (best over references).

    The judge grades on a described 0–5 scale (prompt ``similarity``); see :func:`answer_similarity_value`.
    An empty answer is 0 (a miss, not asked); no reference answer leaves it undefined.
    """
    return through_judge("answer_similarity", judge,
                         {"query": query, "answer": answer, "reference_answers": reference_answers},
                         {"prompt_version": prompt_version})


@register(judge=True)
def retrieval_precision(query: str, contexts: list[str], *, prompt_version: str = "v1", judge: Any = None) -> Score:
    """Share of retrieved contexts the judge finds relevant to the question (prompt ``relevance``).

    >>> retrieval_precision_value([True, False]) == 1 / 2
    True
    """
    return through_judge("retrieval_precision", judge, {"query": query, "contexts": contexts},
                         {"prompt_version": prompt_version})


@register(judge=True)
def augmentation_accuracy(answer: str, contexts: list[str], *, prompt_version: str = "v1", judge: Any = None) -> Score:
    """Share of retrieved contexts whose information the answer uses (prompt ``usage``).

    >>> augmentation_accuracy_value([True, True, False, False]) == 2 / 4
    True
    """
    return through_judge("augmentation_accuracy", judge, {"answer": answer, "contexts": contexts},
                         {"prompt_version": prompt_version})


@register(judge=True)
def augmentation_precision(query: str, answer: str, contexts: list[str], *, prompt_version: str = "v1",
                           judge: Any = None) -> Score:
    """Relevant contexts the answer uses / relevant contexts; 0 when none is relevant.

    Reuses the verdicts of ``retrieval_precision`` and ``augmentation_accuracy``.

    >>> augmentation_precision_value([True, False], [True, True]) == 1 / 1
    True
    """
    return through_judge("augmentation_precision", judge, {"query": query, "answer": answer, "contexts": contexts},
                         {"prompt_version": prompt_version})


@register(judge=True)
def answer_consistency(answer: str, contexts: list[str], *, prompt_version: str = "v1", judge: Any = None) -> Score:
    """The judge lists the answer's main points; share of them derivable from the contexts.

    An answer without any main point (a refusal, an empty answer) is undefined (status
    ``undefined``); with nothing retrieved (``contexts: []``) no point is derivable: 0, and only
    the main points are asked.

    >>> answer_consistency_value([True, True, False]) == 2 / 3
    True
    """
    return through_judge("answer_consistency", judge, {"answer": answer, "contexts": contexts},
                         {"prompt_version": prompt_version})


@register(judge=True)
def answer_consistency_binary(answer: str, contexts: list[str], *, prompt_version: str = "v1",
                              judge: Any = None) -> Score:
    """1 when everything in the answer can be attributed to the contexts, else 0.

    Nothing retrieved: 0 (not asked); an empty answer: undefined (nothing to attribute).

    >>> answer_consistency_binary_value(True)
    1.0
    """
    return through_judge("answer_consistency_binary", judge, {"answer": answer, "contexts": contexts},
                         {"prompt_version": prompt_version})


@register(judge=True, fields=())
def overall_score(*, metrics: list[str] | None = None, judge: Any = None) -> Score:
    """Mean of the normalised values of the judge metrics above computed in the run, per sample.

    ``metrics`` restricts it to some of them (None = every one the run computes). A sample's
    overall score is ``ok`` only when each of its parts is; otherwise it carries the first
    part's status that is not ok (``undefined`` for an answer without a main point, a failure's
    own status), so a parse error never makes the overall score silently easier. Parts that are 0
    because nothing was retrieved or the answer is empty count as 0.
    """
    raise TypeError("overall_score is computed by the judge from the other judge metrics of a run; "
                    "use overall_value() on computed values")
