"""The persistent judge cache: one SQLite file shared by runs and by parallel sweep jobs.

A reply is stored under a key that hashes everything that changes it — model, API base,
messages, temperature, seed, max tokens and the prompt's id (name and version) — so changing any
of them asks again, and nothing else does. WAL journaling and a busy timeout let several
processes (Hydra's joblib launcher) read and write the same file at once.

    >>> import tempfile, os
    >>> c = JudgeCache(os.path.join(tempfile.mkdtemp(), "judge.sqlite"))
    >>> k = cache_key(model="gpt-4o", api_base=None, messages=[{"role": "user", "content": "hi"}],
    ...               temperature=0.0, seed=0, max_tokens=16, prompt="relevance.v1")
    >>> c.get(k) is None
    True
    >>> c.put(k, model="gpt-4o", text='{"relevant": true}', finish_reason="stop", tokens_in=12, tokens_out=5, cost_usd=0.0001)
    >>> c.get(k)["text"]
    '{"relevant": true}'
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    finish_reason TEXT,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost_usd REAL NOT NULL DEFAULT 0,
    created REAL NOT NULL
)
"""


def cache_key(*, model: str, api_base: str | None, messages: list[dict[str, str]], temperature: float,
              seed: int | None, max_tokens: int, prompt: str) -> str:
    """SHA-256 over everything that changes the judge's answer."""
    payload = {"model": model, "api_base": (api_base or "").rstrip("/"), "messages": messages,
               "temperature": float(temperature), "seed": seed, "max_tokens": int(max_tokens), "prompt": prompt}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


class JudgeCache:
    """Get and put judge replies; safe across threads and processes."""

    def __init__(self, path: str | Path, busy_timeout_s: float = 60.0):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(str(self.path), timeout=busy_timeout_s, check_same_thread=False,
                                     isolation_level=None)
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_s * 1000)}")
        self._retry(lambda: self._conn.execute("PRAGMA journal_mode = WAL"))
        self._conn.execute("PRAGMA synchronous = NORMAL")
        self._retry(lambda: self._conn.execute(_SCHEMA))

    @staticmethod
    def _retry(fn: Any, attempts: int = 20) -> Any:
        for i in range(attempts):
            try:
                return fn()
            except sqlite3.OperationalError as exc:  # "database is locked" while another job sets up
                if "locked" not in str(exc) or i == attempts - 1:
                    raise
                time.sleep(0.05 * (i + 1))

    def check_writable(self) -> None:
        """Raise (``sqlite3.Error``) unless a reply could be stored now: a write, rolled back."""
        with self._lock:
            self._retry(lambda: self._conn.execute("BEGIN IMMEDIATE"))
            try:
                self._conn.execute("INSERT OR REPLACE INTO replies VALUES ('ragexp-write-probe', '', '', NULL, 0, 0, 0, 0)")
            finally:
                self._conn.execute("ROLLBACK")

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._retry(lambda: self._conn.execute(
                "SELECT text, finish_reason, tokens_in, tokens_out, cost_usd FROM replies WHERE key = ?",
                (key,)).fetchone())
        if row is None:
            return None
        return {"text": row[0], "finish_reason": row[1], "tokens_in": row[2], "tokens_out": row[3], "cost_usd": row[4]}

    def put(self, key: str, *, model: str, text: str, finish_reason: str | None, tokens_in: int, tokens_out: int,
            cost_usd: float) -> None:
        with self._lock:
            self._retry(lambda: self._conn.execute(
                "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, model, text, finish_reason, int(tokens_in), int(tokens_out), float(cost_usd), time.time())))

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
