"""Ranked retrieval metrics at cut-offs: hit rate, MRR, nDCG, MAP, precision@k, recall@k.

Binary relevance, definitions as trec_eval (values agree with ranx on the same run):

- ``hit_rate@k``        1 if a relevant item is among the first k, else 0;
- ``mrr@k``             1 / rank of the first relevant item among the first k, 0 if none;
- ``precision_at_k@k``  relevant items among the first k / k (k itself, even if fewer were retrieved);
- ``recall_at_k@k``     relevant items among the first k / number of relevant items;
- ``map@k``             sum of precision@rank over the relevant ranks ≤ k / number of relevant
  items (``denominator: hits`` divides by the relevant items found instead, as AutoRAG and
  continuous-eval do; 0 when none is found);
- ``ndcg@k``            DCG / ideal DCG, gain ``1 / log2(rank + 1)`` per relevant rank, the
  ideal list holding min(relevant items, k) relevant items.

``k: null`` scores the whole retrieved list (precision then divides by its length).
``k: [1, 3, 5, 10]`` logs one value per cut-off, ``ndcg/ndcg_at_1`` … ``ndcg/ndcg_at_10``.

**Where relevance comes from** (option ``relevance``):

- ``ids``: the relevant items are the distinct ``gt_context_ids``; a retrieved id is relevant
  the first time it appears (a repeated id brings nothing new, as in a ranx/trec_eval run,
  which holds each document once — so AutoRAG's runs with one document retrieved five times
  get its precision of 1/10);
- ``matcher``: ``contexts`` against ``gt_contexts`` through the matcher (:mod:`ragexp.matchers`);
  the relevant items are the distinct ground-truth contexts, and a retrieved passage is
  relevant when it matches (with a sentence matcher: one of its sentences matches a sentence
  of) a ground-truth context that no higher-ranked passage matched;
- ``auto`` (default): ``ids`` when the dataset has both ``context_ids`` and
  ``gt_context_ids``, otherwise ``matcher``.

**Ids of two granularities** (option ``group_ids: [fine, coarse]``, two regular expressions whose
first group is the key they share): a memory that retrieves whole sessions (``S3``) against evidence
written as turns (``D3:5``) is compared at the retrieval's granularity. When every retrieved id
matches ``coarse``, each ground-truth id is read as its key (a turn by ``fine``, a coarse id by
``coarse``), duplicates collapsed: the relevant items are the distinct sessions of the evidence, so
recall@k, MRR and nDCG say whether the right sessions were ranked high. An entry matching neither is a
relevant item never found (a miss, as at turn level); a record whose retrieval mixes coarse and other
ids, or whose ground truth has no key at all, has no value (status ``undefined``, with the reason).
Without the option, or with no coarse id retrieved, ids are compared as written
(docs/metrics.md#ranked-ids-of-two-granularities).

Nothing retrieved is a miss: an empty retrieved list scores 0 on every metric, as trec_eval
scores a query without results (precision with ``k: null`` too: 0 retrieved, 0 relevant).
A record without any relevant item (an empty ground truth) has no value (status
``undefined``): recall, AP and nDCG are undefined there.

A worked example: relevant ``{d1, d4}``, run ``d3 d1 d2 d4``.

    >>> run, rel = ["d3", "d1", "d2", "d4"], ["d1", "d4"]
    >>> mrr(run, rel, k=10)
    0.5
    >>> map(run, rel, k=10) == (1/2 + 2/4) / 2
    True
    >>> import math
    >>> ndcg(run, rel, k=10) == (1/math.log2(3) + 1/math.log2(5)) / (1 + 1/math.log2(3))
    True
    >>> precision_at_k(run, rel, k=3) == 1 / 3
    True
"""

from __future__ import annotations

import builtins
import math
import re
from functools import lru_cache
from typing import Any

from ragexp.matchers import build_matcher
from ragexp.metrics.base import K_RULE, Score, check_k, register

RELEVANCE = ("auto", "ids", "matcher")
_IDS = ("context_ids", "gt_context_ids")
_TEXTS = ("contexts", "gt_contexts")


def _fields(options: dict[str, Any]) -> tuple[str, str]:
    relevance = options.get("relevance", "auto")
    if relevance not in RELEVANCE:
        raise ValueError(f"relevance must be one of {RELEVANCE}, got {relevance!r}")
    return _TEXTS if relevance == "matcher" else _IDS


def _resolve(options: dict[str, Any], have: tuple[str, ...]) -> dict[str, Any]:
    if options.get("relevance", "auto") == "auto":
        options["relevance"] = "ids" if all(f in have for f in _IDS) else "matcher"
    return options


def judgement(retrieved: list[str], truths: list[str], *, relevance: str = "auto", matcher: Any = None,
              group_ids: list[str] | None = None) -> tuple[list[bool], list[int], int, int] | Score:
    """What every ranked metric reads of a record: per rank, is the item relevant and how many relevant
    items are covered up to it; the number of relevant items; the number retrieved. An ``undefined``
    Score when nothing is relevant. A suite judges each record once and shares it among its metrics
    and cut-offs.

    >>> judgement(["a", "b", "a", "c"], ["a", "c", "z"], relevance="ids")
    ([True, False, False, True], [1, 1, 1, 2], 3, 4)
    >>> judgement(["S4", "S1"], ["D1:3", "D1:7", "D2:1"], relevance="ids", group_ids=["^D(\\d+):", "^S(\\d+)$"])
    ([False, True], [0, 1], 2, 2)
    """
    if relevance not in RELEVANCE:
        raise ValueError(f"relevance must be one of {RELEVANCE}, got {relevance!r}")
    if relevance == "auto":
        relevance = "ids" if matcher is None else "matcher"
    flags: list[bool] = []
    covered: list[int] = []
    if relevance == "ids" and group_ids is not None and retrieved:
        grouped = _grouped(retrieved, truths, group_ids)
        if isinstance(grouped, Score):
            return grouped
        retrieved, truths = grouped
    if relevance == "ids":
        wanted = {t for t in truths if t != ""}
        seen: set[str] = set()
        for item in retrieved:
            new = item in wanted and item not in seen
            if new:
                seen.add(item)
            flags.append(new)
            covered.append(len(seen))
        n_relevant = len(wanted)
    else:
        if matcher is None:
            raise ValueError("relevance 'matcher' needs a matcher (a name such as 'rouge_chunk', or build_matcher(...))")
        m = build_matcher(matcher).match(retrieved, truths)
        found: set[int] = set()
        for hits in m.context_hits:
            new = not hits <= found
            found |= hits
            flags.append(new)
            covered.append(len(found))
        n_relevant = m.n_truth_contexts
    if n_relevant == 0:
        return Score.undefined("no relevant item (empty ground truth)")
    return flags, covered, n_relevant, len(retrieved)


@lru_cache(maxsize=16)
def _patterns(group_ids: tuple[str, ...]) -> tuple[re.Pattern, re.Pattern]:
    if len(group_ids) != 2:
        raise ValueError(f"group_ids must be two regular expressions [fine, coarse], got {list(group_ids)!r}")
    fine, coarse = (re.compile(p) for p in group_ids)
    return fine, coarse


def _key(pattern: re.Pattern, item: str) -> str | None:
    m = pattern.search(item)
    return None if m is None else (m.group(1) if pattern.groups else m.group(0))


def _grouped(retrieved: list[str], truths: list[str], group_ids: list[str]) -> tuple[list[str], list[str]] | Score:
    """Both lists at the coarse granularity when every retrieved id is coarse; as written when none is; an
    ``undefined`` Score when the retrieval mixes them or no ground-truth id has a key (module docstring)."""
    fine, coarse = _patterns(tuple(group_ids))
    keys = [_key(coarse, r) for r in retrieved]
    n_coarse = sum(k is not None for k in keys)
    if n_coarse == 0:
        return retrieved, truths
    if n_coarse < len(keys):
        return Score.undefined(f"mixed granularity: {n_coarse} of {len(keys)} retrieved ids are coarse "
                               f"({group_ids[1]}), the others not (e.g. {retrieved[keys.index(None)]!r})")
    wanted = [_key(coarse, t) or _key(fine, t) for t in truths]
    if not any(w is not None for w in wanted):
        return Score.undefined(f"coarse ids retrieved ({retrieved[0]!r}) but no ground-truth id has a key by "
                               f"group_ids (e.g. {truths[0]!r})" if truths else "no relevant item (empty ground truth)")
    # a truth with no key: a relevant item of its own, never retrieved (a miss, as at fine granularity)
    return ([f"group {k}" for k in keys],
            [f"group {w}" if w is not None else f"as written {t}" for w, t in zip(wanted, truths) if t != ""])


def _ranked(retrieved, truths, k, relevance, matcher, finish, group_ids=None, **options):
    check_k(k)
    judged = judgement(retrieved, truths, relevance=relevance, matcher=matcher, group_ids=group_ids)
    if isinstance(judged, Score):
        return judged
    return finish(judged, k=k, **options)


def _depth(judged, k):
    n = len(judged[0])
    return n if k is None or k > n else k


# Each metric's arithmetic on a judgement (``finish``), then the metric itself.

def _found(judged, depth: int) -> bool:
    """Whether a relevant item is among the first ``depth`` (``covered``: relevant items found up to a rank)."""
    return depth > 0 and judged[1][depth - 1] > 0


def _hit_rate(judged, *, k: int | None = 10, **_) -> float:
    return 1.0 if _found(judged, _depth(judged, k)) else 0.0


def _mrr(judged, *, k: int | None = 10, **_) -> float:
    return 1.0 / (judged[0].index(True) + 1) if _found(judged, _depth(judged, k)) else 0.0


def _ndcg(judged, *, k: int | None = 10, **_) -> float:
    flags, _, n_relevant, _ = judged
    if not _found(judged, _depth(judged, k)):
        return 0.0  # a DCG of 0
    dcg = math.fsum([_gain(rank) for rank in range(_depth(judged, k)) if flags[rank]])
    return dcg / _ideal_dcg(n_relevant if k is None else builtins.min(n_relevant, k))


def _map(judged, *, k: int | None = 10, denominator: str = "relevant", **_) -> float:
    flags, _, n_relevant, _ = judged
    hits, total = 0, 0.0
    for rank in range(_depth(judged, k)):
        if flags[rank]:
            hits += 1
            total += hits / (rank + 1)
    if denominator == "hits":
        return total / hits if hits else 0.0
    return total / n_relevant


def _precision_at_k(judged, *, k: int | None = 10, **_) -> float:
    divisor = judged[3] if k is None else k
    if divisor == 0:
        return 0.0  # nothing retrieved: a miss (trec_eval's P of a query without results)
    return sum(judged[0][:_depth(judged, k)]) / divisor


def _recall_at_k(judged, *, k: int | None = 10, **_) -> float:
    _, covered, n_relevant, _ = judged
    depth = _depth(judged, k)
    return (covered[depth - 1] if depth else 0) / n_relevant


@lru_cache(maxsize=1024)  # keyed by a rank: ranks beyond are computed
def _gain(rank: int) -> float:
    """The discounted gain of 0-based ``rank``: ``1 / log2(rank + 2)``."""
    return 1.0 / math.log2(rank + 2)


@lru_cache(maxsize=1024)
def _ideal_dcg(n: int) -> float:
    """The DCG of n relevant items at the top of a list."""
    return math.fsum([_gain(rank) for rank in range(n)])


def _compiles(p: Any) -> bool:
    try:
        re.compile(p)
    except (re.error, TypeError):
        return False
    return isinstance(p, str)


_REG = dict(fields_for=_fields, resolve=_resolve, variant_params=("k", "matcher"), prepare=judgement,
            prepare_options=("relevance", "matcher", "group_ids"), option_rules={
                "group_ids": (lambda v: v is None or (isinstance(v, list) and len(v) == 2 and all(_compiles(p) for p in v)),
                              lambda: "two regular expressions [fine, coarse] (each's first group the shared key)"),
                "k": K_RULE,
                "relevance": (lambda v: v in ("auto", "ids", "matcher"), lambda: "one of 'auto', 'ids', 'matcher'"),
                "denominator": (lambda v: v in ("relevant", "hits"), lambda: "one of 'relevant', 'hits'")})


@register(**_REG, finish=_hit_rate)
def hit_rate(retrieved: list[str], relevant: list[str], *, k: int | None = 10, relevance: str = "auto",
             matcher: Any = None, group_ids: list[str] | None = None) -> float | Score:
    """1 if a relevant item is among the first k retrieved, else 0; range [0, 1].

    >>> hit_rate(["x", "y", "a"], ["a"], k=2), hit_rate(["x", "y", "a"], ["a"], k=3)
    (0.0, 1.0)
    """
    return _ranked(retrieved, relevant, k, relevance, matcher, _hit_rate, group_ids)


@register(**_REG, finish=_mrr)
def mrr(retrieved: list[str], relevant: list[str], *, k: int | None = 10, relevance: str = "auto",
        matcher: Any = None, group_ids: list[str] | None = None) -> float | Score:
    """Reciprocal rank of the first relevant item among the first k, 0 if none; range [0, 1].

    >>> mrr(["x", "a", "b"], ["a", "b"]) == 1 / 2
    True
    """
    return _ranked(retrieved, relevant, k, relevance, matcher, _mrr, group_ids)


@register(**_REG, finish=_ndcg)
def ndcg(retrieved: list[str], relevant: list[str], *, k: int | None = 10, relevance: str = "auto",
         matcher: Any = None, group_ids: list[str] | None = None) -> float | Score:
    """Normalised discounted cumulative gain at k, binary gains; range [0, 1].

    The ideal list holds min(number of relevant items, k) relevant items:

    >>> import math
    >>> ndcg(["x", "a"], ["a", "b", "c"], k=2) == (1 / math.log2(3)) / (1 + 1 / math.log2(3))
    True
    """
    return _ranked(retrieved, relevant, k, relevance, matcher, _ndcg, group_ids)


@register(**_REG, finish=_map)
def map(retrieved: list[str], relevant: list[str], *, k: int | None = 10, relevance: str = "auto",  # noqa: A001
        matcher: Any = None, group_ids: list[str] | None = None, denominator: str = "relevant") -> float | Score:
    """Average precision at k (averaged over the run: MAP); range [0, 1].

    ``denominator: relevant`` (trec_eval, ranx) divides the sum of precisions at the relevant
    ranks by the number of relevant items; ``hits`` divides by the relevant items found (what
    AutoRAG and continuous-eval compute), 0 when none is found.

    >>> run, rel = ["a", "x", "b"], ["a", "b", "c", "d"]
    >>> map(run, rel) == (1/1 + 2/3) / 4
    True
    >>> map(run, rel, denominator="hits") == (1/1 + 2/3) / 2
    True
    """
    if denominator not in ("relevant", "hits"):
        raise ValueError(f"denominator must be 'relevant' or 'hits', got {denominator!r}")
    return _ranked(retrieved, relevant, k, relevance, matcher, _map, group_ids, denominator=denominator)


@register(**_REG, finish=_precision_at_k)
def precision_at_k(retrieved: list[str], relevant: list[str], *, k: int | None = 10, relevance: str = "auto",
                   matcher: Any = None, group_ids: list[str] | None = None) -> float | Score:
    """Relevant items among the first k / k; range [0, 1].

    k is the divisor even when fewer items were retrieved (trec_eval's P@k); with ``k: null``
    the divisor is the number retrieved. A repeated relevant id counts once:

    >>> precision_at_k(["a", "a", "a"], ["a"], k=5) == 1 / 5
    True
    >>> precision_at_k(["a", "x"], ["a"], k=None) == 1 / 2
    True
    >>> precision_at_k([], ["a"], k=None)     # nothing retrieved: a miss
    0.0
    """
    return _ranked(retrieved, relevant, k, relevance, matcher, _precision_at_k, group_ids)


@register(**_REG, finish=_recall_at_k)
def recall_at_k(retrieved: list[str], relevant: list[str], *, k: int | None = 10, relevance: str = "auto",
                matcher: Any = None, group_ids: list[str] | None = None) -> float | Score:
    """Relevant items among the first k / number of relevant items; range [0, 1].

    >>> recall_at_k(["a", "x", "b"], ["a", "b", "c"], k=2) == 1 / 3
    True
    """
    return _ranked(retrieved, relevant, k, relevance, matcher, _recall_at_k, group_ids)
