"""The memory layer under test (``conf/memory_layer/``): each question is answered from a memory of its own
conversation only, holding the sessions that took place before the question's time when it has one.

Built-in memories (``turns``, ``sessions``, ``observations``, ``summaries``) are passages searched by the
configured retriever (BM25 when ``retriever=none``), ``retriever.top_k`` of them (10 when null); each index
is built once per conversation, kind and retriever through the pipeline's on-disk cache, so every job of a
sweep, in any process, reuses it. ``custom`` is the user's own memory layer (:mod:`ragexp.pipeline.user_memory`).
The answer is the recorded one under ``generator=precomputed``, else the generator's over the retrieved memory.
Each question is timed per stage: ``search``, ``answer``. Definitions: docs/memory-layers.md.
"""

from __future__ import annotations

import copy
import sys
import time
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Callable, Iterable

from ragexp.common.paths import plain
from ragexp.common.records import Record
from ragexp.datasets.conversations import Conversation, Session, conversation_of, question_time
from ragexp.errors import ConfigError
from ragexp.pipeline.cache import IndexCache, key_digest
from ragexp.pipeline.chunking import Chunk

KINDS = ("turns", "sessions", "observations", "summaries")
#: k when retriever.top_k is null (retriever=none)
DEFAULT_K = 10
Progress = Callable[[Iterable[Any]], Iterable[Any]]


def _say(message: str) -> None:
    print(f"[ragexp] {message}", file=sys.stderr, flush=True)


def _when(s: Session) -> str:
    return f"[{s.time:%Y-%m-%d %H:%M}] " if s.time is not None else ""


def memory_passages(sessions: Iterable[Session], kind: str) -> list[Chunk]:
    """The memory of ``kind`` over ``sessions``: one :class:`Chunk` a passage, its ``doc_id`` the id retrieval
    reports (a turn's id; ``S<n>`` for a session or its summary; an observation's first cited turn, else ``""``:
    an id that matches no evidence, where an ``S<n>`` would turn LoCoMo's evidence recall session-level).

        >>> from ragexp.datasets.conversations import Observation, Turn
        >>> s = Session(2, None, (Turn("D2:1", "Ann", "I paint."), Turn("D2:2", "Bo", "Nice", "a lake")),
        ...             (Observation("Ann paints.", ("D2:1",)),), "Ann said she paints.")
        >>> [(c.doc_id, c.text) for c in memory_passages([s], "turns")]
        [('D2:1', 'Ann: I paint.'), ('D2:2', 'Bo: Nice [shared an image: a lake]')]
        >>> [(c.doc_id, c.text) for c in memory_passages([s], "sessions")]
        [('S2', 'Ann: I paint.\\nBo: Nice [shared an image: a lake]')]
        >>> [(c.doc_id, c.text) for c in memory_passages([s], "observations") + memory_passages([s], "summaries")]
        [('D2:1', 'Ann paints.'), ('S2', 'Ann said she paints.')]
    """
    out: list[tuple[str, str]] = []
    for s in sessions:
        lines = [f"{t.speaker}: {t.text}" + (f" [shared an image: {t.image_caption}]" if t.image_caption else "")
                 for t in s.turns]
        if kind == "turns":
            out += [(t.id, _when(s) + line) for t, line in zip(s.turns, lines)]
        elif kind == "sessions" and lines:
            out.append((s.id, _when(s) + "\n".join(lines)))
        elif kind == "observations":
            out += [(o.turn_id or "", _when(s) + o.text) for o in s.observations if o.text.strip()]
        elif kind == "summaries" and s.summary and s.summary.strip():
            out.append((s.id, _when(s) + s.summary))
    return [Chunk(f"{doc_id}#{n}", doc_id, text) for n, (doc_id, text) in enumerate(out)]


def build_memory_pipeline(layer: dict[str, Any], cfg: Any, dataset: Any) -> "MemoryPipeline":
    """The configured memory layer over ``dataset``'s conversations, every setting checked before any work."""
    from ragexp.common.targets import build
    from ragexp.pipeline.generators import PrecomputedGenerator
    from ragexp.pipeline.retrievers import BM25Retriever, NoRetriever

    kind = str(layer.get("name"))
    if kind not in (*KINDS, "custom"):
        raise ConfigError(f"memory_layer: expected one of none, {', '.join(KINDS)}, custom; got {kind!r}")
    for group, off in (("chunker", "none"), ("compressor", "none")):
        name = (plain(cfg.get(group)) or {}).get("name", off)
        if name != off:
            raise ConfigError(f"memory_layer={kind} keeps each memory whole and uncompressed; drop {group}={name}")
    conversations = getattr(dataset, "conversations", None)
    if not conversations:
        raise ConfigError(f"memory_layer={kind} needs questions about conversations (dataset=locomo, or the "
                          f"conversation format of docs/datasets.md); dataset '{dataset.name}' brings none")
    _check_questions(dataset, conversations)
    retriever = build(cfg.get("retriever"), "retriever", NoRetriever())
    k = retriever.top_k if retriever.top_k is not None else DEFAULT_K
    generator = build(cfg.get("generator"), "generator", PrecomputedGenerator())
    client = getattr(generator, "client", None)
    if client is not None:
        client.check_credentials()
    user = None
    if kind == "custom":
        from ragexp.pipeline.user_memory import UserMemory

        if retriever.uses_corpus:
            raise ConfigError(f"memory_layer=custom searches with your memory's own search; drop retriever={retriever.name} "
                              "(retriever.top_k alone sets the k it is asked for)")
        unknown = sorted(set(layer) - {"name", "factory", "kwargs", "timeout_s"})
        if unknown:
            raise ConfigError(f"memory_layer=custom: unknown key(s) {', '.join(unknown)}; your factory's arguments "
                              f"go under memory_layer.kwargs (e.g. +memory_layer.kwargs.{unknown[0]}=...)")
        user = UserMemory(layer.get("factory"), layer.get("kwargs"), layer.get("timeout_s"))
    else:
        if kind in ("observations", "summaries") and not _brings(conversations, kind):
            raise ConfigError(f"memory_layer={kind}: dataset '{dataset.name}' brings no {kind} in any conversation; "
                              "choose memory_layer=turns or sessions")
        if not retriever.uses_corpus:
            retriever = BM25Retriever(top_k=k)
        if kind in ("sessions", "summaries"):
            _say(f"memory_layer={kind} retrieves sessions (ids S<n>): evidence recall is then session-level, as "
                 "LoCoMo's scoring reads S ids (a session counts for every evidence turn in it), higher than a "
                 "turn-level memory's for the same search; recall_at_k, mrr and ndcg of metric=locomo rank the "
                 "evidence's sessions (docs/memory-layers.md)")
    pipe = plain(cfg.get("pipeline")) or {}
    cache_dir = pipe.get("cache_dir", ".ragexp_cache/index")
    recorded = sum(1 for r in dataset.records if r.context_ids is not None or r.contexts is not None)
    if recorded:
        key = (plain(cfg.get("dataset")) or {}).get("prediction_key") or "prediction"
        _say(f"memory_layer={kind} does the retrieval: the recorded contexts of {recorded} question(s) "
             f"({key}_context) are ignored")
    return MemoryPipeline(kind, retriever, k, generator, conversations, cache_dir=cache_dir, user=user,
                          batch_size=pipe.get("batch_size", 4096))


def _brings(conversations: dict[str, Conversation], kind: str) -> bool:
    return any(s.observations if kind == "observations" else s.summary
               for c in conversations.values() for s in c.sessions)


def _check_questions(dataset: Any, conversations: dict[str, Conversation]) -> None:
    for row, r in enumerate(dataset.records, start=1):
        cid = conversation_of(r)
        if cid is None or cid not in conversations:
            raise ConfigError(f"{dataset.source}: question '{r.id}' (row {row}) names "
                              f"{'no conversation' if cid is None else f'the conversation {cid!r}, which the data lacks'}; "
                              "a memory layer answers each question from its own conversation")


class MemoryPipeline:
    """Each question's context from its conversation's memory (module docstring); the answer recorded or generated."""

    def __init__(self, kind: str, retriever: Any, k: int, generator: Any, conversations: dict[str, Conversation],
                 cache_dir: str | None = ".ragexp_cache/index", user: Any = None, batch_size: int = 4096):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigError(f"pipeline.batch_size: expected a positive integer, got {batch_size!r}")
        self.batch_size = batch_size
        self.kind, self.searcher, self.k, self.generator = kind, retriever, k, generator
        self.conversations, self.user = conversations, user
        self.cache = IndexCache(cache_dir) if cache_dir else None
        self.memory_layer = f"{kind} ({user.factory})" if user is not None else kind
        # what did the retrieval, as a run's provenance names its stages (summary.json, the run's description)
        self.retriever = SimpleNamespace(name=f"memory_layer={self.memory_layer}" if user is not None
                                         else f"{retriever.name} over memory_layer={kind}")
        self.stats: dict[str, float] = {}
        self.failures = 0
        self._indexes: dict[str, Any] = {}

    @property
    def produces(self) -> tuple[str, ...]:
        return ("contexts", "context_ids", *(("answer",) if self.generator.active else ()), "timings", "latency_s")

    def run(self, records: list[Record], progress: Progress | None = None) -> list[Record]:
        groups: dict[str, list[Record]] = {}
        for r in records:
            groups.setdefault(conversation_of(r) or "", []).append(r)
        bar = iter(progress(records) if progress else records)
        for cid, group in groups.items():
            if self.user is not None:
                self._ask_user(self.conversations[cid], group)
            else:
                self._search_builtin(self.conversations[cid], group)
            for r in group:
                self._answer(r)
                next(bar, None)
        for _ in bar:
            pass
        self.stats["memory/k"] = float(self.k)
        self.stats["pipeline/failures"] = float(self.failures)
        if self.failures:
            _say(f"{self.failures} question(s) got no answer from memory_layer={self.memory_layer}; their fields are "
                 "left empty (see the pipeline_error column of per_sample.json)")
        return records

    # ------------------------------------------------------------------ built-in memories

    def _index(self, chunks: list[Chunk]) -> Any:
        """The retriever prepared over ``chunks``: from this process's memo, else the on-disk cache, else built."""
        key = {"memory": self.kind, "passages": key_digest({"p": [(c.doc_id, c.text) for c in chunks]})}
        digest = key_digest(key)
        if digest not in self._indexes:
            retriever = copy.deepcopy(self.searcher)  # never prepared itself: settings only (hybrid holds two)
            got = retriever.prepare(chunks, key, self.cache)
            for name, value in got.items():
                if name.endswith("/built"):
                    counter = "memory/indexes_built" if value else "memory/indexes_loaded"
                    self.stats[counter] = self.stats.get(counter, 0.0) + 1
                elif name.endswith("/seconds"):
                    self.stats["memory/index_seconds"] = self.stats.get("memory/index_seconds", 0.0) + value
            self._indexes[digest] = retriever
        return self._indexes[digest]

    def _search_builtin(self, conversation: Conversation, group: list[Record]) -> None:
        by_memory: dict[tuple[int, ...], list[Record]] = {}
        for r in group:  # the questions that see the same sessions share one memory
            seen = conversation.sessions_before(question_time(r))
            by_memory.setdefault(tuple(s.number for s in seen), []).append(r)
        for numbers, questions in by_memory.items():
            chunks = memory_passages([s for s in conversation.sessions if s.number in set(numbers)], self.kind)
            timings: list[dict[str, float]] = [{} for _ in questions]
            hits: list[list[tuple[int, float]]] = [[] for _ in questions]
            for at in range(0, len(questions) if chunks else 0, self.batch_size):  # a question's time: its batch share
                part = slice(at, at + self.batch_size)
                hits[part] = self._index(chunks).search_many([r.query for r in questions[part]], self.k, timings[part])
            for r, h, t in zip(questions, hits, timings):
                picked = [chunks[i] for i, _ in h][: self.k]
                r.contexts, r.context_ids = [c.text for c in picked], [c.doc_id for c in picked]
                r.extra["context_scores"] = [float(s) for _, s in h][: self.k]
                r.timings = {"search": sum(t.values())}

    # ------------------------------------------------------------------ the user's memory

    def _ask_user(self, conversation: Conversation, group: list[Record]) -> None:
        """Sessions added in order up to each question's time (all of them when questions have none), then one
        search per question; a failed add leaves the conversation's later questions with its reason."""
        added: set[int] = set()
        broken: str | None = None
        times = [question_time(r) for r in group]
        order = sorted(range(len(group)), key=lambda i: (times[i] is None, times[i] or datetime.min))
        for i in order:
            r = group[i]
            for s in conversation.sessions_before(question_time(r)):
                if broken is None and s.number not in added:
                    added.add(s.number)
                    seconds, error = self.user.add(conversation.id, _messages(s))
                    self._tally("add", seconds)
                    if error is not None:
                        broken = f"add (session {s.id}): {error}"
            if broken is not None:
                self._failed(r, broken)
                continue
            hits, seconds, error = self.user.search(conversation.id, r.query, self.k)
            self._tally("search", seconds)
            r.timings = {"search": seconds}
            if error is not None:
                self._failed(r, f"search: {error}")
                if error.startswith("timeout"):  # the memory may still be busy with it: the rest are not asked
                    broken = f"search: an earlier search of this conversation did not return ({error})"
                continue
            r.contexts = [h["text"] for h in hits]
            r.context_ids = [h.get("id", "") for h in hits] if any("id" in h for h in hits) else None
            if all("score" in h for h in hits):
                r.extra["context_scores"] = [h["score"] for h in hits]

    def _tally(self, stage: str, seconds: float) -> None:
        self.stats[f"memory/{stage}_calls"] = self.stats.get(f"memory/{stage}_calls", 0.0) + 1
        self.stats[f"memory/{stage}_seconds"] = self.stats.get(f"memory/{stage}_seconds", 0.0) + seconds

    def _failed(self, r: Record, reason: str) -> None:
        self.failures += 1
        r.extra["pipeline_error"] = reason[:500]
        r.timings = r.timings or {}

    # ------------------------------------------------------------------ the answer

    def _answer(self, r: Record) -> None:
        timings = dict(r.timings or {})
        if self.generator.active:
            t0 = time.perf_counter()
            if "pipeline_error" not in r.extra:
                try:
                    r.answer = self.generator.generate(r.query, r.contexts or [])
                except RuntimeError as exc:
                    self.failures += 1
                    r.extra["pipeline_error"] = f"answer: {exc}"[:500]
            timings["answer"] = time.perf_counter() - t0
        timings["total"] = sum(timings.values())
        r.timings, r.latency_s = timings, timings["total"]


def _messages(s: Session) -> list[dict[str, Any]]:
    """One session as the user's ``add`` receives it."""
    when = s.time.isoformat() if s.time is not None else None
    out = []
    for t in s.turns:
        m = {"id": t.id, "speaker": t.speaker, "text": t.text, "time": when}
        if t.image_caption:
            m["image_caption"] = t.image_caption
        out.append(m)
    return out


__all__ = ["KINDS", "MemoryPipeline", "build_memory_pipeline", "memory_passages"]
