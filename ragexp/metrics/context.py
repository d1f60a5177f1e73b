"""Context precision, recall and F1 through a matcher (seed ``002_…``, continuous-eval).

The retrieved passages and the ground-truth contexts are cut into components — the passages
themselves for a chunk matcher, their sentences for a sentence matcher — and a matcher
(:mod:`ragexp.matchers`) says which retrieved component matches which ground-truth one:

- ``context_precision`` = retrieved components matching at least one ground-truth component
  / retrieved components (a passage retrieved twice counts twice);
- ``context_recall`` = distinct ground-truth components matched by at least one retrieved
  component / distinct ground-truth components;
- ``context_f1`` = their harmonic mean, 0 when both are 0.

``k`` keeps only the first k retrieved passages (``k: [1, 3]`` logs ``context_recall/context_recall_at_1`` …);
``matcher`` picks the matcher (``null``: the run's ``matcher`` group; a list logs one variant
each, ``context_recall/rouge_chunk`` …).

Nothing retrieved is a miss: a record whose retrieved list is empty (or holds only blank
passages, so no component) scores 0 on precision, recall and F1 — precision's 0/0 is taken as
0, as trec_eval's P@k for a query without results, so a retriever that returns nothing never
looks more precise than one that tries. Only an empty ground truth (no ground-truth component)
leaves all three undefined (status ``undefined``).

The seed's example, with ``rouge_chunk`` (ROUGE-L recall > 0.7): the first passage holds the
whole ground truth, the second does not.

    >>> from ragexp.matchers import build_matcher
    >>> CAPITAL_OF_FRANCE = dict(
    ...     contexts=["Paris is the capital of France and also the largest city in the country.",
    ...               "Lyon is a major city in France."],
    ...     gt_contexts=["Paris is the capital of France."])
    >>> rouge_chunk = build_matcher("rouge_chunk")
    >>> context_precision(**CAPITAL_OF_FRANCE, matcher=rouge_chunk) == 1 / 2
    True
    >>> context_recall(**CAPITAL_OF_FRANCE, matcher=rouge_chunk)
    1.0
    >>> context_f1(**CAPITAL_OF_FRANCE, matcher=rouge_chunk) == 2 * (1/2 * 1) / (1/2 + 1)
    True
"""

from __future__ import annotations

from typing import Any

from ragexp.matchers import Matches, build_matcher
from ragexp.metrics.base import K_RULE, Score, check_k, register


def _matches(contexts: list[str], gt_contexts: list[str], *, matcher: Any = None, **_) -> Matches:
    """The match relation the three metrics share on a record (their ``prepare``)."""
    if matcher is None:
        raise ValueError("a matcher is needed: pass matcher=build_matcher('rouge_chunk') or a matcher name")
    return build_matcher(matcher).match(contexts, gt_contexts)


def _precision(m: Matches, *, k: int | None = None, **_) -> float | Score:
    if not m.n_truth_components:
        return Score.undefined("no ground-truth component (empty ground truths)")
    value = m.precision(k)
    return 0.0 if value is None else value  # no retrieved component: nothing retrieved, a miss


def _recall(m: Matches, *, k: int | None = None, **_) -> float | Score:
    value = m.recall(k)
    return Score.undefined("no ground-truth component (empty ground truths)") if value is None else value


def _f1(m: Matches, *, k: int | None = None, **_) -> float | Score:
    p, r = _precision(m, k=k), _recall(m, k=k)
    if isinstance(p, Score):  # no ground-truth component: recall is undefined too
        return p
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def _context(contexts: list[str], gt_contexts: list[str], k: int | None, matcher: Any, finish) -> float | Score:
    check_k(k)
    return finish(_matches(contexts, gt_contexts, matcher=matcher), k=k)


_REG = dict(variant_params=("matcher", "k"), prepare=_matches, prepare_options=("matcher",), option_rules={"k": K_RULE})


@register(**_REG, finish=_precision)
def context_precision(contexts: list[str], gt_contexts: list[str], *, matcher: Any = None,
                      k: int | None = None) -> float | Score:
    """Share of the retrieved components that match a ground-truth component; range [0, 1].

    Duplicates count: a relevant passage retrieved twice is two relevant components, an
    irrelevant one twice is two irrelevant ones.

    >>> from ragexp.matchers import build_matcher
    >>> exact = build_matcher("exact_chunk")
    >>> context_precision(["a", "b", "a", "c"], ["a", "x"], matcher=exact) == 2 / 4
    True
    >>> context_precision(["a", "b", "a", "c"], ["a", "x"], matcher=exact, k=1)
    1.0
    >>> context_precision([], ["a", "x"], matcher=exact)        # nothing retrieved: a miss
    0.0
    """
    return _context(contexts, gt_contexts, k, matcher, _precision)


@register(**_REG, finish=_recall)
def context_recall(contexts: list[str], gt_contexts: list[str], *, matcher: Any = None,
                   k: int | None = None) -> float | Score:
    """Share of the distinct ground-truth components matched by a retrieved one; range [0, 1].

    With a sentence matcher the ground truths are cut into sentences too:

    >>> from ragexp.matchers import build_matcher
    >>> exact = build_matcher("exact_sentence")
    >>> context_recall(["It rains. It is cold."], ["It is cold. It is dark."], matcher=exact) == 1 / 2
    True
    """
    return _context(contexts, gt_contexts, k, matcher, _recall)


@register(**_REG, finish=_f1)
def context_f1(contexts: list[str], gt_contexts: list[str], *, matcher: Any = None,
               k: int | None = None) -> float | Score:
    """Harmonic mean of context precision and recall, 0 when both are 0; range [0, 1].

    Continuous-eval's Shakespeare example, where ROUGE-L recall 8/9 clears 0.8:

    >>> from ragexp.matchers import build_matcher
    >>> context_f1(["Shakespeare was a playwright.", "Romeo and Juliet is a play by Shakespeare."],
    ...            ["Shakespeare was a playwright.", "Romeo and Juliet is a play by William Shakespeare."],
    ...            matcher=build_matcher("rouge_sentence"))
    1.0
    """
    return _context(contexts, gt_contexts, k, matcher, _f1)
