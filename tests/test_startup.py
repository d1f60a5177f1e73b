"""The run's MLflow work in a helper process (ragexp/tracking/background.py): what changed is *where*
MLflow runs, so these check that nothing else did — the store check still refuses, before any work,
what only MLflow can judge; the standard-library check vouches only for stores MLflow will open; and
a run logged by the helper is the run logged without it. (Speed: benchmarks/bench_startup.py.)"""

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
from ragexp.tracking.store import check_store, vouched

DEMO = ("progress=false",)


def test_the_cheap_check_vouches_only_for_stores_mlflow_will_open(tmp_path):
    db = tmp_path / "mlflow.db"
    uri = f"sqlite:///{db}"
    assert vouched(uri, "ragexp")  # no file yet: MLflow creates the schema
    client, _ = check_store(uri, "ragexp")  # a real MLflow store with the experiment
    assert vouched(uri, "ragexp") and vouched(uri, "another")
    other = client.create_experiment("gone")
    client.delete_experiment(other)
    assert not vouched(uri, "gone")  # a deleted experiment: MLflow's answer is needed
    con = sqlite3.connect(db)
    con.execute("UPDATE alembic_version SET version_num = 'ffffffffffff'")  # a schema this MLflow does not know
    con.commit()
    con.close()
    assert not vouched(uri, "ragexp")
    foreign = tmp_path / "other_app.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE notes (x)")
    con.close()
    assert not vouched(f"sqlite:///{foreign}", "ragexp")


class _NotMlflow(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = b'{"detail": "Not Found"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_cheap_check_does_not_vouch_for_a_server_that_is_not_mlflow():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _NotMlflow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        assert not vouched(f"http://127.0.0.1:{server.server_address[1]}", "ragexp")
    finally:
        server.shutdown()
        server.server_close()
    assert not vouched(f"http://127.0.0.1:{free_port()}", "ragexp")  # nothing listens


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


@pytest.mark.integration
def test_a_run_logged_by_the_helper_is_the_run_logged_without_it(tmp_path):
    if shutil.which("git"):  # the runs' commit tag is this repository's, not ragexp's checkout (which others commit to)
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        subprocess.run(["git", "-c", "user.name=ragexp tests", "-c", "user.email=tests@ragexp.invalid", "commit", "-q",
                        "--allow-empty", "-m", "the runs' commit"], cwd=tmp_path, check=True)
    (tmp_path / "helper").mkdir()
    (tmp_path / "in_process").mkdir()
    run_cli(*DEMO, "run_name=same", cwd=tmp_path / "helper")
    run_cli(*DEMO, "run_name=same", cwd=tmp_path / "in_process", env={"RAGEXP_NO_HELPER": "1"})
    helper, in_process = _logged(tmp_path / "helper"), _logged(tmp_path / "in_process")
    assert helper["inputs"] and helper["inputs"] == in_process["inputs"]
    assert helper["artifacts"] == in_process["artifacts"] and "per_sample.json" in helper["artifacts"]
    assert helper["table"] == in_process["table"]
    assert helper["tags"] == in_process["tags"]
    timing = {k for k in helper["metrics"] if k.startswith("latency/") or k in ("seconds",)}
    assert {k: v for k, v in helper["metrics"].items() if k not in timing} == \
        {k: v for k, v in in_process["metrics"].items() if k not in timing}
    assert helper["params"] == in_process["params"]


@pytest.mark.integration
def test_sigterm_while_the_helper_logs_stops_it_at_once_and_says_how_to_log_later(tmp_path, data_dir):
    """The store is locked from the moment the run computes (its checks are done: the judge holds its
    first request), so the helper's logging of the saved results waits on it; a SIGTERM to the run
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
            # past the run's own store checks (the write probe); the helper's check only reads: a write
            # lock now lets it finish and holds every write of the logging to come, whenever it starts
            lock.execute("BEGIN IMMEDIATE")
            release.set()
            deadline = time.monotonic() + 300
            while not set(tmp_path.rglob("mlflow_run.json")) - saved:  # the results are saved
                assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
                time.sleep(0.02)
            time.sleep(3)  # the run hands the folder to the helper, whose first write waits on the lock (a
            # signal that came before the hand-over would end the same way: results saved, nothing logged)
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
    # bounded: the helper sees the signal once MLflow's SQLite busy wait (20 s, in C) returns, else it is
    # killed after 20 s; it never sits out the 120 s a locked store is retried for
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


@pytest.mark.integration
def test_the_helper_ends_without_a_resource_warning_when_its_run_goes_away(tmp_path):
    """A run stopped before it hands anything over (Ctrl-C during the judge) closes the helper's stdin:
    the helper ends then, and nothing it leaves open may print after the run's last line."""
    import os
    import sys

    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONWARNINGS": "always::ResourceWarning"}
    proc = subprocess.run([sys.executable, "-m", "ragexp.tracking.background"], input="", capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "ResourceWarning" not in proc.stderr, proc.stderr[-3000:]
