"""The two pipelines: :class:`RAGPipeline` (``pipeline=default``, the built-in chain of stages, timed per
stage) and :class:`CustomPipeline` (``pipeline=custom``, a user's callable). Definitions (timings, batch
shares, chunk ids in ``context_ids``): docs/pipeline.md, "What the pipeline records". The ranked
metrics rely on ``context_ids: source`` giving corpus ids, a later duplicate not relevant again.
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Iterable, Mapping

from ragexp.errors import ConfigError
from ragexp.common.records import Record, to_record
from ragexp.pipeline.cache import IndexCache
from ragexp.pipeline.chunking import Chunker, corpus_digest
from ragexp.pipeline.compressors import Compressor
from ragexp.pipeline.generators import Generator
from ragexp.pipeline.retrievers import NoRetriever, Retriever

Progress = Callable[[Iterable[Any]], Iterable[Any]]


def _say(message: str) -> None:
    print(f"[ragexp] {message}", file=sys.stderr, flush=True)


class RAGPipeline:
    """corpus → chunker → retriever → compressor → generator, timed per record.

    ``cache_dir``: where indexes are cached (relative to the launch directory; null: no cache).
    ``context_ids``: ``source`` (ids of the corpus passages the chunks came from) or ``chunk``.
    ``batch_size``: queries searched (and encoded) together; 1 times each query alone.
    The stages and the corpus are passed in by :func:`ragexp.pipeline.build_pipeline`.
    """

    def __init__(self, *, chunker: Chunker, retriever: Retriever, compressor: Compressor, generator: Generator,
                 corpus: dict[str, str] | None = None, cache_dir: str | None = ".ragexp_cache/index",
                 context_ids: str = "source", batch_size: int = 4096):
        if context_ids not in ("source", "chunk"):
            raise ConfigError(f"pipeline.context_ids: expected 'source' or 'chunk', got {context_ids!r}")
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"pipeline.batch_size: expected a positive integer, got {batch_size!r}")
        self.batch_size = batch_size
        self.chunker, self.retriever, self.compressor, self.generator = chunker, retriever, compressor, generator
        self.corpus = corpus
        self.cache = IndexCache(cache_dir) if cache_dir else None
        self.context_ids = context_ids
        self.stats: dict[str, float] = {}
        self.chunks: list[Any] = []
        self.failures = 0

    @property
    def produces(self) -> tuple[str, ...]:
        """Record fields this pipeline fills from scratch (the dataset's values are replaced)."""
        out = []
        if self.retriever.uses_corpus:
            out += ["contexts", "context_ids"]
        if self.generator.active:
            out.append("answer")
        return tuple(out + ["timings", "latency_s"])

    def prepare(self) -> None:
        """Chunk the corpus and load or build the retriever's index (not part of any sample's timing)."""
        if not self.retriever.uses_corpus or self.chunks:
            return
        assert self.corpus is not None
        t0 = time.perf_counter()
        self.chunks = self.chunker.split(self.corpus)
        if not self.chunks:
            raise ConfigError("the corpus holds no text to retrieve from")
        self.stats["index/chunks"] = float(len(self.chunks))
        self.stats["index/chunk_seconds"] = time.perf_counter() - t0
        key = {"corpus": corpus_digest(self.corpus), "chunker": self.chunker.key()}
        self.stats.update(self.retriever.prepare(self.chunks, key, self.cache))
        for kind in ("bm25", "dense"):
            if f"index/{kind}/built" in self.stats:
                how = "built" if self.stats[f"index/{kind}/built"] else "loaded from the cache"
                where = f" in {self.cache.root}" if self.cache else " (no cache)"
                _say(f"{kind} index over {len(self.chunks)} chunks {how}{where} "
                     f"({self.stats[f'index/{kind}/seconds']:.2f} s)")

    def run(self, records: list[Record], progress: Progress | None = None) -> list[Record]:
        from itertools import islice

        self.prepare()
        rows = iter(progress(records) if progress else records)
        while batch := list(islice(rows, self.batch_size)):
            timings: list[dict[str, float]] = [{} for _ in batch]
            hits: list[Any] = [None] * len(batch)
            if self.retriever.uses_corpus:
                hits = self.retriever.search_many([r.query for r in batch], self.retriever.top_k, timings)
            for t in timings:  # the retrieval's share of each query's total
                t["total"] = sum(t.values())
            for r, t, h in zip(batch, timings, hits):
                self.run_one(r, h, t)
        if self.retriever.uses_corpus:
            self.stats["pipeline/batch_size"] = float(self.batch_size)
        if self.compressor.active or self.generator.active:  # the stages that call a model and may fail
            self.stats["pipeline/failures"] = float(self.failures)
        if self.failures:
            _say(f"{self.failures} sample(s) failed in a pipeline stage; their fields are left empty "
                 "(see the pipeline_error column of per_sample.json)")
        return records

    def run_one(self, r: Record, hits: list[tuple[int, float]] | None, timings: dict[str, float]) -> None:
        """The stages after retrieval for one record (``hits``: its search results; ``timings``: the
        seconds spent on it so far, ``total`` included)."""
        t0 = time.perf_counter() - timings.pop("total", 0.0)
        if self.retriever.uses_corpus:
            chunks = [self.chunks[i] for i, _ in hits]
            r.contexts = [c.text for c in chunks]
            r.context_ids = [c.doc_id if self.context_ids == "source" else c.id for c in chunks]
            r.extra["chunk_ids"] = [c.id for c in chunks]
            r.extra["context_scores"] = [float(s) for _, s in hits]  # the retriever's, for the run's traces
        elif self.retriever.top_k is not None:
            k = self.retriever.top_k
            r.contexts = r.contexts[:k] if r.contexts is not None else None
            r.context_ids = r.context_ids[:k] if r.context_ids is not None else None
        ok = True
        if self.compressor.active and r.contexts is not None:
            ids = r.context_ids if r.context_ids is not None and len(r.context_ids) == len(r.contexts) else None
            t = time.perf_counter()
            try:
                r.contexts, new_ids = self.compressor.compress(r.query, r.contexts, ids)
                if ids is not None:
                    r.context_ids = new_ids
            except RuntimeError as exc:
                ok = self._failed(r, "compress", exc)
                r.contexts = r.context_ids = None
            timings["compress"] = time.perf_counter() - t
        if self.generator.active:
            t = time.perf_counter()
            if ok:
                try:
                    r.answer = self.generator.generate(r.query, r.contexts or [])
                except RuntimeError as exc:
                    self._failed(r, "generate", exc)
                    r.answer = None
            timings["generate"] = time.perf_counter() - t
        timings["total"] = time.perf_counter() - t0
        r.timings = timings
        r.latency_s = timings["total"]

    def _failed(self, r: Record, stage: str, exc: Exception) -> bool:
        self.failures += 1
        self.stats[f"pipeline/failures/{stage}"] = self.stats.get(f"pipeline/failures/{stage}", 0.0) + 1
        r.extra["pipeline_error"] = f"{stage}: {exc}"
        return False


class CustomPipeline:
    """``pipeline=custom``: your callable answers each query.

    It is called as ``system(query)`` and returns a mapping (or an object with attributes)
    holding any of ``contexts`` (list of str, ranked), ``context_ids`` (list of str, same
    order), ``answer`` (str) and ``timings`` (stage name → seconds). The total wall time of
    the call is measured here and added as ``timings["total"]`` unless you report it.
    ``produces`` lists the fields the system fills (the dataset's values of those fields are
    not used).
    """

    FIELDS = ("contexts", "context_ids", "answer", "timings")

    def __init__(self, system: Callable[[str], Any], target: str,
                 produces: Iterable[str] = ("contexts", "context_ids", "answer")):
        produces = list(produces)
        bad = [f for f in produces if f not in self.FIELDS]
        if bad:
            raise ConfigError(f"pipeline._produces_: {', '.join(map(repr, bad))} cannot be produced; "
                              f"expected some of {', '.join(self.FIELDS)}")
        self.system, self.target = system, target
        self._fields = [f for f in produces if f != "timings"]
        self.stats: dict[str, float] = {}

    @property
    def produces(self) -> tuple[str, ...]:
        return tuple(self._fields + ["timings", "latency_s"])

    def run(self, records: list[Record], progress: Progress | None = None) -> list[Record]:
        for row, r in enumerate(progress(records) if progress else records, start=1):
            t0 = time.perf_counter()
            out = self.system(r.query)
            total = time.perf_counter() - t0
            self._fill(r, out, row, total)
        return records

    def _get(self, out: Any, name: str) -> Any:
        if isinstance(out, Mapping):
            return out.get(name)
        return getattr(out, name, None)

    def _fill(self, r: Record, out: Any, row: int, total: float) -> None:
        """Take the system's output into ``r``, each field checked as a dataset's are (:func:`to_record`)."""
        if isinstance(out, str):
            out = {"answer": out}
        got = {name: value for name in self.FIELDS if (value := self._get(out, name)) is not None}
        if isinstance(got.get("timings"), Mapping):
            got["timings"] = dict(got["timings"])
        checked = to_record({**got, "id": r.id, "query": r.query}, path=f"pipeline {self.target} (sample '{r.id}')",
                            row=row)
        for name in ("contexts", "context_ids", "answer"):
            if name in got:
                setattr(r, name, getattr(checked, name))
        r.timings = {**(checked.timings or {})}
        r.timings.setdefault("total", total)
        r.latency_s = r.timings["total"]

__all__ = ["RAGPipeline", "CustomPipeline", "NoRetriever"]
