"""Dense and hybrid retrieval with the bundled all-MiniLM-L6-v2 (offline), on small corpora."""

from __future__ import annotations

import numpy as np
import pytest

from cli import parent_and_children, run_cli

from ragexp.pipeline.cache import IndexCache
from ragexp.pipeline.chunking import Chunker
from ragexp.pipeline.retrievers import BM25Retriever, DenseRetriever, HybridRetriever, load_encoder, rrf

# No word in common with the query but the meaning: BM25 finds nothing, a sentence encoder should.
PARAPHRASE = {
    "pets": "The feline rested on the rug all afternoon.",
    "markets": "Stock markets fell sharply after the announcement.",
    "weather": "Heavy rain is expected over the coast tomorrow.",
}
QUERY = "cat sleeping on a carpet"


@pytest.fixture(scope="module")
def squad_small(data_dir):
    """The first two SQuAD articles' paragraphs and the answerable questions written on them."""
    from ragexp.datasets.squad2 import load_squad2

    ds = load_squad2(str(data_dir / "squad2" / "dev-v2.0.json"), limit=400)
    corpus = {pid: text for pid, text in ds.corpus.items() if pid.split("-")[0] in ("0", "1")}
    records = [r for r in ds.records if r.gt_context_ids[0] in corpus][:40]
    return corpus, records


def test_dense_finds_the_paraphrase_bm25_cannot():
    chunks = Chunker().split(PARAPHRASE)
    bm25, dense = BM25Retriever(top_k=2), DenseRetriever(top_k=2)
    bm25.prepare(chunks, {"corpus": "paraphrase"}, None)
    dense.prepare(chunks, {"corpus": "paraphrase"}, None)
    assert bm25.search(QUERY, 2, {}) == []
    timings: dict[str, float] = {}
    hits = dense.search(QUERY, 2, timings)
    assert chunks[hits[0][0]].doc_id == "pets"
    assert hits[0][1] > hits[1][1]
    assert set(timings) == {"embed", "retrieve"}


def test_dense_scores_are_cosine_similarities_of_the_model_embeddings():
    chunks = Chunker().split(PARAPHRASE)
    dense = DenseRetriever(top_k=3)
    dense.prepare(chunks, {"corpus": "paraphrase"}, None)
    enc = load_encoder("all-MiniLM-L6-v2")
    q, *docs = enc.encode([QUERY, *PARAPHRASE.values()])
    cos = [float(d @ q / (np.linalg.norm(d) * np.linalg.norm(q))) for d in docs]
    got = dict(dense.search(QUERY, 3, {}))
    assert got == pytest.approx(dict(enumerate(cos)), abs=1e-5)


def test_dense_index_is_built_once_and_reloaded_identically(tmp_path, squad_small):
    corpus, _ = squad_small
    chunks = Chunker(size=80, overlap=10).split(corpus)
    key = {"corpus": "squad-small", "chunker": {"size": 80, "overlap": 10}}
    first, second = DenseRetriever(), DenseRetriever()
    s1 = first.prepare(chunks, key, IndexCache(tmp_path))
    s2 = second.prepare(chunks, key, IndexCache(tmp_path))
    assert (s1["index/dense/built"], s2["index/dense/built"]) == (1.0, 0.0)
    assert np.array_equal(first._emb, second._emb)
    assert first._emb.shape == (len(chunks), 384)
    assert IndexCache(tmp_path).builds() == [IndexCache(tmp_path).path_for("dense", {**key, **first.index_parts()}).name]


@pytest.fixture(scope="module")
def shared_cache(tmp_path_factory):
    """One index cache for the tests below, as the jobs of a sweep share one."""
    return IndexCache(tmp_path_factory.mktemp("index"))


def test_hybrid_is_the_rrf_of_its_two_rankings(shared_cache, squad_small):
    corpus, records = squad_small
    chunks = Chunker().split(corpus)
    hybrid = HybridRetriever(top_k=5, candidates=10)
    hybrid.prepare(chunks, {"corpus": "squad-small"}, shared_cache)
    for r in records[:5]:
        timings: dict[str, float] = {}
        got = hybrid.search(r.query, 5, timings)
        lexical = [i for i, _ in hybrid.bm25.search(r.query, 10, {})]
        semantic = [i for i, _ in hybrid.dense.search(r.query, 10, {})]
        assert got == rrf([lexical, semantic], 60)[:5]
        assert set(timings) == {"embed", "retrieve", "rerank"}


def test_dense_recall_on_squad_paragraphs(shared_cache, squad_small):
    """On SQuAD the gold paragraph is usually among the first five (ids compared at passage level)."""
    corpus, records = squad_small
    chunks = Chunker().split(corpus)
    dense = DenseRetriever(top_k=5)
    dense.prepare(chunks, {"corpus": "squad-small"}, shared_cache)
    found = [r.gt_context_ids[0] in {chunks[i].doc_id for i, _ in dense.search(r.query, 5, {})} for r in records]
    assert sum(found) / len(found) > 0.6


@pytest.mark.integration
def test_demo_sweep_over_retrievers_and_top_k_runs_offline(tmp_path):
    """``python -m ragexp -m retriever=bm25,dense retriever.top_k=3,5`` on the demo data, no network."""
    run_cli("-m", "retriever=bm25,dense", "retriever.top_k=3,5", "progress=false",
            "tracking.traces=0", cwd=tmp_path,  # the runs' metrics and indexes are read, not their traces
            env={"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "*",
                 "HTTPS_PROXY": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9"})
    _, parents, children = parent_and_children(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(parents) == 1 and len(children) == 4
    combos = {(c.data.params["retriever"], c.data.params["retriever.top_k"]) for c in children}
    assert combos == {("bm25", "3"), ("bm25", "5"), ("dense", "3"), ("dense", "5")}
    for c in children:
        assert c.data.metrics["recall_at_k/recall_at_3"] <= c.data.metrics["recall_at_k/recall_at_5"]
        if c.data.params["retriever"] == "dense":
            assert c.data.metrics["latency/embed"] > 0
    kinds = sorted(name.split("-")[0] for name in IndexCache(tmp_path / ".ragexp_cache" / "index").builds())
    assert kinds == ["bm25", "dense"]  # each index built once for the four jobs
