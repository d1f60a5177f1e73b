"""What ragexp relies on that another package does not promise, in one place, each with the versions it
was tested on (``pyproject.toml`` bounds them).

alembic's batch migrations (MLflow upgrades a SQLite store's schema with them) copy a table into
``_alembic_tmp_<table>``, drop the original and rename the copy into place. A failure in between — a
disk that fills while a fresh ``mlflow.db`` is created — leaves the copy behind beside the intact
original, and every later upgrade stops at ``table _alembic_tmp_<table> already exists``. Tested on
alembic 1.20 with MLflow 3.17 (the tables a full disk left: ``_alembic_tmp_params``,
``_alembic_tmp_experiments``).
"""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any, Callable

#: The prefix of alembic's batch-migration copies of a table (alembic.operations.batch).
ALEMBIC_TMP = "_alembic_tmp_"

#: Tables every MLflow SQL store holds (its schema, not a promised API; tested on MLflow 3.17).
MLFLOW_TABLES = ("alembic_version", "experiments", "runs")
#: A column each of MLflow's main tables has: another program's table may be called ``runs`` (a scheduler's),
#: and another SQLAlchemy program's database holds an ``alembic_version`` too.
MLFLOW_COLUMNS = {"runs": "run_uuid", "experiments": "experiment_id"}


def is_mlflow_store(con: sqlite3.Connection, tables: list[str]) -> bool:
    """Whether an SQLite file holding ``tables`` (read through ``con``) is an MLflow store, or empty: MLflow's
    ``runs``/``experiments`` with their columns, or nothing but alembic's version table (a store being created).
    A file that holds anything else is another program's (tracking.store refuses it, leaving it untouched).

    >>> con = sqlite3.connect(":memory:")
    >>> _ = con.execute("CREATE TABLE runs (id INTEGER, name TEXT)")
    >>> is_mlflow_store(con, ["runs"]), is_mlflow_store(con, []), is_mlflow_store(con, ["alembic_version"])
    (False, True, True)
    """
    for table, column in MLFLOW_COLUMNS.items():
        if table in tables and column in [row[1] for row in con.execute(f'PRAGMA table_info("{table}")')]:
            return True
    return all(t == "alembic_version" or t.startswith(ALEMBIC_TMP) for t in tables)


def foreign_store_line(db: Path, tables: list[str]) -> str:
    """The words refusing ``db``, an SQLite file of another program holding ``tables``."""
    shown = ", ".join(sorted(tables)[:6]) + (", ..." if len(tables) > 6 else "")
    return (f"{db} is an SQLite database of another program (its tables: {shown}), not an MLflow store; ragexp "
            "leaves it as it is")


def store_file_problem(db: Path, *, empty_ok: bool) -> str | None:
    """Why ragexp must not open the SQLite file ``db`` as an MLflow store (MLflow would write its 60+ tables into
    it), or None: another program's database (:func:`is_mlflow_store`), a file that is no SQLite database,
    and, unless ``empty_ok`` (the run's own store, created there), a file holding no store yet. Read only:
    the file is never altered. A store locked by a writer is not refused here.

    >>> import tempfile; f = Path(tempfile.mkdtemp()) / "empty.db"; _ = f.write_bytes(b"")
    >>> store_file_problem(f, empty_ok=True) is None, store_file_problem(f, empty_ok=False).endswith("no MLflow store")
    (True, True)
    """
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=3.0)
    except sqlite3.Error as exc:
        return f"{db} cannot be opened as an SQLite database ({exc})"
    try:
        tables = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        mlflows = is_mlflow_store(con, tables)
    except sqlite3.Error as exc:
        if "locked" in str(exc):
            return None
        return f"{db} is not an SQLite database ({exc}); ragexp leaves it as it is"
    finally:
        con.close()
    if not mlflows:
        return foreign_store_line(db, tables)
    if not empty_ok and not any(t in tables for t in MLFLOW_COLUMNS):
        return f"{db} is empty: no MLflow store"
    return None


def drop_leftover_migration_tables(db: Path) -> list[str]:
    """Drop the ``_alembic_tmp_<table>`` copies a failed migration left in the SQLite file ``db`` whose
    original ``<table>`` still exists (the copy never replaced it, so it holds nothing the store needs);
    the names dropped. A copy whose original is gone is left alone (it may hold the only rows)."""
    con = sqlite3.connect(str(db), timeout=60)
    try:
        names = {row[0] for row in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        dropped = sorted(n for n in names if n.startswith(ALEMBIC_TMP) and n[len(ALEMBIC_TMP):] in names)
        for name in dropped:
            con.execute(f'DROP TABLE "{name}"')
        con.commit()
        return dropped
    finally:
        con.close()


#: Ray's own switch between one machine and a cluster (``ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR``, which
#: ``ray start`` names in its messages). At "0" — Ray's default on macOS and Windows — a new instance takes
#: 127.0.0.1 for its node address, and its GCS, raylet, workers, object manager, dashboard and runtime-env
#: agents all listen there. Linux's default is "1": the node address is the machine's outward one, GCS,
#: raylet and workers listen on every interface, and ``ray.init(_node_ip_address="127.0.0.1")`` or
#: ``ray start --node-ip-address 127.0.0.1`` are rewritten to the outward address (``resolve_ip_for_localhost``),
#: so no ``ray.init`` option makes a local instance loopback-only. Ray reads the variable once, when first
#: imported. Tested on Ray 2.60: with it every listening socket of the Ray processes is on 127.0.0.1, without
#: it GCS, raylet and workers are on ``*`` and the agents on 0.0.0.0 or the outward address (tests/test_ray_secrets.py).
RAY_CLUSTER_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def import_ray(address: str) -> Any:
    """``import ray`` for a driver that calls ``ray.init(address=address)``: for ``local`` (a private instance
    on this machine) with :data:`RAY_CLUSTER_ENV` at "0" unless the user set it, so the instance listens on
    127.0.0.1 only. Ray already imported by this process keeps what it read then (:func:`ray_exposed`)."""
    if str(address) == "local" and "ray" not in sys.modules:
        os.environ.setdefault(RAY_CLUSTER_ENV, "0")
    import ray

    return ray


def ray_exposed(ray: Any, address: str) -> str | None:
    """After ``ray.init(address=address)``: a warning line when a private instance's node address is not the
    loopback one (Ray was imported before :func:`import_ray`, or the user set :data:`RAY_CLUSTER_ENV` to 1),
    so its ports are reachable from the network; None when it is loopback-only or a cluster was joined."""
    if str(address) != "local":
        return None
    ip = ray.util.get_node_ip_address()
    if ip in ("127.0.0.1", "::1", "localhost"):
        return None
    return (f"ragexp: warning: the local Ray instance listens on {ip} and every interface, not 127.0.0.1 only "
            f"(ray was imported before ragexp started it, or {RAY_CLUSTER_ENV}={os.environ.get(RAY_CLUSTER_ENV, '1')}): "
            f"set {RAY_CLUSTER_ENV}=0 before importing ray, or firewall its ports")


def ray_loopback_options(address: str) -> dict[str, str]:
    """``ray.init`` options for a driver whose cluster is on this machine's loopback (``127.0.0.1:PORT``,
    ``localhost:PORT``, or ``local``: a private instance): ``_node_ip_address`` 127.0.0.1, Ray's documented
    but experimental ``ray.init`` keyword. Without it the driver takes the machine's outward address for
    its own and waits for ever for a raylet there (a cluster started with ``--node-ip-address=127.0.0.1``),
    or a private instance listens on that address. Tested on Ray 2.60 (``ray[default]<3`` in pyproject.toml)."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return {"_node_ip_address": "127.0.0.1"} if host in ("local", "127.0.0.1", "localhost") else {}


def rewrite_span_events(span: Any, clean: Callable[[str], str]) -> bool:
    """Each text attribute of an MLflow ``LiveSpan``'s events (an exception's message and stack trace) replaced
    by ``clean(text)``, before the span ends: MLflow offers span processors (``mlflow.tracing.configure``) that
    may set attributes and the status, but no way to change an event once added. Reads MLflow's OpenTelemetry
    span (``LiveSpan._span``) and its events (``opentelemetry.sdk.trace.Span._events``, a ``BoundedList``
    whose ``_dq`` holds them). Tested on MLflow 3.17 with opentelemetry-sdk 1.45. False when those are not
    there (nothing changed)."""
    events = getattr(getattr(span, "_span", None), "_events", None)
    queue, lock = getattr(events, "_dq", None), getattr(events, "_lock", None)
    if queue is None or lock is None:
        return False
    if not queue:
        return True
    from opentelemetry.sdk.trace import Event

    with lock:
        for i, event in enumerate(list(queue)):
            attributes = dict(event.attributes or {})
            cleaned = {k: clean(v) if isinstance(v, str) else v for k, v in attributes.items()}
            if cleaned != attributes:
                queue[i] = Event(event.name, cleaned, event.timestamp)
    return True
