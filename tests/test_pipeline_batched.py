"""Batched retrieval (``pipeline.batch_size``) gives each query exactly what it gets alone, on SQuAD.

BM25 searches all of a job's queries in one bm25s ``retrieve``; the dense retriever encodes them in
one pass and keeps their vectors in the query-embedding cache beside the index cache. Every top-k
list (ids, order, ties) must be the one the per-query search returns, and a whole run's metric
values the ones of ``pipeline.batch_size=1`` (each query alone).
"""

from __future__ import annotations

import sqlite3

import pytest

from ragexp.pipeline.cache import QUERY_VECTORS, IndexCache
from ragexp.pipeline.chunking import Chunker
from ragexp.pipeline.retrievers import BM25Retriever, DenseRetriever, HybridRetriever


@pytest.fixture(scope="module")
def squad(data_dir):
    from ragexp.datasets.squad2 import load_squad2

    return load_squad2(str(data_dir / "squad2" / "dev-v2.0.json"))


@pytest.fixture(scope="module")
def squad_small(squad):
    """The first two articles' paragraphs and every answerable question written on them."""
    corpus = {pid: text for pid, text in squad.corpus.items() if pid.split("-")[0] in ("0", "1")}
    return corpus, [r for r in squad.records if r.gt_context_ids[0] in corpus]


@pytest.mark.parametrize("k1, top_k", [(1.5, 5), (0.9, 10)])
def test_bm25_batch_equals_each_query_alone_on_all_of_squad(squad, tmp_path, k1, top_k):
    chunks = Chunker(size=100, overlap=10).split(squad.corpus)
    bm25 = BM25Retriever(top_k=top_k, k1=k1)
    bm25.prepare(chunks, {"corpus": "squad"}, IndexCache(tmp_path))
    queries = [r.query for r in squad.records]
    alone = [bm25.search(q, top_k, {}) for q in queries]
    timings = [{} for _ in queries]
    batched = bm25.search_many(queries, top_k, timings)
    assert len(queries) == 2910 and batched == alone  # ids, scores, order: every list identical
    # ties are common in BM25 (equal scores of repeated chunks); they keep the per-query order too
    assert any(len({s for _, s in hits}) < len(hits) for hits in alone)
    assert all(set(t) == {"retrieve"} and t["retrieve"] > 0 for t in timings)
    assert len({t["retrieve"] for t in timings}) == 1  # each query holds an equal share of the batch


def test_dense_batch_equals_each_query_alone_and_reuses_cached_vectors(squad_small, tmp_path):
    corpus, records = squad_small
    chunks = Chunker().split(corpus)
    cache = IndexCache(tmp_path)
    queries = [r.query for r in records]
    dense = DenseRetriever(top_k=5)
    dense.prepare(chunks, {"corpus": "squad-small"}, cache)
    alone = [dense.search(q, 5, {}) for q in queries]  # one query: encoded alone, no cache
    assert not (tmp_path / QUERY_VECTORS).exists()
    timings = [{} for _ in queries]
    batched = dense.search_many(queries, 5, timings)
    assert [[i for i, _ in h] for h in batched] == [[i for i, _ in h] for h in alone]
    for b, a in zip(batched, alone):  # the batch's padding moves a score in its last bits, no more
        assert [s for _, s in b] == pytest.approx([s for _, s in a], abs=1e-5)
    assert all(set(t) == {"embed", "retrieve"} for t in timings)
    with sqlite3.connect(tmp_path / QUERY_VECTORS) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(set(queries))

    again = DenseRetriever(top_k=5)  # a later job of the sweep: every query vector from the cache
    again.prepare(chunks, {"corpus": "squad-small"}, cache)
    assert again.search_many(queries, 5, [{} for _ in queries]) == batched
    assert again._emb is dense._emb  # the index is loaded once per process
    prefixed = DenseRetriever(top_k=5, query_prefix="query: ")  # another prefix is another key
    prefixed.prepare(chunks, {"corpus": "squad-small"}, cache)
    prefixed.search_many(queries[:3], 5, [{} for _ in range(3)])
    with sqlite3.connect(tmp_path / QUERY_VECTORS) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone()[0] == len(set(queries)) + 3


def test_hybrid_batch_equals_each_query_alone(squad_small, tmp_path):
    corpus, records = squad_small
    chunks = Chunker().split(corpus)
    hybrid = HybridRetriever(top_k=5, candidates=10)
    hybrid.prepare(chunks, {"corpus": "squad-small"}, IndexCache(tmp_path))
    queries = [r.query for r in records[:60]]
    alone = [[i for i, _ in hybrid.search(q, 5, {})] for q in queries]
    timings = [{} for _ in queries]
    assert [[i for i, _ in h] for h in hybrid.search_many(queries, 5, timings)] == alone
    assert all(set(t) == {"embed", "retrieve", "rerank"} for t in timings)


@pytest.mark.slow
def test_a_batched_run_scores_what_a_per_query_run_scores(compose, tmp_path):
    """The whole run through the runner: every per-sample value and aggregate of the SQuAD BM25 run
    with the default batches equals those of ``pipeline.batch_size=1``; only latencies differ."""
    from ragexp.workflow.runner import execute

    outs = {}
    for size in (1, 4096):
        cfg = compose("dataset=squad2", "retriever=bm25", "chunker=words", "metric=[recall_at_k,mrr,ndcg,hit_rate]",
                      f"pipeline.batch_size={size}", f"pipeline.cache_dir={tmp_path / 'cache'}")
        outs[size] = execute(cfg, save=False, show=False)
    one, many = outs[1], outs[4096]
    keys = [k for k in one.summary["metrics"] if not k.startswith("latency")]
    assert len(keys) >= 4 and one.summary["n_samples"] == 2910
    assert {k: one.summary["metrics"][k] for k in keys} == {k: many.summary["metrics"][k] for k in keys}
    assert {k: one.intervals[k] for k in keys} == {k: many.intervals[k] for k in keys}
    for col in one.per_sample:
        if col != "latency_s":
            assert one.per_sample[col] == many.per_sample[col], col
    assert one.summary["outputs_digest"] == many.summary["outputs_digest"]
    assert all(set(r.timings) == {"retrieve", "total"} for r in many.records)
