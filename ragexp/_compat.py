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

import sqlite3
from pathlib import Path

#: The prefix of alembic's batch-migration copies of a table (alembic.operations.batch).
ALEMBIC_TMP = "_alembic_tmp_"

#: Tables every MLflow SQL store holds (its schema, not a promised API; tested on MLflow 3.17): a SQLite
#: file holding tables but none of these belongs to another program (tracking.store refuses it).
MLFLOW_TABLES = ("alembic_version", "experiments", "runs")


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


def ray_loopback_options(address: str) -> dict[str, str]:
    """``ray.init`` options for a driver whose cluster is on this machine's loopback (``127.0.0.1:PORT``,
    ``localhost:PORT``, or ``local``: a private instance): ``_node_ip_address`` 127.0.0.1, Ray's documented
    but experimental ``ray.init`` keyword. Without it the driver takes the machine's outward address for
    its own and waits for ever for a raylet there (a cluster started with ``--node-ip-address=127.0.0.1``),
    or a private instance listens on that address. Tested on Ray 2.60 (``ray[default]<3`` in pyproject.toml)."""
    host = address.rsplit(":", 1)[0] if ":" in address else address
    return {"_node_ip_address": "127.0.0.1"} if host in ("local", "127.0.0.1", "localhost") else {}
