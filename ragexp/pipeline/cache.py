"""The on-disk index cache: build an index once per corpus, chunking and model.

An index lives in ``<root>/<kind>-<key>/`` where ``key`` is a digest of everything that
determines it (corpus content, chunker settings, retriever settings, library version). The
jobs of a sweep — in one process or in parallel joblib workers — share it:

- a finished index is a directory that appears in one atomic ``rename`` from a private
  temporary directory, so a reader never sees a half-written index;
- builders take a file lock (``<kind>-<key>.lock``, via ``filelock``) and look again once they
  hold it, so parallel jobs build each index once while the others wait and then load it;
- every build appends a line to ``<root>/builds.log``.

A relative ``root`` is relative to the launch directory (Hydra's ``runtime.cwd``), not to the
process's working directory, so jobs that run elsewhere — with ``hydra.job.chdir=true``, or as
Ray tasks — still share one cache.

    >>> import tempfile
    >>> cache = IndexCache(tempfile.mkdtemp())
    >>> calls = []
    >>> def build(d):
    ...     calls.append(1)
    ...     (d / "data.txt").write_text("index")
    >>> path, built = cache.get_or_build("bm25", {"corpus": "abc"}, build)
    >>> built, (path / "data.txt").read_text()
    (True, 'index')
    >>> cache.get_or_build("bm25", {"corpus": "abc"}, build)[1], len(calls)
    (False, 1)
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Callable

MANIFEST = "manifest.json"
BUILD_LOG = "builds.log"


def key_digest(parts: dict[str, Any]) -> str:
    """A short stable digest of a JSON-able mapping."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


class IndexCache:
    """Directory-per-index cache with atomic publication and a build lock."""

    def __init__(self, root: str | os.PathLike[str], lock_timeout: float = 3600.0):
        from ragexp.common.paths import launch_dir

        root = Path(root).expanduser()
        self.root = root if root.is_absolute() else launch_dir() / root
        self.lock_timeout = lock_timeout

    def path_for(self, kind: str, parts: dict[str, Any]) -> Path:
        return self.root / f"{kind}-{key_digest(parts)}"

    def get_or_build(self, kind: str, parts: dict[str, Any], build: Callable[[Path], None]) -> tuple[Path, bool]:
        """The directory of the index (building it with ``build(tmp_dir)`` if absent), and whether it was built."""
        final = self.path_for(kind, parts)
        if (final / MANIFEST).exists():
            return final, False
        from filelock import FileLock

        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(final) + ".lock", timeout=self.lock_timeout):
            if (final / MANIFEST).exists():  # another job built it while we waited
                return final, False
            if final.exists():  # a directory without a manifest: left by a crash mid-publish
                shutil.rmtree(final, ignore_errors=True)
            tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}.", dir=self.root))
            try:
                build(tmp)
                (tmp / MANIFEST).write_text(json.dumps({"kind": kind, **parts}, indent=2, default=str))
                os.replace(tmp, final)
                self._log_build(final.name)
            except BaseException:
                shutil.rmtree(tmp, ignore_errors=True)
                raise
        return final, True

    def _log_build(self, name: str) -> None:
        """Append one line per build to ``<root>/builds.log`` (which job built which index, when)."""
        import time

        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid={os.getpid()} built {name}\n"
        fd = os.open(self.root / BUILD_LOG, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def builds(self) -> list[str]:
        """The index names built so far, one per build, oldest first."""
        f = self.root / BUILD_LOG
        return [ln.rsplit(" ", 1)[-1] for ln in f.read_text().splitlines()] if f.exists() else []


#: The query-embedding cache beside the indexes: one SQLite file for every model, keyed by
#: (model, prefix, query text), so the dense jobs of a sweep encode each query once per model.
QUERY_VECTORS = "query_vectors.sqlite"


class QueryVectors:
    """Query embeddings of one model (``model``: what determines the vectors) in ``<root>/query_vectors.sqlite``.

    Jobs in parallel workers share the file (SQLite's WAL, a writer waits up to 60 s); a vector is
    stored once, as the float32 bytes the encoder returned.

        >>> import tempfile, numpy as np
        >>> store = QueryVectors(tempfile.mkdtemp(), {"model": "m"})
        >>> store.put("query: ", ["a", "b"], np.array([[1, 0], [0, 1]], dtype=np.float32))
        >>> sorted((q, v.tolist()) for q, v in store.get("query: ", ["a", "c"]).items())
        [('a', [1.0, 0.0])]
    """

    def __init__(self, root: str | os.PathLike[str], model: dict[str, Any]):
        self.path = Path(root) / QUERY_VECTORS
        self.model = key_digest(model)

    def _connect(self) -> Any:
        import sqlite3

        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=60)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE IF NOT EXISTS vectors (model TEXT, prefix TEXT, query TEXT, dtype TEXT, vector BLOB,"
                   " PRIMARY KEY (model, prefix, query))")
        return db

    def get(self, prefix: str, queries: list[str]) -> dict[str, Any]:
        """The stored vectors of those ``queries`` (query → vector); the others are absent."""
        import numpy as np

        found: dict[str, Any] = {}
        wanted = list(dict.fromkeys(queries))
        db = self._connect()
        try:
            for i in range(0, len(wanted), 500):
                part = wanted[i:i + 500]
                rows = db.execute(f"SELECT query, dtype, vector FROM vectors WHERE model = ? AND prefix = ? AND query IN "
                                  f"({','.join('?' * len(part))})", [self.model, prefix, *part])
                found.update((q, np.frombuffer(blob, dtype=dtype)) for q, dtype, blob in rows)
        finally:
            db.close()
        return found

    def put(self, prefix: str, queries: list[str], vectors: Any) -> None:
        db = self._connect()
        try:
            with db:
                db.executemany("INSERT OR IGNORE INTO vectors VALUES (?, ?, ?, ?, ?)",
                               [(self.model, prefix, q, str(v.dtype), v.tobytes()) for q, v in zip(queries, vectors)])
        finally:
            db.close()
