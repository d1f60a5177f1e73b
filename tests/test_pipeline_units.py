"""The pipeline's parts one by one: chunker, sentence splitter, index cache, BM25, fusion,
compressors, the extractive generator, and the config checks that run before any heavy work."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragexp.datasets.base import Dataset
from ragexp.errors import ConfigError
from ragexp.pipeline import build_pipeline
from ragexp.pipeline.cache import IndexCache
from ragexp.pipeline.chunking import Chunker, load_tokenizer
from ragexp.pipeline.compressors import SentenceCompressor, TruncateCompressor
from ragexp.pipeline.generators import ExtractiveGenerator
from ragexp.pipeline.retrievers import BM25Retriever, rrf
from ragexp.common.records import Record

ROOT = Path(__file__).resolve().parents[1]

# A tiny corpus with known answers (named records, reused below).
CITIES = {
    "paris": "Paris is the capital of France. The Eiffel Tower stands in Paris. It was built in 1889.",
    "lyon": "Lyon is a major city in France. It lies where the Rhone meets the Saone.",
    "berlin": "Berlin is the capital of Germany. The Brandenburg Gate is in Berlin.",
}


def test_word_chunks_cover_the_passage_and_resolve_to_their_source():
    text = " ".join(f"w{i}" for i in range(23))
    chunks = Chunker(size=10, overlap=3).split({"doc-7": text})
    # windows start at 0, 7, 14 (step 10 - 3); the third reaches the end (14 + 10 ≥ 23), so it is the last
    assert [c.id for c in chunks] == ["doc-7#0", "doc-7#1", "doc-7#2"]
    assert [len(c.text.split()) for c in chunks] == [10, 10, 23 - 14]
    assert chunks[1].text.split()[:3] == chunks[0].text.split()[-3:]  # the overlap
    assert {w for c in chunks for w in c.text.split()} == set(text.split())
    assert {c.id.rpartition('#')[0] for c in chunks} == {c.doc_id for c in chunks} == {"doc-7"}


def test_ids_holding_the_separator_still_resolve():
    chunks = Chunker(size=2).split({"a#b": "one two three"})
    assert [c.id for c in chunks] == ["a#b#0", "a#b#1"]
    assert [c.id.rpartition('#')[0] for c in chunks] == ["a#b", "a#b"]


def test_token_chunks_hold_at_most_size_tokens():
    text = CITIES["paris"] + " " + CITIES["lyon"]
    chunks = Chunker(size=8, overlap=2, unit="tokens").split({"p": text})
    assert len(chunks) > 2
    assert all(len(load_tokenizer("cl100k_base").encode(c.text)) <= 8 + 1 for c in chunks)  # decode/re-encode may merge one boundary
    assert "Eiffel" in " ".join(c.text for c in chunks)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"size": 10, "overlap": 10}, "overlap"),
    ({"size": 0}, "size"),
    ({"size": 5, "unit": "letters"}, "unit"),
    ({"size": 5, "unit": "tokens", "tokenizer": "no_such_encoding"}, "tokenizer"),
])
def test_bad_chunker_settings_are_config_errors(kwargs, fragment):
    with pytest.raises(ConfigError, match=fragment):
        Chunker(**kwargs)


# ------------------------------------------------------------------------------ index cache


def _slow_build(root: str, marker: str) -> str:
    def build(d: Path) -> None:
        (d / "part1").write_text("half")
        time.sleep(0.3)  # a reader that looked now must not see this directory
        (d / "part2").write_text("whole")

    path, _ = IndexCache(root).get_or_build("bm25", {"corpus": marker}, build)
    return (path / "part1").read_text() + "+" + (path / "part2").read_text()


def test_parallel_processes_build_an_index_once_and_never_read_it_half_written(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        results = pool.starmap(_slow_build, [(str(tmp_path), "same corpus")] * 6)
    assert results == ["half+whole"] * 6
    cache = IndexCache(tmp_path)
    assert len(cache.builds()) == 1
    assert [p.name for p in tmp_path.iterdir() if p.is_dir()] == [cache.path_for("bm25", {"corpus": "same corpus"}).name]


def test_a_failed_build_leaves_nothing_and_the_next_job_builds(tmp_path):
    cache = IndexCache(tmp_path)

    def broken(d: Path) -> None:
        (d / "x").write_text("partial")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError):
        cache.get_or_build("dense", {"k": 1}, broken)
    assert [p for p in tmp_path.iterdir() if p.is_dir()] == []
    path, built = cache.get_or_build("dense", {"k": 1}, lambda d: (d / "x").write_text("ok"))
    assert built and (path / "x").read_text() == "ok"


def test_cache_keys_separate_corpus_chunking_and_settings(tmp_path):
    cache = IndexCache(tmp_path)
    keys = [{"corpus": "a", "chunker": {"size": None}}, {"corpus": "b", "chunker": {"size": None}},
            {"corpus": "a", "chunker": {"size": 50}}, {"corpus": "a", "chunker": {"size": None}, "k1": 1.2}]
    assert len({cache.path_for("bm25", k) for k in keys}) == 4


# ------------------------------------------------------------------------------- retrieval


def _bm25(corpus, tmp_path=None, **kw):
    chunks = Chunker().split(corpus)
    r = BM25Retriever(**kw)
    r.prepare(chunks, {"corpus": "test"}, IndexCache(tmp_path) if tmp_path else None)
    return r, chunks


def test_bm25_ranks_the_passage_sharing_rare_terms_first_and_drops_non_matches(tmp_path):
    r, chunks = _bm25(CITIES, tmp_path)
    timings: dict[str, float] = {}
    hits = r.search("When was the Eiffel Tower built?", 3, timings)
    assert [chunks[i].doc_id for i, _ in hits] == ["paris"]  # no other passage shares a term
    assert set(timings) == {"retrieve"} and timings["retrieve"] >= 0
    hits = r.search("capital city", 3, {})
    assert {chunks[i].doc_id for i, _ in hits} == {"paris", "lyon", "berlin"}
    assert r.search("zebra", 3, {}) == []


def test_bm25_from_the_cache_scores_like_a_fresh_index(tmp_path):
    fresh, _ = _bm25(CITIES)
    _bm25(CITIES, tmp_path)  # builds
    cached, _ = _bm25(CITIES, tmp_path)  # loads
    assert IndexCache(tmp_path).builds() and len(IndexCache(tmp_path).builds()) == 1
    for q in ("capital of France", "Brandenburg Gate", "rivers Rhone Saone"):
        a, b = cached.search(q, 3, {}), fresh.search(q, 3, {})
        assert [i for i, _ in a] == [i for i, _ in b] and [s for _, s in a] == pytest.approx([s for _, s in b])


def test_rrf_is_the_sum_of_reciprocal_ranks():
    fused = dict(rrf([["a", "b", "c"], ["c", "a"]], rrf_k=60))
    assert fused["a"] == pytest.approx(1 / 61 + 1 / 62)
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["b"] == pytest.approx(1 / 62)
    weighted = dict(rrf([["a"], ["b"]], rrf_k=0, weights=[2.0, 1.0]))
    assert weighted == {"a": 2.0, "b": 1.0}


# --------------------------------------------------------------------------- compressors


def test_truncate_spends_the_word_budget_in_rank_order():
    contexts = ["one two three four", "five six seven", "eight nine"]
    out, ids = TruncateCompressor(max_tokens=6, unit="words").compress("q", contexts, ["a", "b", "c"])
    assert out == ["one two three four", "five six"] and ids == ["a", "b"]
    assert sum(len(c.split()) for c in out) == 6


def test_truncate_in_tokens_stays_within_budget():
    contexts = [CITIES["paris"], CITIES["berlin"]]
    out, _ = TruncateCompressor(max_tokens=20, unit="tokens").compress("q", contexts, None)
    assert out[0] == CITIES["paris"] or len(out) == 1
    assert sum(len(load_tokenizer("cl100k_base").encode(c)) for c in out) <= 20 + 1


def test_sentence_compressor_keeps_the_best_sentences_with_their_ids_aligned():
    contexts = [CITIES["berlin"], CITIES["paris"], CITIES["lyon"]]
    out, ids = SentenceCompressor(keep=2).compress("Where is the Eiffel Tower in Paris?", contexts, ["b", "p", "l"])
    # Both kept sentences come from the Paris passage, in their original order.
    assert out == ["Paris is the capital of France. The Eiffel Tower stands in Paris."] and ids == ["p"]
    assert len(out) == len(ids)


def test_extractive_generator_answers_from_the_most_query_like_sentence():
    g = ExtractiveGenerator()
    # content words: query {built}; "It was built in 1889." {built, 1889} → 1/sqrt(1·2), the best
    assert g.generate("When was it built?", [CITIES["lyon"], CITIES["paris"]]) == "It was built in 1889."
    # query {eiffel, tower, built}: "The Eiffel Tower stands in Paris." 2/sqrt(3·4) beats 1/sqrt(3·2)
    assert g.generate("When was the Eiffel Tower built?", [CITIES["paris"]]) == "The Eiffel Tower stands in Paris."
    assert g.generate("anything", []) == ""


# ------------------------------------------------------------------------ build_pipeline


def _dataset(corpus=None, contexts=None):
    recs = [Record(id="1", query="Where is the Eiffel Tower?", contexts=contexts, gt_context_ids=["paris"])]
    return Dataset(name="tiny", records=recs, source="memory", corpus=corpus)


def test_all_stages_off_means_no_pipeline(compose):
    assert build_pipeline(compose(), _dataset()) is None


def test_a_retriever_needs_a_corpus(compose):
    with pytest.raises(ConfigError, match="retriever=bm25 searches the dataset's corpus.*'tiny' brings none"):
        build_pipeline(compose("retriever=bm25"), _dataset())


def test_a_compressor_without_retriever_needs_contexts(compose):
    with pytest.raises(ConfigError, match="compressor=sentence works on contexts"):
        build_pipeline(compose("compressor=sentence"), _dataset())


@pytest.mark.parametrize("override, fragment", [
    ("retriever.top_k=0", "retriever.top_k: expected a positive integer"),
    ("+retriever.k3=1", "unexpected keyword argument 'k3'"),
    ("retriever.method=okapi", "retriever.method"),
])
def test_bad_retriever_settings_are_one_line_config_errors(compose, override, fragment):
    with pytest.raises(ConfigError, match=fragment):
        build_pipeline(compose("retriever=bm25", override), _dataset(CITIES))


def test_pipeline_fills_ids_of_source_passages_and_stage_timings(compose, tmp_path):
    pipe = build_pipeline(compose("retriever=bm25", "retriever.top_k=2", "chunker=words", "chunker.size=6",
                                  "chunker.overlap=0", "generator=extractive",
                                  f"pipeline.cache_dir={tmp_path / 'cache'}"), _dataset(CITIES))
    assert set(pipe.produces) == {"contexts", "context_ids", "answer", "timings", "latency_s"}
    [r] = pipe.run(_dataset(CITIES).records)
    assert r.context_ids[0] == "paris" and r.extra["chunk_ids"][0].startswith("paris#")
    assert [c.rpartition("#")[0] for c in r.extra["chunk_ids"]] == r.context_ids
    assert set(r.timings) == {"retrieve", "generate", "total"}
    assert r.latency_s == r.timings["total"] >= r.timings["retrieve"] + r.timings["generate"]
    assert "Eiffel Tower" in r.answer


@pytest.mark.integration
def test_checking_a_dense_config_loads_no_model(tmp_path, data_dir):
    """Validation is light: composing and checking a dense pipeline imports neither torch nor a model."""
    code = f"""
import sys
from hydra import compose, initialize_config_dir
from ragexp.datasets.base import Dataset
from ragexp.common.records import Record
from ragexp.pipeline import build_pipeline
with initialize_config_dir(config_dir={str(ROOT / 'conf')!r}, version_base="1.3"):
    cfg = compose(config_name="config", overrides=["retriever=hybrid", "compressor=truncate", "generator=extractive"])
ds = Dataset(name="t", records=[Record(id="1", query="q")], source="m", corpus={{"a": "text"}})
assert build_pipeline(cfg, ds) is not None
print(sorted(m for m in ("torch", "sentence_transformers", "litellm", "bm25s") if m in sys.modules))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "[]"
