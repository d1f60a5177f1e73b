"""Where runs go, and how to write to a SQLite store shared by parallel sweep jobs.

The default store is ``sqlite:///<launch dir>/mlflow.db`` — the directory the command was
started from, not Hydra's output folder. ``tracking.uri`` in the config wins, then the
``MLFLOW_TRACKING_URI`` environment variable, then the default.
"""

from __future__ import annotations

import functools
import os
import random
import socket
import sqlite3
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar
from urllib.parse import urlparse

from ragexp.common.paths import artifact_root, env_defaults, sqlite_path, store_uri  # noqa: F401 - artifact_root: used here and by cli.ui
from ragexp._compat import (ALEMBIC_TMP, MLFLOW_TABLES, drop_leftover_migration_tables, foreign_store_line,
                            is_mlflow_store, store_file_problem)
from ragexp.common.secrets import redact_url
from ragexp.errors import ConfigError, TrackingError

T = TypeVar("T")


def resolve_uri(configured: str | None = None) -> str:
    """The store a run uses (:func:`ragexp.common.paths.store_uri`: the dataset ``mlflow_traces`` reads the same)."""
    return store_uri(configured)


def ui_command(uri: str) -> str:
    """The command that opens these runs in the MLflow UI, offline too (``mlflow ui`` hangs there).

    >>> ui_command("sqlite:////data/runs/mlflow.db")
    'python -m ragexp.ui tracking.uri=sqlite:////data/runs/mlflow.db'
    """
    import shlex

    uri = redact_url(uri)  # a password in the store's URL is never printed
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser"
    return f"python -m ragexp.ui {shlex.quote(f'tracking.uri={uri}')}"


_LOCKED = ("database is locked", "database table is locked", "unique constraint failed", "busy",
           # PostgreSQL behind an mlflow server: parallel jobs logging the same dataset input race to insert it;
           # the retry finds it and links it (measured: 1 of 6 Ray jobs lost its run without this)
           "duplicate key value violates unique constraint")
_UNREACHABLE = ("connection refused", "temporarily unavailable", "max retries exceeded", "503", "502",
                "connection aborted", "remote end closed")


def _retry_budget(exc: BaseException) -> float:
    """Seconds worth retrying ``exc`` for: long for a SQLite store busy with parallel jobs, short for a
    server that does not answer (MLflow has already retried each call), none for anything else."""
    text = str(exc).lower()
    if any(s in text for s in _LOCKED):
        return 120.0
    if any(s in text for s in _UNREACHABLE):
        return 8.0
    return 0.0


def retrying(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call ``fn``, retrying with jittered backoff while SQLite is locked by a parallel job.

    A server that does not answer is retried for a few seconds only (each MLflow call already
    retries inside :func:`bounded_http`), so a dead tracking server fails in seconds, not hours.
    """
    delay, started = 0.05, time.monotonic()
    while True:
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - filtered just below
            if time.monotonic() - started + delay > _retry_budget(exc):
                raise
            time.sleep(delay + random.random() * delay)
            delay = min(delay * 2, 2.0)


#: MLflow 3's experiment kind: its UI opens a "custom model development" experiment on the runs
#: table, a GenAI one (what it guesses for an untagged experiment) on an empty Traces page.
KIND_TAG, KIND = "mlflow.experimentKind", "custom_model_development"


def get_or_create_experiment(client: Any, name: str, uri: str) -> str:
    """The experiment's id, creating it if needed; safe when parallel jobs race to create it.
    It carries :data:`KIND_TAG` (set on an existing experiment that has no kind; one the user set stays)."""

    def attempt() -> str:
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            if not (exp.tags or {}).get(KIND_TAG):
                client.set_experiment_tag(exp.experiment_id, KIND_TAG, KIND)
            return exp.experiment_id
        return client.create_experiment(name, artifact_location=artifact_root(uri), tags={KIND_TAG: KIND})

    return retrying(attempt)


# --- Checking the store before any work, and opening it safely from parallel processes -------------

#: MLflow's own HTTP retry settings while ragexp talks to a tracking server: 2 retries, 1 s backoff,
#: 10 s per request (MLflow's defaults, 7 retries with a 2 s factor and 120 s timeouts, keep a dead
#: server busy for many minutes). A value the user has set in the environment wins.
HTTP_BOUNDS = {
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "2",
    "MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR": "1",
    "MLFLOW_HTTP_REQUEST_BACKOFF_JITTER": "0.5",
    "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
}

#: Tags naming the process that owns a run, so a later start can close the runs of dead processes.
HOST_TAG, PID_TAG, PID_START_TAG = "ragexp.host", "ragexp.pid", "ragexp.pid_start"
#: Which kernel boot and PID namespace the pid belongs to: containers sharing a host name, or two machines
#: with the same name, count pids apart; a run whose owner is in another one is never judged from here
PID_SPACE_TAG = "ragexp.pid_space"
#: Why a run ended FAILED (an interrupt, a signal, a dead process, a logging error).
FAILURE_TAG = "ragexp.failure_reason"

_SCHEMES = ("sqlite", "http", "https", "postgresql", "mysql", "mssql", "file", "databricks")


#: The tracking node's keys for :data:`HTTP_BOUNDS` (conf/tracking/server.yaml sets them).
_HTTP_KEYS = {"http_max_retries": "MLFLOW_HTTP_REQUEST_MAX_RETRIES", "http_timeout_s": "MLFLOW_HTTP_REQUEST_TIMEOUT"}


def configure_http(tracking: Any) -> None:
    """Take ``http_max_retries`` / ``http_timeout_s`` from the tracking settings
    (:class:`~ragexp.tracking.settings.TrackingSettings`, or a tracking config node) into :data:`HTTP_BOUNDS`
    (for this process; a value the user has set in the environment still wins). Absent keys keep the
    defaults; a bad value is a :class:`~ragexp.errors.ConfigError`.

    >>> configure_http({"http_timeout_s": 5}); HTTP_BOUNDS["MLFLOW_HTTP_REQUEST_TIMEOUT"]
    '5'
    >>> configure_http({"http_timeout_s": 10})
    """
    for key, env in _HTTP_KEYS.items():
        value = getattr(tracking, key) if hasattr(tracking, key) else (tracking or {}).get(key)
        if value is None:
            continue
        low = 0 if key == "http_max_retries" else 1
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"tracking.{key} must be an integer ≥ {low}, got {value!r}")
        HTTP_BOUNDS[env] = str(value)


@contextmanager
def bounded_http() -> Iterator[None]:
    """MLflow's HTTP retries and timeouts bounded (:data:`HTTP_BOUNDS`) inside the block only."""
    with env_defaults(HTTP_BOUNDS):
        yield


def first_line(exc: BaseException) -> str:
    """The reason of a failure in a few words: MLflow wraps a dead server's in a long urllib3 message."""
    text = str(exc).strip() or type(exc).__name__
    low = text.lower()
    for needle, said in (("connection refused", "connection refused"), ("timed out", "timed out"),
                         ("timeout", "timed out"), ("name or service not known", "unknown host"),
                         ("connection reset", "connection reset"), ("remote end closed", "connection closed")):
        if needle in low:
            return said
    return text.splitlines()[0][:300]


def require_existing_store(uri: str) -> None:
    """For commands that read runs (compare, the UI): a SQLite store that does not exist holds none, and
    is not created for nothing — one line (a ConfigError) instead."""
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        raise ConfigError(f"no MLflow store at {db}: run python -m ragexp there first, or pass tracking.uri=...")
    if db is not None and (problem := store_file_problem(db, empty_ok=False)):
        raise ConfigError(f"{problem}; pass the mlflow.db a run wrote (tracking.uri=sqlite:///<folder>/mlflow.db)")


def _check_shape(uri: str) -> None:
    """The URI names a store MLflow can use, and a local one can be written: one line if not."""
    scheme = urlparse(uri).scheme.split("+", 1)[0]
    if scheme not in _SCHEMES:
        raise TrackingError(
            f"tracking.uri '{uri}': unknown scheme '{scheme or '(none)'}'; expected sqlite:///<path>/mlflow.db, "
            "http(s)://<host>:<port> (an mlflow server), postgresql://, mysql:// or mssql://")
    if scheme == "file":
        path = Path(urlparse(uri).path)
        where = path if path.exists() else path.parent
        if not where.is_dir():
            raise TrackingError(f"tracking.uri '{uri}': the folder {where} does not exist")
        if not os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("1", "true"):
            raise TrackingError(
                f"tracking.uri '{uri}': MLflow no longer writes to a file store; use "
                f"sqlite:///{path / 'mlflow.db'} (or set MLFLOW_ALLOW_FILE_STORE=true)")
    db = sqlite_path(uri)
    if db is not None:
        _check_sqlite_writable(uri, db)


def _check_sqlite_writable(uri: str, db: Path) -> None:
    folder = db.parent
    if not folder.is_dir():
        raise TrackingError(f"tracking store {uri}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise TrackingError(f"tracking store {uri}: the folder {folder} is not writable "
                            "(SQLite writes its journal beside the database)")
    if not db.exists():
        return
    if not os.access(db, os.W_OK):
        raise TrackingError(f"tracking store {uri}: {db} is read-only; make it writable or point tracking.uri elsewhere")
    try:  # a write that is rolled back: proves the file takes writes without leaving a trace
        _probe_sqlite(uri, db)
    except sqlite3.DatabaseError as exc:
        raise TrackingError(f"tracking store {uri}: {db} cannot be written ({exc})") from None
    mlruns = folder / "mlruns"
    if mlruns.exists() and not os.access(mlruns, os.W_OK | os.X_OK):
        raise TrackingError(f"tracking store {uri}: its artifact folder {mlruns} is not writable")


#: Seconds a locked ``mlflow.db`` is waited for before a line says so (then up to a minute more)
LOCKED_SAY_S = 3.0


def _probe_sqlite(uri: str, db: Path) -> None:
    """Refuse a SQLite file of another program (it is never altered: no MLflow table is added to it); prove the
    file takes writes (a write rolled back); a lock held by another process is said in one line within
    :data:`LOCKED_SAY_S` seconds, then waited for up to a minute."""
    said = False

    def say() -> None:
        print(f"ragexp: warning: tracking store {db} is locked by another process; waiting up to 60 s",
              file=sys.stderr, flush=True)

    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=LOCKED_SAY_S)
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        mlflows = is_mlflow_store(con, tables)
    except sqlite3.OperationalError as exc:
        if "locked" not in str(exc):
            raise
        say()
        said = True
        tables, mlflows = list(MLFLOW_TABLES), True  # what it holds is read by MLflow once the lock is gone
    finally:
        con.close()
    if not mlflows:
        raise TrackingError(f"tracking store {uri}: {foreign_store_line(db, tables)}: point tracking.uri at a new "
                            "file (sqlite:///<folder>/mlflow.db)")
    since = time.monotonic()
    while True:  # a second at a time: SQLite's wait is a C call, and a SIGTERM is handled only between tries
        con = sqlite3.connect(str(db), timeout=1.0)
        try:
            con.execute("BEGIN IMMEDIATE")
            con.execute("CREATE TABLE _ragexp_write_probe (x)")
            con.execute("ROLLBACK")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc):
                raise
            waited = time.monotonic() - since
            if said and waited >= 60.0:
                raise TrackingError(f"tracking store {uri}: {db} stayed locked by another process for over a "
                                    "minute; end that process (or point tracking.uri elsewhere)") from None
            if not said and waited >= LOCKED_SAY_S:
                say()
                said, since = True, time.monotonic()
        finally:
            con.close()


def _check_reachable(uri: str) -> None:
    """A tracking server answers at all (any HTTP status) within a few seconds."""
    import urllib.error
    import urllib.request

    if not uri.startswith(("http://", "https://")):
        return
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=5):
            pass
    except urllib.error.HTTPError:
        return  # it answered; the API calls below say whether it is a tracking server
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise TrackingError(f"tracking server {uri} is not reachable: {first_line(reason) if isinstance(reason, BaseException) else reason}") from None


@contextmanager
def creation_lock(uri: str) -> Iterator[None]:
    """Serialise creating and migrating a SQLite store across processes (a lock file beside it).

    Two processes that open one fresh ``mlflow.db`` together otherwise both run MLflow's schema
    migrations and break it (``duplicate column name``, a leftover temporary table: :mod:`ragexp._compat`).
    """
    db = sqlite_path(uri)
    if db is None:
        yield
        return
    from filelock import FileLock

    with FileLock(str(db) + ".lock", timeout=300):
        yield


#: The longest run name MLflow's SQL stores keep: a PostgreSQL or MySQL behind a server refuses a longer one
#: (the whole run fails to log, "BAD_REQUEST … autoflush"); SQLite does not enforce it.
MAX_RUN_NAME = 250


def fit_run_name(name: str | None) -> str | None:
    """``name`` cut to :data:`MAX_RUN_NAME` characters (its end replaced by ``…``) so every store takes it.

    >>> fit_run_name("a" * 300)[-3:], len(fit_run_name("a" * 300))
    ('aa…', 250)
    >>> fit_run_name("short"), fit_run_name(None)
    ('short', None)
    """
    if name is None or len(name) <= MAX_RUN_NAME:
        return name
    return name[:MAX_RUN_NAME - 1] + "…"


#: Seconds a database store (PostgreSQL, MySQL, SQL Server) is given to accept one connection: MLflow
#: itself retries a refused login for ~100 s (10 attempts, doubling waits) and an unreachable host longer.
CONNECT_TIMEOUT_S = 10
#: The whole store check of a database store (connect, MLflow's schema check or migration, the experiment):
#: past it, one line, whatever MLflow was waiting on.
STORE_DEADLINE_S = 90


def _database_scheme(uri: str) -> str | None:
    scheme = urlparse(uri).scheme.split("+", 1)[0]
    return scheme if scheme in ("postgresql", "mysql", "mssql") else None


def check_database(uri: str) -> None:
    """A database store accepts a connection, tried once within :data:`CONNECT_TIMEOUT_S` through
    SQLAlchemy (what MLflow connects with): one line naming the store and the reason if not (a wrong
    password, an unknown user or database, nothing listening, a host that does not answer)."""
    scheme = _database_scheme(uri)
    if scheme is None:
        return
    import sqlalchemy
    from sqlalchemy.pool import NullPool

    timeout = {"mssql": {"timeout": CONNECT_TIMEOUT_S}}.get(scheme, {"connect_timeout": CONNECT_TIMEOUT_S})

    def connect() -> None:
        engine = sqlalchemy.create_engine(uri, connect_args=timeout, poolclass=NullPool)
        try:
            with engine.connect():
                pass
        finally:
            engine.dispose()

    try:
        within_deadline(connect, CONNECT_TIMEOUT_S + 5, f"tracking store {redact_url(uri)}")
    except TrackingError:
        raise
    except ModuleNotFoundError as exc:  # SQLAlchemy's driver for the scheme is not installed
        raise TrackingError(_driver_line(uri, exc.name or str(exc))) from None
    except Exception as exc:  # noqa: BLE001 - the driver's many kinds; the user needs one line
        raise TrackingError(f"tracking store {redact_url(uri)} cannot be reached: {_db_reason(exc)}") from None


def _driver_line(uri: str, module: str) -> str:
    """The store's database driver is missing: which package, and the install line (ragexp's ``cluster`` extra
    brings psycopg, the driver of ``postgresql+psycopg://``; plain ``postgresql://`` means psycopg2)."""
    from ragexp.common.extras import EXTRAS, installed

    root = module.split(".")[0]
    line = f"tracking store {redact_url(uri)}: its database driver, the Python package '{root}', is not installed"
    if root in EXTRAS:
        return f"{line}: pip install 'ragexp[{EXTRAS[root]}]'"
    if root == "psycopg2":
        fix = "write postgresql+psycopg://… (psycopg" + (", installed here)" if installed("psycopg") else
                                                          ": pip install 'ragexp[cluster]')")
        return f"{line}: {fix}, or pip install psycopg2-binary"
    return f"{line}: pip install {_DRIVER_PACKAGES.get(root, root)}"


#: SQLAlchemy's default drivers whose import name is not their package's name
_DRIVER_PACKAGES = {"MySQLdb": "mysqlclient", "pymssql": "pymssql", "pyodbc": "pyodbc"}


def _db_reason(exc: BaseException) -> str:
    """The driver's reason without SQLAlchemy's wrapping: ``password authentication failed for user "x"``."""
    text = " ".join(str(getattr(exc, "orig", None) or exc).split())
    for cut in ("FATAL: ", "failed: "):
        if cut in text:
            text = text.rsplit(cut, 1)[1]
    text = text.split(" (Background on this error")[0]
    return first_line(Exception(text)) if "connection refused" in text.lower() or "timeout" in text.lower() \
        or "timed out" in text.lower() else text[:300]


def within_deadline(fn: Callable[[], T], seconds: float, what: str) -> T:
    """``fn()`` run in a thread and waited for at most ``seconds``: past that, a TrackingError saying
    ``what`` did not answer (the thread is left to end by itself; the process goes on or exits)."""
    import threading

    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    worker = threading.Thread(target=target, name="ragexp-store", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise TrackingError(f"{what} did not answer within {seconds:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]


@functools.lru_cache(maxsize=1)
def _client_class() -> Any:
    """``MlflowClient`` whose ``create_run`` gives the run a name every store takes (:func:`fit_run_name`)."""
    from mlflow.tracking import MlflowClient

    class Client(MlflowClient):
        def create_run(self, experiment_id: str, start_time: int | None = None, tags: Any = None,
                       run_name: str | None = None) -> Any:
            return super().create_run(experiment_id, start_time=start_time, tags=tags, run_name=fit_run_name(run_name))

    return Client


def open_client(uri: str) -> Any:
    """An ``MlflowClient`` on ``uri``, the store created or migrated under :func:`creation_lock`; the runs it
    creates have names every store takes (:func:`fit_run_name`)."""
    import logging

    check_database(uri)
    client_class = _client_class()
    for name in ("mlflow.store.db.utils", "alembic.runtime.migration"):  # their INFO lines on creating and
        logging.getLogger(name).setLevel(logging.WARNING)  # migrating a store: ragexp prints its own line
    try:
        with creation_lock(uri):
            try:
                return retrying(client_class, tracking_uri=uri)
            except Exception as exc:  # noqa: BLE001 - a schema a failed creation left half-migrated: repaired once
                if not _repair_migration(uri, exc):
                    raise
                return retrying(client_class, tracking_uri=uri)
    except TrackingError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLflow raises many kinds; the user needs one line
        raise TrackingError(f"tracking store {uri} cannot be opened: {first_line(exc)}") from None


def _repair_migration(uri: str, exc: BaseException) -> bool:
    """A SQLite store whose schema upgrade failed half-way (a full disk while ``mlflow.db`` was created)
    stops every later upgrade at a leftover temporary table (:mod:`ragexp._compat`): drop the leftover copies
    (:func:`ragexp._compat.drop_leftover_migration_tables`) so MLflow can finish the upgrade; True if it
    did. When it cannot, one line naming the exact fix."""
    db = sqlite_path(uri)
    if db is None or ALEMBIC_TMP not in str(exc):
        return False
    try:
        if drop_leftover_migration_tables(db):
            print(f"ragexp: repaired {db}: a schema upgrade that failed earlier (a full disk?) had left "
                  f"alembic's temporary tables behind", file=sys.stderr)
            return True
    except sqlite3.Error:
        pass
    table = str(exc).split(ALEMBIC_TMP, 1)[1].split()[0].strip("\"'`")
    raise TrackingError(f"tracking store {uri}: a schema upgrade that failed earlier left table {ALEMBIC_TMP}{table} "
                        f"and ragexp could not repair it; if the store holds no runs yet, move it aside "
                        f"(mv {db} {db}.broken) and run again, else: sqlite3 {db} 'DROP TABLE {ALEMBIC_TMP}{table}'")


def check_store(uri: str, experiment: str) -> tuple[Any, str]:
    """Before any work: the store is usable (scheme, reachable, writable, MLflow opens it and reads or
    creates the experiment); returns ``(client, experiment_id)``. Also closes the runs of this host
    whose process is gone (:func:`fail_orphaned_runs`) and says so."""
    _check_shape(uri)

    def opened() -> tuple[Any, str, list[tuple[str, int]]]:
        client = open_client(uri)
        try:
            with creation_lock(uri):
                exp_id = get_or_create_experiment(client, experiment, uri)
        except Exception as exc:  # noqa: BLE001
            raise TrackingError(f"tracking store {uri}: cannot read or create experiment '{experiment}': "
                                f"{first_line(exc)}") from None
        return client, exp_id, fail_orphaned_runs(client)

    with bounded_http():
        _check_reachable(uri)
        # a database that hangs mid-check: one line when the deadline passes
        client, exp_id, closed = (within_deadline(opened, STORE_DEADLINE_S, f"tracking store {redact_url(uri)}")
                                  if _database_scheme(uri) else opened())
    if closed:
        pids = sorted({p for _, p in closed})
        print(f"ragexp: marked {len(closed)} run(s) FAILED that were left RUNNING by processes now gone "
              f"(pid {', '.join(map(str, pids))} on {socket.gethostname()}): {', '.join(r for r, _ in closed)}",
              file=sys.stderr)
    return client, exp_id


def _stat(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command (Linux; empty elsewhere): [0] the state, [19]
    the start time in clock ticks since boot, which tells a reused pid apart."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return []
    return stat[stat.rindex(")") + 2:].split()


def _alive(pid: int, start: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    fields = _stat(pid)
    if fields[:1] in (["Z"], ["X"]):  # killed, not yet reaped
        return False
    return start is None or len(fields) < 20 or fields[19] == start


def pid_space() -> str:
    """This process's boot id and PID namespace (``<boot id>/pid:[<inode>]``; empty where /proc lacks them): a
    pid names the same process only within one of these."""
    parts = []
    try:
        parts.append(Path("/proc/sys/kernel/random/boot_id").read_text().strip())
        parts.append(os.readlink("/proc/self/ns/pid"))
    except OSError:
        return ""
    return "/".join(parts)


def owner_tags() -> dict[str, str]:
    """Tags naming this process as the owner of a run (host, pid and the pid's start time, boot and PID namespace)."""
    tags = {HOST_TAG: socket.gethostname(), PID_TAG: str(os.getpid())}
    space = pid_space()
    if space:
        tags[PID_SPACE_TAG] = space
    fields = _stat(os.getpid())
    if len(fields) >= 20:
        tags[PID_START_TAG] = fields[19]
    return tags


def fail_orphaned_runs(client: Any) -> list[tuple[str, int]]:
    """Mark FAILED the RUNNING runs owned by a process of this host that no longer exists.

    Such runs are what ``kill -9`` (or a crash of the machine's Python) leaves behind; each gets
    the tag ``ragexp.failure_reason``. Returns ``(run_id, pid)`` of every run closed. Only runs whose owner
    was in this process's boot and PID namespace (:func:`pid_space`) are judged: a container sharing the host
    name, another machine of the same name, or a run that does not say, is left alone.
    """
    host = socket.gethostname()
    space = pid_space()
    try:
        exps = [e.experiment_id for e in retrying(client.search_experiments, max_results=1000)]
        if not exps:
            return []
        found = retrying(client.search_runs, exps, filter_string=(
            f"attributes.status = 'RUNNING' and tags.`{HOST_TAG}` = '{host}'"), max_results=5000)
    except Exception:  # noqa: BLE001 - a cleanup must never stop the run that attempts it
        return []
    closed = []
    for run in found:
        tags = run.data.tags
        try:
            pid = int(tags.get(PID_TAG, ""))
        except ValueError:
            continue
        if not space or tags.get(PID_SPACE_TAG) != space:  # its pid means another process here, or none
            continue
        if pid == os.getpid() or _alive(pid, tags.get(PID_START_TAG)):
            continue
        reason = (f"its process (pid {pid} on {host}) ended without closing the run (killed?); "
                  f"closed by pid {os.getpid()} at {time.strftime('%Y-%m-%d %H:%M:%S %Z')}")
        try:
            retrying(client.set_tag, run.info.run_id, FAILURE_TAG, reason)
            retrying(client.set_terminated, run.info.run_id, "FAILED")
        except Exception:  # noqa: BLE001
            continue
        closed.append((run.info.run_id, pid))
    return closed
