"""Running ``python -m ragexp`` as a user does, in a fresh directory, and reading MLflow back."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# The running test's markers, set by tests/conftest.py before its fixtures: a process is started only
# for a test marked to start one (docs/testing.md), so the default run stays in-process.
MARKERS: frozenset[str] | None = None


def _require(marker: str, what: str) -> None:
    if MARKERS is not None and marker not in MARKERS:
        raise AssertionError(f"this test {what}: mark it @pytest.mark.{marker} (docs/testing.md)")


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600,
            check: bool = True) -> subprocess.CompletedProcess:
    _require("integration", "starts ragexp as a process")
    full_env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
                "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("MLFLOW_TRACKING_URI", None) if env is None or "MLFLOW_TRACKING_URI" not in env else None
    proc = subprocess.run([sys.executable, "-m", "ragexp", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"ragexp exited {proc.returncode}\nSTDOUT:\n{proc.stdout[-4000:]}\nSTDERR:\n{proc.stderr[-4000:]}")
    return proc


def runs(uri: str, experiment: str = "ragexp"):
    """All runs of the experiment, oldest first."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    found = client.search_runs([exp.experiment_id], max_results=1000, order_by=["attributes.start_time ASC"])
    return client, found


def parent_and_children(uri: str):
    client, found = runs(uri)
    parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in found if "mlflow.parentRunId" in r.data.tags]
    return client, parents, children


def free_port() -> int:
    """A port nothing listens on at this moment, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_mlflow_server(store: Path, port: int, env: dict[str, str] | None = None, backend_uri: str | None = None,
                        workers: int = 1) -> subprocess.Popen:
    """A real ``mlflow server`` on 127.0.0.1:port serving its artifacts from ``store``, its backend store a
    SQLite file there (or ``backend_uri``, e.g. PostgreSQL: tests/services.py), in a process group of its
    own (it runs uvicorn as a child); returns once ``/health`` answers."""
    import pytest

    _require("services", "starts an MLflow server")
    store.mkdir(parents=True, exist_ok=True)
    log_path = store / f"server-{port}.log"
    mlflow_bin = Path(sys.executable).with_name("mlflow")
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            [str(mlflow_bin), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
             "--backend-store-uri", backend_uri or f"sqlite:///{store / 'server.db'}", "--serve-artifacts",
             "--artifacts-destination", str(store / "artifacts")],
            stdout=log, stderr=subprocess.STDOUT, cwd=store, env=env, start_new_session=True)
    deadline = time.time() + 120
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
                if r.status == 200:
                    return proc
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            proc.kill()
            pytest.fail(f"mlflow server did not start: {log_path.read_text()[-3000:]}")
        time.sleep(0.5)
