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

On a cluster, ``judge.cache_backend`` is a PostgreSQL URL instead (:class:`PostgresJudgeCache`, one
table ``ragexp_judge_replies`` keyed the same way): every job on every node reads and writes it, so a
verdict paid for once is shared, and a re-run makes no call. Two jobs that ask the same question at
the same moment do not both pay: the first takes the key's claim (a PostgreSQL advisory lock, released
when its reply is stored, when the request fails, or when its process dies), the other waits for that
reply (:meth:`PostgresJudgeCache.try_claim`). :func:`open_cache` picks the backend. Processes sharing one
SQLite file claim a question the same way, with a row per question being asked (:meth:`JudgeCache.try_claim`;
a killed process's claims are taken over).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Iterator

from ragexp.common.files import pid_alive
from ragexp.judge.errors import CacheError
from ragexp.common.secrets import redact_url, scrub


def _create_table(table: str, real: str) -> str:
    """The replies table, the same columns in SQLite and PostgreSQL (``real``: each one's float type)."""
    return f"""
CREATE TABLE IF NOT EXISTS {table} (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    finish_reason TEXT,
    tokens_in INTEGER NOT NULL DEFAULT 0,
    tokens_out INTEGER NOT NULL DEFAULT 0,
    cost_usd {real} NOT NULL DEFAULT 0,
    created {real} NOT NULL
)
"""


_SCHEMA = _create_table("replies", "REAL")
#: Questions being asked right now, by which process (:meth:`JudgeCache.try_claim`).
_CLAIMS_SCHEMA = "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, pid INTEGER, host TEXT, started REAL)"
#: Seconds a claim of another host is honoured (its process cannot be seen from here).
CLAIM_STALE_S = 900.0
#: What a cached reply is read as, in this order, by both backends.
_REPLY_COLUMNS = ("text", "finish_reason", "tokens_in", "tokens_out", "cost_usd")
_SELECT_REPLY = f"SELECT {', '.join(_REPLY_COLUMNS)} FROM {{table}} WHERE key = {{param}}"


def _reply(row: tuple | None) -> dict[str, Any] | None:
    return None if row is None else dict(zip(_REPLY_COLUMNS, row))


#: What a failing cache raises, whichever the backend.
CACHE_ERRORS: tuple[type[BaseException], ...] = (sqlite3.Error, CacheError)


def open_cache(backend: str, path: str | Path) -> "JudgeCache | PostgresJudgeCache":
    """The judge cache ``judge.cache_backend`` names: ``sqlite`` (the file ``path``) or a ``postgresql://`` URL."""
    if backend == "sqlite":
        return JudgeCache(path)
    return PostgresJudgeCache(backend)


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
        self._retry(lambda: self._conn.execute(_CLAIMS_SCHEMA))
        self._held: dict[str, int] = {}

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
                _SELECT_REPLY.format(table="replies", param="?"), (key,)).fetchone())
        return _reply(row)

    def put(self, key: str, *, model: str, text: str, finish_reason: str | None, tokens_in: int, tokens_out: int,
            cost_usd: float) -> None:
        with self._lock:
            self._retry(lambda: self._conn.execute(
                "INSERT OR REPLACE INTO replies VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (key, model, text, finish_reason, int(tokens_in), int(tokens_out), float(cost_usd), time.time())))

    def try_claim(self, key: str) -> bool:
        """Take the right to ask ``key``'s question now; False while another live process holds it (two
        processes on one cache file, e.g. two generations at once, would both pay for it otherwise).

        A claim is a row of ``claims`` (key, process id, host, time): one whose process is gone — a job
        killed with ``kill -9`` — is taken over; one of another host counts for :data:`CLAIM_STALE_S`.
        Claims of this process are re-entrant (its own coroutines share its replies anyway).
        """
        me, host, now = os.getpid(), socket.gethostname(), time.time()

        def claim() -> bool:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                row = self._conn.execute("SELECT pid, host, started FROM claims WHERE key = ?", (key,)).fetchone()
                if row is not None and row[0] != me and (pid_alive(row[0]) if row[1] == host
                                                         else now - row[2] < CLAIM_STALE_S):
                    return False
                self._conn.execute("INSERT OR REPLACE INTO claims VALUES (?, ?, ?, ?)", (key, me, host, now))
                return True
            finally:
                self._conn.execute("COMMIT")

        with self._lock:
            got = self._retry(claim)
        if got:
            self._held[key] = self._held.get(key, 0) + 1
        return got

    def release(self, key: str) -> None:
        if not self._held.get(key):
            return
        self._held[key] -= 1
        if self._held[key]:
            return
        del self._held[key]
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._retry(lambda: self._conn.execute("DELETE FROM claims WHERE key = ? AND pid = ?", (key, os.getpid())))

    def __len__(self) -> int:
        with self._lock:
            return self._conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()


# --- PostgreSQL: one cache for every node of a cluster ------------------------------------------------------

PG_TABLE = "ragexp_judge_replies"
_PG_SCHEMA = _create_table(PG_TABLE, "DOUBLE PRECISION")
#: The advisory lock that serialises creating the table (two jobs starting at once would both create it).
_SCHEMA_LOCK = 0x7261676578700001
#: Seconds to connect (libpq's ``connect_timeout``: TCP, TLS and login) and for any one statement to be
#: answered; past either the cache fails with one line (a server that accepts connections and never answers).
PG_CONNECT_TIMEOUT_S = 10
PG_STATEMENT_TIMEOUT_S = 30.0


def is_postgres_url(value: str) -> bool:
    """``postgresql://…``, ``postgres://…`` or ``postgresql+psycopg://…`` (SQLAlchemy's spelling)."""
    scheme = str(value).split("://", 1)[0].lower() if "://" in str(value) else ""
    return scheme.split("+", 1)[0] in ("postgresql", "postgres")


def _lock_id(key: str) -> int:
    """The advisory lock of a cache key: its first 64 bits as a signed bigint."""
    return int.from_bytes(bytes.fromhex(key[:16]), "big", signed=True)


class PostgresJudgeCache:
    """The judge cache in a PostgreSQL table shared by every job of a sweep, on any node.

    Writes are single statements (``INSERT … ON CONFLICT (key) DO UPDATE``, as SQLite's ``INSERT OR
    REPLACE``), so concurrent writers never corrupt it. A password is best kept out of the URL
    (``PGPASSWORD`` or ``~/.pgpass``, read by libpq); one in the URL is never printed or logged
    (:attr:`path` and the run's params carry the URL without it). psycopg 3 is imported here only.
    """

    def __init__(self, url: str, connect_timeout_s: int = PG_CONNECT_TIMEOUT_S):
        rest = str(url).split("://", 1)[1]
        self.url = "postgresql://" + rest  # libpq's spelling (SQLAlchemy's postgresql+psycopg:// too)
        self.path = f"{redact_url(self.url)} (table {PG_TABLE})"
        from ragexp.common.extras import require

        require("psycopg", feature=f"the judge cache at {self.path}")
        import psycopg

        self._psycopg = psycopg
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}  # claims this process holds (advisory locks count re-entries)
        self.statement_timeout_s = PG_STATEMENT_TIMEOUT_S
        try:
            self._conn = psycopg.connect(self.url, autocommit=True, connect_timeout=connect_timeout_s)
        except psycopg.Error as exc:
            if "timeout expired" in str(exc):  # libpq's connect_timeout
                raise CacheError(f"{self.path} cannot be used (no answer within {connect_timeout_s} s: the server "
                                 "accepts connections but does not reply)") from None
            raise CacheError(f"{self.path} cannot be used ({self._reason(exc)})") from None
        with self._talk(), self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            self._conn.execute(_PG_SCHEMA)

    @contextlib.contextmanager
    def _talk(self) -> Iterator[None]:
        """Statements under the lock, bounded by :attr:`statement_timeout_s` (past it the connection is cut and
        they fail); a failure is one :class:`CacheError` line naming the cache, without credentials."""
        seconds = self.statement_timeout_s
        cut = threading.Event()

        def stop() -> None:
            cut.set()
            with contextlib.suppress(OSError):  # the blocked read sees the end of the stream at once
                socket.socket(fileno=os.dup(self._conn.pgconn.socket)).shutdown(socket.SHUT_RDWR)

        timer = threading.Timer(seconds, stop)
        timer.daemon = True
        with self._lock:
            timer.start()
            try:
                yield
            except self._psycopg.Error as exc:
                if cut.is_set():
                    raise CacheError(f"{self.path} cannot be used (no answer within {seconds:g} s)") from None
                raise CacheError(f"{self.path} cannot be used ({self._reason(exc)})") from None
            finally:
                timer.cancel()

    def _reason(self, exc: BaseException) -> str:
        """psycopg's message in one line, without credentials."""
        text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        return scrub(redact_url(text))[:300]

    def _run(self, sql: str, args: tuple = ()) -> Any:
        with self._talk():
            return self._conn.execute(sql, args)

    def check_writable(self) -> None:
        """Raise (:class:`CacheError`) unless a reply could be stored now: a write, rolled back."""
        with self._talk(), self._conn.transaction(force_rollback=True):
            self._conn.execute(f"INSERT INTO {PG_TABLE} VALUES ('ragexp-write-probe', '', '', NULL, 0, 0, 0, 0) "
                               "ON CONFLICT (key) DO NOTHING")

    def get(self, key: str) -> dict[str, Any] | None:
        return _reply(self._run(_SELECT_REPLY.format(table=PG_TABLE, param="%s"), (key,)).fetchone())

    def put(self, key: str, *, model: str, text: str, finish_reason: str | None, tokens_in: int, tokens_out: int,
            cost_usd: float) -> None:
        self._run(
            f"INSERT INTO {PG_TABLE} VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO UPDATE SET "
            "model = EXCLUDED.model, text = EXCLUDED.text, finish_reason = EXCLUDED.finish_reason, "
            "tokens_in = EXCLUDED.tokens_in, tokens_out = EXCLUDED.tokens_out, cost_usd = EXCLUDED.cost_usd, "
            "created = EXCLUDED.created",
            (key, model, text, finish_reason, int(tokens_in), int(tokens_out), float(cost_usd), time.time()))

    def try_claim(self, key: str) -> bool:
        """Take the right to ask ``key``'s question now; False while another process holds it.

        The claim is a session advisory lock: another job's connection cannot take it until this one
        releases it (:meth:`release`) or ends (a killed job frees its claims with its connection).
        """
        got = bool(self._run("SELECT pg_try_advisory_lock(%s)", (_lock_id(key),)).fetchone()[0])
        if got:
            self._held[key] = self._held.get(key, 0) + 1
        return got

    def release(self, key: str) -> None:
        if not self._held.get(key):
            return
        self._held[key] -= 1
        if not self._held[key]:
            del self._held[key]
        try:
            self._run("SELECT pg_advisory_unlock(%s)", (_lock_id(key),))
        except CacheError:
            pass  # the connection is gone, and its locks with it

    def __len__(self) -> int:
        return self._run(f"SELECT COUNT(*) FROM {PG_TABLE}").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._conn.close()
