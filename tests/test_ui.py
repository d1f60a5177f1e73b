"""``python -m ragexp.ui``: the command a run prints opens its store in MLflow's UI, offline.

A real run leaves a store and prints the command; the test runs exactly that command (on a free
port, with ``LITELLM_LOCAL_MODEL_COST_MAP`` removed from the environment: the command must set it
itself, since without it MLflow's server hangs at import on a machine without internet access),
asks MLflow's REST API until it answers with the run, then stops it with SIGTERM and checks that
nothing is left listening.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from cli import free_port, run_cli

MLFLOW_UI_START_S = 180  # MLflow's server imports its whole app: 10-20 s here, more on a loaded host


def _get(url: str) -> dict | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read())
    except OSError:
        return None


def _env_without_cost_map() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    return env


@pytest.mark.integration
@pytest.mark.services
def test_printed_command_opens_the_runs_store_offline(tmp_path, data_dir):
    launch = tmp_path / "launch"
    launch.mkdir()
    proc = run_cli("metric=hit_rate", f"data_dir={data_dir}", "progress=false", cwd=launch)
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("Open it with:")]
    command = line.split(":", 1)[1].strip()
    assert command.startswith("python -m ragexp.ui ")
    run_id = proc.stdout.split("MLflow run ", 1)[1].split()[0]

    port = free_port()
    elsewhere = tmp_path / "elsewhere"  # the printed command names its store: it works from any directory
    elsewhere.mkdir()
    args = [sys.executable, *shlex.split(command)[1:], f"port={port}"]
    ui = subprocess.Popen(args, cwd=elsewhere, env=_env_without_cost_map(), stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True)
    base = f"http://127.0.0.1:{port}"
    printed: list[str] = []
    try:
        deadline = time.monotonic() + MLFLOW_UI_START_S
        found = None
        while time.monotonic() < deadline and ui.poll() is None:
            found = _get(f"{base}/api/2.0/mlflow/experiments/search?max_results=100")
            if found is not None:
                break
            time.sleep(1)
        assert found is not None, f"no answer from {base} (exit {ui.poll()})"
        (exp,) = [e for e in found["experiments"] if e["name"] == "ragexp"]
        run = _get(f"{base}/api/2.0/mlflow/runs/get?run_id={run_id}")
        assert run is not None and run["run"]["info"]["experiment_id"] == exp["experiment_id"]
        # then it prints the experiment's runs page, with the address part that makes MLflow 3's UI open on runs
        for line in ui.stdout:  # the line comes right after the server answers; the process keeps running
            printed.append(line)
            if "runs table:" in line:
                break
    finally:
        ui.send_signal(signal.SIGTERM)
        out, _ = ui.communicate(timeout=60)
    out = "".join(printed) + out
    assert ui.returncode == 0, out[-3000:]
    assert f"MLflow UI: {base}" in out  # the address is printed
    page = f"{base}/#/experiments/{exp['experiment_id']}/runs?workflowType=machine_learning"
    assert f"The 'ragexp' runs table: {page}" in out
    assert _get(f"{base}/health") is None  # the server is stopped with it
    with socket.socket() as s:  # and nothing listens on the port any more (closed connections may linger)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
        s.listen()


@pytest.mark.integration
def test_no_store_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "ragexp.cli.ui"], cwd=tmp_path, env=_env_without_cost_map(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (f"ragexp: error: no MLflow store at {Path(tmp_path).resolve() / 'mlflow.db'}: "
                                   "run python -m ragexp there first, or pass tracking.uri=...")
