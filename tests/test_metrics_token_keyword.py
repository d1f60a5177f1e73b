"""Token metrics (SPEC §2.1) and keyword correctness / confusion / coverage (SPEC §2.5):
the seeds' worked examples and AutoRAG's test vectors."""

from __future__ import annotations

import math

import pytest

from ragexp.metrics.keyword import avg_coverage, keyword_overlap
from ragexp.metrics.keyword import keyword_verdict_accuracy as accuracy
from ragexp.metrics.keyword import keyword_verdict_f1 as f1
from ragexp.metrics.keyword import keyword_verdict_precision as precision
from ragexp.metrics.keyword import keyword_verdict_recall as recall
from ragexp.metrics.token import token_f1, token_precision, token_recall

SEED_PASSAGES = ["Do you want to buy some?", "I want to buy some", "I want to buy some water"]
SEED_REFERENCE = ["Do you want to buy some?"]
AUTORAG_GT = ["Enough for drinking water", "Just looking for a water bottle"]
AUTORAG_PASSAGES = ["Enough for mixing water", "I want to do a nothing", "Just looking is a very healthy"]


def test_seed_000_example():
    assert token_precision(SEED_PASSAGES, SEED_REFERENCE) == pytest.approx((1 + 4 / 5 + 4 / 6) / 3, abs=1e-15)
    assert token_recall(SEED_PASSAGES, SEED_REFERENCE) == pytest.approx((1 + 4 / 6 + 4 / 6) / 3, abs=1e-15)
    f1s = [1, 2 * (4 / 5 * 4 / 6) / (4 / 5 + 4 / 6), 2 * (4 / 6 * 4 / 6) / (4 / 6 + 4 / 6)]
    assert token_f1(SEED_PASSAGES, SEED_REFERENCE) == pytest.approx(sum(f1s) / 3, abs=1e-15)
    assert round(token_f1(SEED_PASSAGES, SEED_REFERENCE), 6) == 0.79798


def test_autorag_vectors_against_ground_truth_passages():
    # first passage vs first gt: 3 of 4 tokens each way; third vs second gt ("just looking" of 5 tokens
    # after dropping the article): 2/5 each way; the second shares nothing
    for fn in (token_precision, token_recall, token_f1):
        value = fn(AUTORAG_PASSAGES, AUTORAG_GT, against="gt_contexts")
        assert value == pytest.approx((3 / 4 + 0 + 2 / 5) / 3, abs=1e-15)
        assert round(value, 6) == 0.383333


def test_empty_passage_is_a_miss_and_empty_truth_undefined():
    # an empty passage is an output that shares nothing (0, counted); an empty ground truth has no value
    assert token_f1(["truth", ""], ["truth"]) == (1 + 0) / 2
    assert token_f1(["passage"], [""]).status == "undefined"


LABELS = [True, True, True, False, False]
ANSWERS = ["paris is the capital", "berlin", "capital of paris is", "paris capital is the", "rome"]
REFS = [["the capital is paris"]] * 5   # keywords: the, capital, is, paris


def test_seed_004_confusion_metrics():
    # overlaps 4/4, 0/4, 3/4 (> 0.7), 4/4, 0/4 → judged 1, 0, 1, 1, 0; labels 1, 1, 1, 0, 0
    tp, fn, fp, tn = 2, 1, 1, 1
    assert accuracy(LABELS, ANSWERS, REFS) == (tp + tn) / (tp + fn + fp + tn)
    assert precision(LABELS, ANSWERS, REFS) == tp / (tp + fp)
    assert recall(LABELS, ANSWERS, REFS) == tp / (tp + fn)
    assert f1(LABELS, ANSWERS, REFS) == 2 * tp / (2 * tp + fp + fn)
    # threshold 0.75 inclusive keeps 3/4 correct; strict drops it
    assert recall(LABELS, ANSWERS, REFS, threshold=0.75) == 1 / 3
    assert recall(LABELS, ANSWERS, REFS, threshold=0.75, inclusive=True) == 2 / 3


def test_empty_denominator_is_nan_with_a_warning():
    with pytest.warns(RuntimeWarning, match="precision: the denominator is 0"):
        assert math.isnan(precision([True], ["rome"], [["the capital is paris"]]))


def test_keyword_overlap_and_coverage():
    assert keyword_overlap("Paris, capital!", ["The capital is Paris"]) == 2 / 4
    # coverage: answer keywords {paris, capital, france}; contexts hold paris and france
    assert avg_coverage(["Paris is big.", "France too."], "Paris capital France") == 2 / 3
    # the seed's code: reference keywords {the, capital, is, paris} found in the contexts: is, paris
    assert avg_coverage(["Paris is big."], ["the capital is Paris"], against="reference") == 2 / 4


def test_underscore_joins_a_word_never_splits_it():
    """`_` is part of a word (an identifier such as customer_id is one keyword, as \\w+ reads it);
    leading and trailing underscores (markdown _emphasis_, __init__) are not part of it."""
    from ragexp.common.text import keywords

    assert keywords("Join on customer_id") == {"join", "on", "customer_id"}
    assert keywords("_emphasis_ and __init__") == {"emphasis", "and", "init"}
    assert keyword_overlap("group by customer id", ["customer_id"]) == 0 / 1
    assert keyword_overlap("the customer_id column", ["customer_id column"]) == 2 / 2
    assert keyword_overlap("用 customer_id 关联", ["customer_id"]) == 1 / 1
