"""A SQLite file given as the store that is not MLflow's, or that another process holds locked (issue 33): one
clear line at once and the file left as it was; a lock said within seconds, by a real process."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import time

import pytest
from cli import run_cli


@pytest.mark.integration
def test_a_foreign_sqlite_file_is_refused_and_left_unaltered(tmp_path):
    db = tmp_path / "shop.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE customers (id INTEGER, name TEXT)")
    con.execute("INSERT INTO customers VALUES (1, 'Ada')")
    con.commit()
    con.close()
    before = hashlib.sha256(db.read_bytes()).hexdigest()
    proc = run_cli("metric=exact_match", "progress=false", f"tracking.uri=sqlite:///{db}", cwd=tmp_path, check=False,
                   timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragexp: error:")]
    assert "another program" in line and "customers" in line
    assert hashlib.sha256(db.read_bytes()).hexdigest() == before  # not one MLflow table added
    assert not list(tmp_path.rglob("summary.json"))  # refused before any work


HOLD = ("import sqlite3, sys, time; c = sqlite3.connect(sys.argv[1], isolation_level=None); "
        "c.execute('BEGIN EXCLUSIVE'); print('held', flush=True); time.sleep(float(sys.argv[2])); c.execute('ROLLBACK')")


@pytest.mark.integration
def test_a_locked_store_is_said_within_seconds_and_the_run_goes_on_when_it_is_free(tmp_path):
    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE alembic_version (version_num TEXT)")  # a store MLflow would upgrade
    con.commit()
    con.close()
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(db), "8"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        proc = subprocess.Popen([sys.executable, "-m", "ragexp", "metric=exact_match", "progress=false",
                                 f"tracking.uri=sqlite:///{db}"], cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                                stdout=subprocess.DEVNULL, env={**__import__("os").environ,
                                                                "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        started = time.monotonic()
        line = proc.stderr.readline()
        said_after = time.monotonic() - started
        rest = proc.communicate(timeout=300)[1]
    finally:
        holder.wait(timeout=60)
    assert "is locked by another process" in line, line + rest
    assert said_after < 8  # said while the lock was still held, not after a silent minute
    assert proc.returncode == 0, rest[-2000:]
