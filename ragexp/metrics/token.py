"""Token precision, recall and F1 of retrieved passages (AutoRAG's retrieval token metrics).

Each passage is compared with every ground truth on SQuAD-normalised tokens, counted as a
multiset. For one passage ``p`` and ground truth ``g``: ``P = overlap/|p|``, ``R = overlap/|g|``,
``F1 = 2PR/(P+R)``. Per passage the maximum over ground truths is taken, separately for P, R
and F1; the sample's value is the mean over passages. The ground truths are the reference
answers by default (``against: reference_answers``) or the ground-truth passages
(``against: gt_contexts``, what AutoRAG's code compares with).

Empty outputs are misses: with nothing retrieved (``contexts: []``) all three are 0, as trec_eval
scores a query without results — a retriever that returns nothing must not look more precise
than one that tries; an empty passage among others scores 0 and counts in the mean. Only an
empty ground truth (no list item with a token) leaves the value undefined (status ``undefined``).

The seed's example — reference "Do you want to buy some?" (6 tokens) and three passages with
6/6, 4 of 5 and 4 of 6 tokens shared:

    >>> passages = ["Do you want to buy some?", "I want to buy some", "I want to buy some water"]
    >>> refs = ["Do you want to buy some?"]
    >>> token_precision(passages, refs) == (1 + 4/5 + 4/6) / 3
    True
    >>> abs(token_recall(passages, refs) - (1 + 4/6 + 4/6) / 3) < 1e-12
    True
    >>> round(token_f1(passages, refs), 6)
    0.79798
"""

from __future__ import annotations

from functools import partial

from ragexp.common.caches import text_cache
from ragexp.common.text import overlap, squad_counts
from ragexp.metrics.base import Score, register

_AGAINST = ("reference_answers", "gt_contexts")


def _fields(options: dict) -> tuple[str, str]:
    against = options.get("against", "reference_answers")
    if against not in _AGAINST:
        raise ValueError(f"against must be one of {_AGAINST}, got {against!r}")
    return ("contexts", against)


@text_cache(per_char=2)  # three floats per pair of texts: the texts' own bytes
def token_prf(passage: str, truth: str) -> tuple[float, float, float]:
    """Token precision, recall and F1 of one text against another (SQuAD tokens, multiset overlap);
    0 for all three when they share no token."""
    (pc, pn), (tc, tn) = squad_counts(passage), squad_counts(truth)
    same = overlap(pc, tc)
    if same == 0:
        return 0.0, 0.0, 0.0
    p, r = same / pn, same / tn
    return p, r, 2 * p * r / (p + r)


def _best_per_passage(passages: list[str], truths: list[str]) -> list[tuple[float, float, float]] | Score:
    """Per passage, its best token precision, recall and F1 against any ground truth (each its own
    maximum); what the three token metrics share on a record."""
    truths = [t for t in dict.fromkeys(truths) if squad_counts(t)[1]]  # distinct; one without a token is none
    if not truths:
        return Score.undefined("no ground truth with a token (empty ground truth)")
    if len(truths) == 1:  # the usual case: the one ground truth's scores are the best
        return [token_prf(p, truths[0]) for p in passages]
    return [tuple(map(max, zip(*[token_prf(p, g) for g in truths]))) for p in passages]


def _mean_of(best: list[tuple[float, float, float]], which: int, **_) -> float:
    if not best:
        return 0.0  # nothing retrieved: a miss, as trec_eval scores a query without results
    # an empty passage shares no token with anything: it scores 0 and counts in the mean
    return sum([b[which] for b in best]) / len(best)


def _token_scores(passages: list[str], truths: list[str], which: int) -> Score | float:
    best = _best_per_passage(passages, truths)
    return best if isinstance(best, Score) else _mean_of(best, which)


@register(fields_for=_fields, prepare=_best_per_passage, finish=partial(_mean_of, which=0))
def token_precision(contexts: list[str], truths: list[str], *, against: str = "reference_answers") -> float | Score:
    """Mean over passages of the best token precision against any ground truth; range [0, 1].

    ``against`` picks the ground truths: ``reference_answers`` (default) or ``gt_contexts``.
    AutoRAG's test vector (against the ground-truth passages):

    >>> gt = ["Enough for drinking water", "Just looking for a water bottle"]
    >>> ps = ["Enough for mixing water", "I want to do a nothing", "Just looking is a very healthy"]
    >>> token_precision(ps, gt, against="gt_contexts") == (3/4 + 0 + 2/5) / 3
    True
    """
    return _token_scores(contexts, truths, 0)


@register(fields_for=_fields, prepare=_best_per_passage, finish=partial(_mean_of, which=1))
def token_recall(contexts: list[str], truths: list[str], *, against: str = "reference_answers") -> float | Score:
    """Mean over passages of the best token recall against any ground truth; range [0, 1].

    >>> gt = ["Enough for drinking water", "Just looking for a water bottle"]
    >>> ps = ["Enough for mixing water", "I want to do a nothing", "Just looking is a very healthy"]
    >>> token_recall(ps, gt, against="gt_contexts") == (3/4 + 0 + 2/5) / 3
    True
    """
    return _token_scores(contexts, truths, 1)


@register(fields_for=_fields, prepare=_best_per_passage, finish=partial(_mean_of, which=2))
def token_f1(contexts: list[str], truths: list[str], *, against: str = "reference_answers") -> float | Score:
    """Mean over passages of the best per-passage token F1; range [0, 1].

    Not the harmonic mean of the reported precision and recall: each passage's F1 is
    computed first, which is what makes the seed's example come out at 0.797979…

    >>> token_f1(["Enough for mixing water"], ["Enough for drinking water"], against="gt_contexts")
    0.75
    >>> token_f1([], ["x"]), token_f1(["x", ""], ["x"])    # nothing retrieved, an empty passage: misses
    (0.0, 0.5)
    >>> token_f1(["x"], [""]).status
    'undefined'
    """
    return _token_scores(contexts, truths, 2)
