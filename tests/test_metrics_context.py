"""Context precision / recall / F1 through matchers (SPEC §2.2): the seed's and continuous-eval's
test vectors, duplicates, the cut-off k, and variants through the real Hydra config."""

from __future__ import annotations

import pytest

from ragexp.core.scoring import build_metrics
from ragexp.matchers import build_matcher
from ragexp.metrics.context import context_f1, context_precision, context_recall

CAPITAL_OF_FRANCE = dict(
    contexts=["Paris is the capital of France and also the largest city in the country.",
              "Lyon is a major city in France."],
    gt_contexts=["Paris is the capital of France."],
)
SHAKESPEARE = dict(
    contexts=["Shakespeare was a playwright.", "Romeo and Juliet is a play by Shakespeare."],
    gt_contexts=["Shakespeare was a playwright.", "Romeo and Juliet is a play by William Shakespeare."],
)


def test_seed_example_with_rouge_chunk():
    m = build_matcher("rouge_chunk")
    assert context_precision(**CAPITAL_OF_FRANCE, matcher=m) == 1 / 2
    assert context_recall(**CAPITAL_OF_FRANCE, matcher=m) == 1 / 1
    assert context_f1(**CAPITAL_OF_FRANCE, matcher=m) == 2 * (1 / 2 * 1) / (1 / 2 + 1)
    assert round(context_f1(**CAPITAL_OF_FRANCE, matcher=m), 4) == 0.6667


@pytest.mark.parametrize("name", ["rouge_chunk", "rouge_sentence"])
def test_shakespeare_example_gives_one_with_both_rouge_matchers(name):
    m = build_matcher(name)
    assert (context_precision(**SHAKESPEARE, matcher=m), context_recall(**SHAKESPEARE, matcher=m),
            context_f1(**SHAKESPEARE, matcher=m)) == (1.0, 1.0, 1.0)


def test_exact_matchers_fail_the_shakespeare_example_where_rouge_passes():
    m = build_matcher("exact_sentence")
    assert context_precision(**SHAKESPEARE, matcher=m) == 1 / 2
    assert context_recall(**SHAKESPEARE, matcher=m) == 1 / 2


def test_sentence_matcher_counts_sentences_of_all_passages():
    m = build_matcher("exact_sentence")
    contexts = ["Paris is in France. It rains.", "Lyon is big. Paris is in France."]
    gt = ["Paris is in France. The Seine flows there."]
    assert context_precision(contexts, gt, matcher=m) == 2 / 4       # 2 of the 4 retrieved sentences
    assert context_recall(contexts, gt, matcher=m) == 1 / 2          # 1 of the 2 ground-truth sentences


def test_duplicates_count_in_precision_not_in_recall():
    m = build_matcher("exact_chunk")
    assert context_precision(["a", "a", "b"], ["a"], matcher=m) == 2 / 3
    assert context_recall(["a"], ["a", "a", "b"], matcher=m) == 1 / 2


def test_cut_off_k_scores_the_first_k_passages():
    m = build_matcher("exact_chunk")
    contexts, gt = ["x", "a", "b", "y"], ["a", "b"]
    assert [context_precision(contexts, gt, matcher=m, k=k) for k in (1, 2, 3, 10)] == [0 / 1, 1 / 2, 2 / 3, 2 / 4]
    assert [context_recall(contexts, gt, matcher=m, k=k) for k in (1, 2, 3)] == [0 / 2, 1 / 2, 2 / 2]
    assert context_f1(contexts, gt, matcher=m, k=1) == 0.0
    with pytest.raises(ValueError, match="k must be a positive integer"):
        context_recall(contexts, gt, matcher=m, k=0)


def test_nothing_retrieved_is_zero_and_no_ground_truth_undefined():
    m = build_matcher("exact_sentence")
    assert context_precision(["  "], ["a."], matcher=m) == 0.0      # a blank passage retrieves nothing: a miss
    assert context_recall(["a."], ["   "], matcher=m).status == "undefined"


def test_matcher_and_k_variants_from_the_config(compose):
    cfg = compose("metric=context_recall", "metric.context_recall.matcher=[rouge_chunk,rouge_sentence]",
                  "metric.context_recall.k=[1,2]")
    specs, _ = build_metrics(cfg.metric, cfg.matcher)
    assert [s.key for s in specs] == ["context_recall/rouge_chunk/context_recall_at_1", "context_recall/rouge_chunk/context_recall_at_2",
                                      "context_recall/rouge_sentence/context_recall_at_1", "context_recall/rouge_sentence/context_recall_at_2"]
    assert specs[0].matcher is build_matcher("rouge_chunk")
    # null: the run's matcher group
    cfg = compose("metric=context_recall", "matcher=rouge_chunk", "matcher.inclusive=true")
    specs, _ = build_metrics(cfg.metric, cfg.matcher)
    assert specs[0].key == "context_recall" and specs[0].matcher.inclusive is True
