"""Ranked retrieval metrics (SPEC §2.3): worked examples, AutoRAG's duplicate-id runs, and
agreement with ranx on BM25 runs over the SQuAD paragraphs (to 1e-9, every query, every cut-off)."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from ragexp.core.scoring import build_metrics, check_fields
from ragexp.errors import FieldsError
from ragexp.metrics.ranking import hit_rate, judgement, map, mrr, ndcg, precision_at_k, recall_at_k
from ragexp.common.records import to_record

RUN = ["d3", "d1", "d2", "d4", "d9"]
RELEVANT = ["d1", "d4", "d7"]


def test_worked_example_at_k3_and_k5():
    assert hit_rate(RUN, RELEVANT, k=1) == 0.0 and hit_rate(RUN, RELEVANT, k=3) == 1.0
    assert mrr(RUN, RELEVANT, k=1) == 0.0 and mrr(RUN, RELEVANT, k=5) == 1 / 2
    assert precision_at_k(RUN, RELEVANT, k=3) == 1 / 3
    assert precision_at_k(RUN, RELEVANT, k=5) == 2 / 5
    assert recall_at_k(RUN, RELEVANT, k=3) == 1 / 3
    assert recall_at_k(RUN, RELEVANT, k=5) == 2 / 3
    assert map(RUN, RELEVANT, k=5) == (1 / 2 + 2 / 4) / 3
    assert map(RUN, RELEVANT, k=5, denominator="hits") == (1 / 2 + 2 / 4) / 2
    dcg = 1 / math.log2(3) + 1 / math.log2(5)
    assert ndcg(RUN, RELEVANT, k=5) == pytest.approx(dcg / (1 + 1 / math.log2(3) + 1 / math.log2(4)), abs=1e-15)
    assert ndcg(RUN, RELEVANT, k=2) == pytest.approx((1 / math.log2(3)) / (1 + 1 / math.log2(3)), abs=1e-15)


def test_precision_divides_by_k_even_when_fewer_were_retrieved():
    assert precision_at_k(["d1"], ["d1"], k=10) == 1 / 10
    assert precision_at_k(["d1", "x"], ["d1"], k=None) == 1 / 2


def test_repeated_ids_count_once():
    assert judgement(["a", "a", "b", "a"], ["a", "b"], relevance="ids")[0] == [True, False, True, False]
    assert recall_at_k(["a", "a", "a"], ["a", "b"], k=3) == 1 / 2
    assert ndcg(["a", "a"], ["a"], k=2) == 1.0


def test_no_relevant_item_is_undefined_not_zero():
    assert mrr(["a"], [], k=10).status == "undefined"
    assert mrr([], ["a"], k=10) == 0.0   # nothing retrieved: a miss


def test_matcher_relevance_counts_each_ground_truth_context_once():
    contexts = ["Paris is the capital of France.", "Paris is the capital of France!", "Rome is in Italy."]
    gt = ["Paris is the capital of France.", "Berlin is in Germany."]
    assert judgement(contexts, gt, relevance="matcher", matcher="rouge_chunk") == ([True, False, False], [1, 1, 1], 2, 3)
    assert precision_at_k(contexts, gt, k=3, relevance="matcher", matcher="rouge_chunk") == 1 / 3
    assert recall_at_k(contexts, gt, k=3, relevance="matcher", matcher="rouge_chunk") == 1 / 2


def test_relevance_auto_uses_ids_when_the_dataset_has_them_else_the_matcher(compose):
    specs, _ = build_metrics(compose("metric=ndcg").metric, "rouge_chunk")
    with_ids = [to_record({"query": "q", "contexts": ["a"], "context_ids": ["1"], "gt_contexts": ["a"],
                           "gt_context_ids": ["1"]}, path="x", row=1)]
    kept, _ = check_fields(specs, with_ids, "x")
    assert {s.options["relevance"] for s in kept} == {"ids"} and [s.key for s in kept] == [
        "ndcg/ndcg_at_1", "ndcg/ndcg_at_3", "ndcg/ndcg_at_5", "ndcg/ndcg_at_10"]
    specs, _ = build_metrics(compose("metric=ndcg").metric, "rouge_chunk")
    texts_only = [to_record({"query": "q", "contexts": ["a"], "gt_contexts": ["a"]}, path="x", row=1)]
    kept, _ = check_fields(specs, texts_only, "x")
    assert {s.options["relevance"] for s in kept} == {"matcher"}
    specs, _ = build_metrics(compose("metric=ndcg").metric, "rouge_chunk")
    nothing = [to_record({"query": "q", "contexts": ["a"]}, path="x", row=1)]
    with pytest.raises(FieldsError, match="metric 'ndcg/ndcg_at_1' needs 'gt_contexts'; dataset 'x' has: id, query, contexts"):
        check_fields(specs, nothing, "x")


# -- AutoRAG's own numbers on its result parquet (duplicated ids in the run) -----------------

def test_autorag_stored_retrieval_precision_and_recall(data_dir):
    d = pd.read_parquet(data_dir / "autorag" / "result_lexical_retrieval_best_0.parquet")
    for _, row in d.iterrows():
        retrieved = list(row["retrieved_ids_lexical"])
        relevant = [i for group in row["retrieval_gt"] for i in group]
        assert precision_at_k(retrieved, relevant, k=None) == pytest.approx(row["retrieval_precision"], abs=1e-6)
        assert recall_at_k(retrieved, relevant, k=None) == pytest.approx(row["retrieval_recall"], abs=1e-6)


# -- agreement with ranx on BM25 runs over SQuAD ---------------------------------------------

RANX = {"hit_rate": hit_rate, "mrr": mrr, "ndcg": ndcg, "map": map, "precision": precision_at_k,
        "recall": recall_at_k}


@pytest.fixture(scope="module")
def squad_run(data_dir):
    from squad_bm25 import squad_bm25_run

    return squad_bm25_run(str(data_dir), 300)


def test_identical_to_ranx_on_squad_bm25(squad_run):
    from ranx import Qrels, Run, evaluate

    qrels = Qrels({r["id"]: {doc: 1 for doc in r["relevant_ids"]} for r in squad_run})
    # scores strictly decreasing in rank order, so ranx ranks exactly as the run lists
    run = Run({r["id"]: {doc: float(len(r["context_ids"]) - i) for i, doc in enumerate(r["context_ids"])}
               for r in squad_run})
    multi = sum(len(r["relevant_ids"]) > 1 for r in squad_run)
    assert multi > 50, "the run should hold queries with several relevant items"
    for k in (1, 3, 5, 10):
        names = [f"{m}@{k}" for m in RANX]
        evaluate(qrels, run, names, make_comparable=True)
        for m, fn in RANX.items():
            for r in squad_run:
                ours = fn(r["context_ids"], r["relevant_ids"], k=k, relevance="ids")
                assert abs(ours - run.scores[f"{m}@{k}"][r["id"]]) <= 1e-9, (m, k, r["id"])


def test_exact_chunk_relevance_equals_id_relevance_on_squad(squad_run):
    """Relevance through a matcher over texts gives the id-based values when texts identify passages."""
    for r in squad_run[:100]:
        for fn in RANX.values():
            by_ids = fn(r["context_ids"], r["gt_context_ids"], k=5, relevance="ids")
            by_text = fn(r["contexts"], r["gt_contexts"], k=5, relevance="matcher", matcher="exact_chunk")
            assert by_ids == by_text


def test_a_suite_scored_together_equals_each_metric_alone_and_ranx(squad_run, compose):
    """score() judges a record's relevance once and shares it among the 24 ranked keys of a suite
    (MetricInfo.prepare/finish): the same values as each metric called alone, and as ranx."""
    from ranx import Qrels, Run, evaluate

    from ragexp.core.scoring import score

    records = [to_record({k: r[k] for k in ("id", "contexts", "context_ids", "gt_contexts")}
                         | {"query": "q", "gt_context_ids": r["relevant_ids"]}, path="squad", row=i)
               for i, r in enumerate(squad_run, start=1)]
    records.append(to_record({"query": "q", "contexts": ["a"], "context_ids": ["1"], "gt_contexts": [],
                              "gt_context_ids": []}, path="x", row=0))  # nothing relevant: undefined everywhere
    from omegaconf import OmegaConf

    names = ("hit_rate", "mrr", "ndcg", "map", "precision_at_k", "recall_at_k")
    configured = {n: OmegaConf.to_container(compose(f"metric={n}").metric[n]) for n in names}  # k: [1, 3, 5, 10]
    for relevance in ("ids", "matcher"):
        specs, _ = build_metrics({n: dict(c, relevance=relevance) for n, c in configured.items()}, "rouge_chunk")
        specs, _ = check_fields(specs, records, "squad")
        scores = score(records, specs)
        assert len(scores) == 24
        for spec in specs:
            alone = [spec.call(*[getattr(r, f) for f in spec.fields]) for r in records]
            assert [s.value for s in scores[spec.key][:-1]] == alone[:-1], spec.key
            assert scores[spec.key][-1].status == alone[-1].status == "undefined"
    qrels = Qrels({r["id"]: {doc: 1 for doc in r["relevant_ids"]} for r in squad_run})
    run = Run({r["id"]: {doc: float(len(r["context_ids"]) - i) for i, doc in enumerate(r["context_ids"])}
               for r in squad_run})
    specs, _ = build_metrics({n: dict(c, relevance="ids") for n, c in configured.items()}, "exact_chunk")
    scores = score(records[:-1], specs)
    ranx_name = {"precision_at_k": "precision", "recall_at_k": "recall"}
    for spec in specs:
        name, label = spec.key.split("/")
        k = label.rpartition("_at_")[2]
        metric = f"{ranx_name.get(name, name)}@{k}"
        evaluate(qrels, run, [metric], make_comparable=True)
        for r, s in zip(squad_run, scores[spec.key]):
            assert abs(s.value - run.scores[metric][r["id"]]) <= 1e-9, (spec.key, r["id"])
