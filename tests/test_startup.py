"""The run's MLflow work in a helper process (ragexp/tracking/background.py): what changed is *where*
MLflow runs, so these check that nothing else did — the store check still refuses, before any work,
what only MLflow can judge; the standard-library check vouches only for stores MLflow will open; and
a run logged by the helper is the run logged without it. (Speed: benchmarks/bench_startup.py.)"""

from __future__ import annotations

import http.server
import json
import sqlite3
import threading
from pathlib import Path

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


def test_a_run_logged_by_the_helper_is_the_run_logged_without_it(tmp_path):
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
