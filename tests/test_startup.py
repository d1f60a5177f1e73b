"""One code path: the run checks its store through MLflow before any work, logs in its own process, and
``python -m ragexp``, the ``ragexp`` script and ``ragexp.evaluate`` log the same run."""

from __future__ import annotations

import http.server
import json
import shutil
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest
from cli import free_port, run_cli, runs

DEMO = ("progress=false",)


@pytest.mark.integration
def test_a_store_only_mlflow_can_refuse_is_refused_before_any_work(tmp_path):
    first = run_cli(*DEMO, cwd=tmp_path)
    assert "logged to" in first.stdout
    con = sqlite3.connect(tmp_path / "mlflow.db")
    con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")
    con.commit()
    con.close()
    before = set(tmp_path.rglob("summary.json"))
    proc = run_cli(*DEMO, cwd=tmp_path, check=False)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"ragexp: error: tracking store sqlite:///{tmp_path / 'mlflow.db'}")
    assert "ffffffffffff" in lines[0]
    assert set(tmp_path.rglob("summary.json")) == before  # refused before the run computed anything


def _logged(folder: Path) -> dict:
    client, found = runs(f"sqlite:///{folder / 'mlflow.db'}")
    assert len(found) == 1 and found[0].info.status == "FINISHED"
    run = found[0]
    per_pid = {"ragexp.pid", "ragexp.pid_start", "ragexp.launch_id", "mlflow.runName"}
    artifacts = sorted(a.path for a in client.list_artifacts(run.info.run_id))
    table = json.loads(open(client.download_artifacts(run.info.run_id, "per_sample.json", str(folder))).read())
    return {
        "params": run.data.params,
        "metrics": run.data.metrics,
        "tags": {k: v for k, v in run.data.tags.items() if k not in per_pid},
        "artifacts": artifacts,
        "table": table,
        "inputs": [(d.dataset.name, d.dataset.digest, d.dataset.schema, d.dataset.profile, d.dataset.source)
                   for d in run.inputs.dataset_inputs],
    }


def _git_repository(folder: Path) -> None:
    """The runs' commit tag is this repository's, not ragexp's checkout (which others commit to)."""
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(folder)], check=True)
        subprocess.run(["git", "-c", "user.name=ragexp tests", "-c", "user.email=tests@ragexp.invalid", "commit", "-q",
                        "--allow-empty", "-m", "the runs' commit"], cwd=folder, check=True)


@pytest.mark.integration
def test_the_three_entry_points_log_the_same_run(tmp_path):
    """``python -m ragexp``, the ``ragexp`` console script and ``ragexp.evaluate(log=True)`` run one code
    path: the demo logged by each has the same params, metrics (timings aside), tags, artifacts (but
    Hydra's ``.hydra/``, there when Hydra runs the job), per-sample table and dataset input."""
    import os
    import sys

    _git_repository(tmp_path)
    for name in ("module", "script", "api"):
        (tmp_path / name).mkdir()
    run_cli(*DEMO, cwd=tmp_path / "module")
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    script = Path(sys.executable).with_name("ragexp")
    done = subprocess.run([str(script), *DEMO], cwd=tmp_path / "script", env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    code = "import ragexp; r = ragexp.evaluate('demo', log=True); print(r.run_id)"
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path / "api", env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    module, script_run, api = (_logged(tmp_path / n) for n in ("module", "script", "api"))
    assert module["params"] and module["params"]["dataset"] == "demo"
    assert module["inputs"] and "per_sample.json" in module["artifacts"]
    timing = {k for k in module["metrics"] if k.startswith("latency/") or k == "seconds"}
    assert ".hydra" in module["artifacts"] and ".hydra" in script_run["artifacts"]
    api["artifacts"] = sorted([*api["artifacts"], ".hydra"])  # Hydra's record of its job: the API composes, Hydra runs no job
    for other in (script_run, api):
        for part in ("params", "tags", "artifacts", "table", "inputs"):
            assert other[part] == module[part], part
        assert {k: v for k, v in other["metrics"].items() if k not in timing} == \
            {k: v for k, v in module["metrics"].items() if k not in timing}


@pytest.mark.integration
def test_sigterm_while_logging_stops_at_once_and_says_how_to_log_later(tmp_path, data_dir):
    """The store is locked from the moment the run computes (its checks are done: the judge holds its
    first request), so the logging of the saved results waits on it; a SIGTERM to the run
    stops it within a bound, leaves no run RUNNING, the one line names the saved folder and the
    upload command, and that command then logs it."""
    import os
    import signal
    import sys
    import time

    from judge_server import JudgeServer

    run_cli(*DEMO, cwd=tmp_path)  # the store and its experiment exist: the check needs no MLflow
    saved = set(tmp_path.rglob("mlflow_run.json"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    arrived, release = threading.Event(), threading.Event()

    def hold(request):  # the judge holds the run's first request until the store is locked
        arrived.set()
        release.wait(timeout=300)

    lock = sqlite3.connect(tmp_path / "mlflow.db", timeout=120, isolation_level=None)
    try:
        with JudgeServer(script=hold) as judge:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ragexp", *DEMO, f"data_dir={data_dir}", "dataset=memory_eval_true",
                 "metric=answer_similarity", "judge=openai_compatible", f"judge.api_base={judge.url}"],
                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            assert arrived.wait(timeout=300), "the run never reached the judge"
            # past the run's own store checks: a write lock now holds every write of the logging to come
            lock.execute("BEGIN IMMEDIATE")
            release.set()
            deadline = time.monotonic() + 300
            while not set(tmp_path.rglob("mlflow_run.json")) - saved:  # the results are saved
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
                time.sleep(0.02)
            time.sleep(3)  # the logging's first write waits on the lock (a signal before it would end the
            # same way: results saved, nothing logged)
            proc.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            _, err = proc.communicate(timeout=120)
            waited = time.monotonic() - sent
    finally:
        if lock.in_transaction:
            lock.execute("ROLLBACK")
        lock.close()
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 143 and "Traceback" not in err, err[-3000:]
    # bounded: the signal is handled once SQLite's busy wait (in C) returns; the run never sits out the
    # 120 s a locked store is retried for
    assert waited < 45, f"the run took {waited:.1f} s to stop after SIGTERM"
    folder = (set(tmp_path.rglob("mlflow_run.json")) - saved).pop().parent
    assert lines[-1].startswith("ragexp: terminated (SIGTERM)")
    assert f"saved in {folder}" in lines[-1] and "python -m ragexp.tracking.upload" in lines[-1]
    _, found = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [r.info.status for r in found] == ["FINISHED"]  # the first run; nothing left RUNNING
    upload = subprocess.run([sys.executable, "-m", "ragexp.tracking.upload", str(folder)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert upload.returncode == 0, upload.stderr[-2000:]
    _, found = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [r.info.status for r in found] == ["FINISHED", "FINISHED"]
