"""Properties every deterministic metric of the registry must have (hypothesis), and a check
that none escapes them.

Records are generated from the canonical fields a metric declares, over a small vocabulary so
that texts and ids overlap often. For every registered non-judge metric, under each value of
its matcher / cut-off / mode options:

- the value lies within the metric's declared bounds, or is a documented status;
- the run's value does not depend on the order of the samples;
- the function is pure: the same inputs give the same value twice.

Then the duplicate rules of SPEC §2.2-§2.3: duplicating the retrieved list leaves context
precision and recall unchanged (duplicates count in precision — both counts double), duplicate
ground truths never change recall, and appending already-retrieved ids changes no ranked
metric at ``k: null`` except precision.
"""

from __future__ import annotations

import math
import warnings

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragexp.core.scoring import MetricSpec, score
from ragexp.core.tally import tally_of
from ragexp.matchers import MATCHER_NAMES, build_matcher
from ragexp.metrics import STATUSES, Score, load_all
from ragexp.metrics.context import context_f1, context_precision, context_recall
from ragexp.metrics.ranking import hit_rate, mrr, ndcg, precision_at_k, recall_at_k
from ragexp.metrics.ranking import map as average_precision
from ragexp.common.records import Record

REGISTRY = load_all()
DETERMINISTIC = sorted(name for name, info in REGISTRY.items() if not info.judge)

WORDS = ["paris", "is", "the", "capital", "of", "France", "Lyon", "a", "city", "it", "rains", "模型", "向量", "3.5"]
SENTENCE = st.lists(st.sampled_from(WORDS), min_size=1, max_size=8).map(lambda ws: " ".join(ws) + ".")
TEXT = st.lists(SENTENCE, min_size=1, max_size=3).map(" ".join)
IDS = st.lists(st.sampled_from(["d1", "d2", "d3", "d4", "d5"]), min_size=1, max_size=6)

#: How to generate each canonical field. A metric reading a field not listed here fails the
#: coverage test below, so no metric can escape the properties.
FIELD_STRATEGIES = {
    "query": TEXT,
    "contexts": st.lists(TEXT, min_size=1, max_size=5),
    "gt_contexts": st.lists(TEXT, min_size=1, max_size=3),
    "context_ids": IDS,
    "gt_context_ids": IDS,
    "answer": TEXT,
    "reference_answers": st.lists(TEXT, min_size=1, max_size=3),
    "label": st.booleans(),
    "latency_s": st.floats(min_value=0, max_value=1e4, allow_nan=False),
    "category": st.sampled_from(["multi_hop", "temporal", "open_domain", "single_hop", "adversarial", "other"]),
    "timings": st.one_of(st.none(), st.dictionaries(st.sampled_from(["search", "answer"]),
                                                    st.floats(min_value=0, max_value=1e3, allow_nan=False))),
}

#: Option values every property is checked under (options not listed keep their default).
OPTION_VALUES = {
    "matcher": [build_matcher(name) for name in MATCHER_NAMES] + [build_matcher({"name": "rouge_chunk", "inclusive": True})],
    "k": [None, 1, 3, 10],
    "against": None,          # filled from each metric's own allowed values below
    "relevance": ["ids", "matcher"],
    "denominator": ["relevant", "hits"],
    "lowercase": [False, True],
    "use_stemmer": [False, True],
    "inclusive": [False, True],
    "stopwords": [None, "english"],
    "tokenizer": ["cl100k_base"],
    "stage": ["search", "answer"],
    "percentile": ["p0", "p50", "p95", "p100"],
    # ids of two granularities (docs/metrics.md, "Ranked ids of two granularities"): the random ids match neither
    # pattern, or both when a strategy draws D<n>:<m> / S<n>; either way the properties must hold
    "group_ids": [None, [r"^D(\d+):", r"^S(\d+)$"]],
}
AGAINST = {"token_precision": ["reference_answers", "gt_contexts"], "token_recall": ["reference_answers", "gt_contexts"],
           "token_f1": ["reference_answers", "gt_contexts"], "avg_coverage": ["answer", "reference"]}


def _option_sets(name):
    info = REGISTRY[name]
    sets = [{}]
    for opt in info.options:
        values = AGAINST.get(name) if opt == "against" else OPTION_VALUES.get(opt)
        if values:
            sets = [{**s, opt: v} for s in sets for v in values]
    # relevance by ids reads no text: one matcher is enough there
    first = OPTION_VALUES["matcher"][0]
    return [s for s in sets if s.get("relevance") != "ids" or s.get("matcher", first) is first]


CASES = [(name, opts) for name in DETERMINISTIC for opts in _option_sets(name)]


def _spec(name, opts):
    info = REGISTRY[name]
    opts = dict(opts)
    matcher = opts.pop("matcher", None)
    if info.uses_matcher and matcher is None:
        matcher = build_matcher("rouge_chunk")
    spec = MetricSpec(key=name, info=info, options=opts, matcher=matcher)
    spec.fields  # noqa: B018 - resolves fields_for now
    return spec


def _records(draw, fields, n):
    out = []
    for i in range(n):
        values = {f: draw(FIELD_STRATEGIES[f]) for f in fields if f != "query"}
        out.append(Record(id=str(i), query="q", **values))
    return out


def test_every_deterministic_metric_is_covered():
    assert DETERMINISTIC, "the registry is empty"
    for name in DETERMINISTIC:
        info = REGISTRY[name]
        for opts in _option_sets(name):
            fields = _spec(name, opts).fields
            unknown = [f for f in fields if f not in FIELD_STRATEGIES]
            assert not unknown, f"metric '{name}' reads {unknown}: add a strategy to FIELD_STRATEGIES"
        unknown_opts = [o for o in info.options if o not in OPTION_VALUES and o not in ("tokenize", "smooth_method",
                                                                                         "smooth_value", "threshold",
                                                                                         "zero_division")]
        assert not unknown_opts, f"metric '{name}' has options {unknown_opts} the properties do not vary"
    judged = sorted(name for name, info in REGISTRY.items() if info.judge)
    assert set(judged) | set(DETERMINISTIC) == set(REGISTRY)


def _values(spec, records):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        per = score(records, [spec])
        values, _ = tally_of([spec], per, records).aggregate()
    return per.get(spec.key, []), values[spec.key]


@pytest.mark.parametrize(("name", "opts"), CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}" for n, o in CASES])
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_bounds_order_invariance_and_purity(name, opts, data):
    spec = _spec(name, opts)
    lo, hi = spec.info.bounds
    records = _records(data.draw, spec.fields, data.draw(st.integers(1, 5)))
    per, value = _values(spec, records)
    tol = 1e-9 * max(1.0, abs(hi) if math.isfinite(hi) else 1.0)  # sacrebleu's 100.00000000000004
    for s in per:
        assert isinstance(s, Score) and s.status in STATUSES
        if s.status == "ok":
            assert lo - tol <= s.value <= hi + tol, (name, opts, s)
        else:
            assert s.value is None
    if value is not None:
        assert lo - tol <= value <= hi + tol
    shuffled = data.draw(st.permutations(records))
    per2, value2 = _values(spec, list(shuffled))
    assert (value is None) == (value2 is None)
    if value is not None:
        assert value2 == pytest.approx(value, rel=1e-12, abs=1e-12)
    _, value3 = _values(spec, records)
    assert value3 == value or (value is None and value3 is None)


MATCHERS = [build_matcher(name) for name in MATCHER_NAMES]


@settings(max_examples=150, deadline=None)
@given(st.lists(TEXT, min_size=1, max_size=5), st.lists(TEXT, min_size=1, max_size=3),
       st.sampled_from(MATCHERS), st.sampled_from([None, 1, 2, 5]))
def test_context_duplicates(contexts, truths, matcher, k):
    p = context_precision(contexts, truths, matcher=matcher)
    r = context_recall(contexts, truths, matcher=matcher)
    f = context_f1(contexts, truths, matcher=matcher)
    assert context_precision(contexts + contexts, truths, matcher=matcher) == p
    assert context_recall(contexts + contexts, truths, matcher=matcher) == r
    assert context_recall(contexts, truths + truths[::-1], matcher=matcher) == r
    assert context_f1(contexts + contexts, truths, matcher=matcher) == f
    if not isinstance(p, Score):
        assert 0 <= p <= 1 and 0 <= context_precision(contexts, truths, matcher=matcher, k=k) <= 1


@settings(max_examples=300, deadline=None)
@given(IDS, IDS, st.lists(st.sampled_from(["d1", "d2", "d3", "d4", "d5"]), max_size=4))
def test_ranked_duplicates(run, relevant, repeats):
    seen = [r for r in repeats if r in run]
    for fn in (hit_rate, mrr, ndcg, average_precision, recall_at_k):
        assert fn(run + seen, relevant, k=None, relevance="ids") == fn(run, relevant, k=None, relevance="ids")
        assert fn(run, relevant + relevant, k=None, relevance="ids") == fn(run, relevant, k=None, relevance="ids")
    assert precision_at_k(run + seen, relevant, k=None, relevance="ids") * len(run + seen) == pytest.approx(
        precision_at_k(run, relevant, k=None, relevance="ids") * len(run))
    for k in (1, 3, 10):
        assert precision_at_k(run, relevant, k=k, relevance="ids") <= 1.0
        assert ndcg(run, relevant, k=k, relevance="ids") <= 1.0 + 1e-12
