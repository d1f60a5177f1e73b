"""A parallel sweep logged to a real ``mlflow server`` on 127.0.0.1 (started and stopped here)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cli import parent_and_children, run_cli


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def mlflow_server(tmp_path):
    port = _free_port()
    store = tmp_path / "server"
    store.mkdir()
    log = open(store / "server.log", "w")
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    proc = subprocess.Popen(
        [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
         "--backend-store-uri", f"sqlite:///{store / 'server.db'}", "--artifacts-destination", str(store / "artifacts")],
        stdout=log, stderr=subprocess.STDOUT, cwd=store,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"mlflow server did not start: {(store / 'server.log').read_text()[-3000:]}")
        time.sleep(0.5)
    yield url
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def test_joblib_sweep_against_a_real_mlflow_server(tmp_path, data_dir, mlflow_server):
    run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"data_dir={data_dir}",
            "dataset=memory_eval_true,memory_eval_false", "metric=memory", "metric.accuracy.threshold=0.3,0.6",
            f"tracking.uri={mlflow_server}", "progress=false", cwd=tmp_path)
    assert not (tmp_path / "mlflow.db").exists()
    client, parents, children = parent_and_children(mlflow_server)
    assert len(parents) == 1 and len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    for child in children:
        names = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"per_sample.json", "config.yaml", "summary.json", ".hydra"} <= names
        assert "keyword_overlap" in child.data.metrics
