"""An empty output of the system under test is a miss; only an empty ground truth is undefined.

A retriever that finds nothing (``contexts: []``) and a generator that answers nothing
(``answer: ""``) must be scored — as trec_eval scores a query with no results — never leave
the mean. An *absent* field (``None``) is ``missing_field``; a present ground truth with
nothing in it (``[]``, blank strings, a reference without a keyword) is ``undefined``.
"""

from __future__ import annotations

import math

import pytest

from ragexp.core.scoring import _as_score, build_metrics, check_fields, score
from ragexp.matchers import build_matcher
from ragexp.metrics.answer import answer_token_f1, bleu, exact_match, rouge1, rouge2, rougeL
from ragexp.metrics.base import STATUSES, Score
from ragexp.metrics.context import context_f1, context_precision, context_recall
from ragexp.metrics.keyword import avg_coverage, confusion, keyword_overlap
from ragexp.metrics.keyword import keyword_verdict_accuracy as accuracy
from ragexp.metrics.ranking import hit_rate, map, mrr, ndcg, precision_at_k, recall_at_k
from ragexp.metrics.token import token_f1, token_precision, token_recall
from ragexp.common.records import Record, present_fields, to_record

RANKED = (hit_rate, mrr, ndcg, map, precision_at_k, recall_at_k)
TOKEN = (token_precision, token_recall, token_f1)
CONTEXT = (context_precision, context_recall, context_f1)
ANSWER = (exact_match, answer_token_f1, bleu, rouge1, rouge2, rougeL, keyword_overlap)
PARIS = ["Paris is the capital of France."]


def status(value) -> str:
    return value.status if isinstance(value, Score) else "ok"


# --- nothing retrieved is a miss -------------------------------------------------------------

@pytest.mark.parametrize("fn", RANKED, ids=lambda f: f.__name__)
@pytest.mark.parametrize("k", [1, 5, None])
def test_nothing_retrieved_scores_zero_on_ranked_metrics(fn, k):
    assert fn([], ["d1", "d2"], k=k, relevance="ids") == 0.0


@pytest.mark.parametrize("fn", RANKED, ids=lambda f: f.__name__)
def test_nothing_retrieved_through_a_matcher_scores_zero(fn):
    assert fn([], PARIS, k=3, relevance="matcher", matcher="exact_chunk") == 0.0


@pytest.mark.parametrize("fn", TOKEN, ids=lambda f: f.__name__)
def test_nothing_retrieved_scores_zero_on_token_metrics(fn):
    assert fn([], ["Paris"]) == 0.0
    # an empty passage among others shares no token: it scores 0 and counts in the mean
    assert fn(["Paris", ""], ["Paris"]) == (1 + 0) / 2


@pytest.mark.parametrize("fn", CONTEXT, ids=lambda f: f.__name__)
@pytest.mark.parametrize("matcher", ["exact_chunk", "rouge_sentence"])
def test_nothing_retrieved_scores_zero_on_context_metrics(fn, matcher):
    m = build_matcher(matcher)
    assert fn([], PARIS, matcher=m) == 0.0
    assert fn(["   "], PARIS, matcher=m) == 0.0     # passages without a component retrieve nothing either
    assert fn([], PARIS, matcher=m, k=2) == 0.0


# --- an empty answer is a wrong answer -----------------------------------------------------------

@pytest.mark.parametrize("fn", ANSWER, ids=lambda f: f.__name__)
@pytest.mark.parametrize("answer", ["", "   "])
def test_empty_answer_scores_zero(fn, answer):
    assert fn(answer, ["The Eiffel tower", "Tour Eiffel"]) == 0.0


def test_empty_answer_counts_as_judged_wrong_in_the_confusion_metrics():
    # label True (reference correct) and an empty answer: a false negative, not a skipped row
    assert confusion([True, True], ["", "paris capital"], [["paris capital"]] * 2) == \
        {"tp": 1, "fn": 1, "fp": 0, "tn": 0, "skipped": 0}
    assert accuracy([True, True], ["", "paris capital"], [["paris capital"]] * 2) == (1 + 0) / 2


# --- only an empty ground truth is undefined ------------------------------------------------------

def test_undefined_is_a_status():
    assert "undefined" in STATUSES
    s = Score.undefined("no keyword in the reference")
    assert (s.value, s.status, s.detail) == (None, "undefined", "no keyword in the reference")


@pytest.mark.parametrize("fn", RANKED, ids=lambda f: f.__name__)
def test_empty_ground_truth_is_undefined_on_ranked_metrics(fn):
    assert status(fn(["d1"], [], k=5, relevance="ids")) == "undefined"
    assert status(fn([], [], k=5, relevance="ids")) == "undefined"


@pytest.mark.parametrize("fn", TOKEN, ids=lambda f: f.__name__)
def test_empty_ground_truth_is_undefined_on_token_metrics(fn):
    assert status(fn(["Paris"], [])) == "undefined"
    assert status(fn(["Paris"], ["  "])) == "undefined"
    assert status(fn([], [])) == "undefined"
    # a blank reference beside a real one is left out, not scored against
    assert fn(["Paris"], ["", "Paris"]) == 1.0


@pytest.mark.parametrize("fn", CONTEXT, ids=lambda f: f.__name__)
def test_empty_ground_truth_is_undefined_on_context_metrics(fn):
    m = build_matcher("exact_sentence")
    assert status(fn(["a."], ["   "], matcher=m)) == "undefined"
    assert status(fn([], [], matcher=m)) == "undefined"


@pytest.mark.parametrize("fn", ANSWER, ids=lambda f: f.__name__)
def test_empty_reference_is_undefined_on_answer_metrics(fn):
    assert status(fn("Paris", [])) == "undefined"
    assert status(fn("Paris", ["", "  "])) == "undefined"
    assert status(fn("", [""])) == "undefined"


def test_reference_without_a_keyword_is_undefined():
    # an RGB-style Chinese factoid: every piece is one character, so there is no keyword at all
    assert status(keyword_overlap("1月3日", ["1月3日"])) == "undefined"
    assert keyword_overlap("1月3日", ["1月3日", "一月三日"]) == 0.0    # the other reference has keywords


def test_coverage_of_an_empty_answer_is_undefined_and_no_context_covers_nothing():
    assert status(avg_coverage(["Paris is in France"], "")) == "undefined"
    assert avg_coverage([], "Paris France") == 0.0


@pytest.mark.parametrize("returned", [None, math.nan])
def test_a_metric_returning_none_or_nan_is_undefined_not_missing(returned):
    assert _as_score(returned).status == "undefined"


# --- through the scoring step ----------------------------------------------------------------

def _records():
    rows = [
        {"id": "found", "query": "q", "context_ids": ["d1", "x"], "gt_context_ids": ["d1"],
         "answer": "Paris", "reference_answers": ["Paris"]},
        {"id": "nothing", "query": "q", "context_ids": [], "gt_context_ids": ["d1"],
         "answer": "", "reference_answers": ["Paris"]},
        {"id": "absent", "query": "q", "gt_context_ids": ["d1"], "reference_answers": ["Paris"]},
        {"id": "no-truth", "query": "q", "context_ids": ["d1"], "gt_context_ids": [],
         "answer": "Paris", "reference_answers": [""]},
    ]
    return [to_record(r, path="r.jsonl", row=i) for i, r in enumerate(rows, start=1)]


def test_score_counts_empty_outputs_as_misses():
    specs, _ = build_metrics({"recall_at_k": {"_target_": "ragexp.metrics.ranking.recall_at_k", "k": 5,
                                              "relevance": "ids", "matcher": "exact_chunk"},
                              "exact_match": {"_target_": "ragexp.metrics.answer.exact_match"}})
    records = _records()
    kept, _ = check_fields(specs, records, "r")
    scores = score(records, kept)
    assert [(s.value, s.status) for s in scores["recall_at_k"]] == [
        (1 / 1, "ok"), (0.0, "ok"), (None, "missing_field"), (None, "undefined")]
    assert [(s.value, s.status) for s in scores["exact_match"]] == [
        (1.0, "ok"), (0.0, "ok"), (None, "missing_field"), (None, "undefined")]


def test_a_field_empty_in_every_record_is_still_a_field_of_the_dataset():
    records = [Record(id=str(i), query="q", contexts=[], answer="") for i in range(3)]
    assert present_fields(records) == ["id", "query", "contexts", "answer"]
    assert records[0].present("contexts") and not records[0].present("gt_contexts")


def test_bm25_that_finds_nothing_counts_every_question(compose):
    """The issue's figure: BM25 finds nothing for the demo's Chinese questions (its tokens are
    Latin words); those questions score 0, so recall@5 is over all 50 questions, not 45."""
    from ragexp.workflow.runner import run

    cfg = compose("retriever=bm25", "retriever.top_k=5", "metric=recall_at_k", "metric.recall_at_k.k=5",
                  "tracking.enabled=false")
    summary = run(cfg)
    counts = summary["status_counts"]["recall_at_k"]
    assert counts == {"ok": 50}, counts
    assert summary["metrics"]["recall_at_k"] < 1.0


#: metrics whose value is documented as undefined for an empty output, with the reason
UNDEFINED_FOR_EMPTY_OUTPUT = {"avg_coverage": "the share of the answer's keywords found in the contexts: an empty "
                                              "answer has nothing to ground"}
OUTPUTS = ("contexts", "context_ids", "answer")


def test_no_deterministic_metric_lets_an_empty_output_vanish():
    """Over the whole registry: every sample-level, non-judge metric that reads an output of the
    system under test scores a record whose outputs are empty as a miss (its lower bound, status
    ok) — or, where documented above, as ``undefined`` — never ``missing_field``."""
    from ragexp.metrics.base import load_all

    record = to_record({"id": "x", "query": "What is the capital of France?", "contexts": [], "context_ids": [],
                        "answer": "", "gt_contexts": ["Paris is the capital of France."], "gt_context_ids": ["d1"],
                        "reference_answers": ["Paris"], "label": True, "latency_s": 0.5,
                        "category": "single_hop"}, path="x.jsonl", row=1)
    checked = []
    for name, info in sorted(load_all().items()):
        if info.level != "sample" or info.judge:
            continue
        specs, _ = build_metrics({name: {"_target_": f"{info.fn.__module__}.{info.fn.__name__}"}}, "exact_chunk")
        kept, _ = check_fields(specs, [record], "x")
        for spec in kept:
            if not set(spec.fields) & set(OUTPUTS):
                continue
            (s,) = score([record], [spec])[spec.key]
            if name in UNDEFINED_FOR_EMPTY_OUTPUT:
                assert s.status == "undefined", (spec.key, s)
            else:
                assert (s.status, s.value) == ("ok", info.bounds[0]), (spec.key, s)
            checked.append(name)
    assert {"token_f1", "context_precision", "recall_at_k", "ndcg", "exact_match", "bleu", "rougeL",
            "keyword_overlap", "avg_coverage"} <= set(checked)
