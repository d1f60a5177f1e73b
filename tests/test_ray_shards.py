"""execution=ray: the chunks of one dataset scored by tasks on a two-node Ray cluster (a head and a
worker started here with ``ray start``, both on 127.0.0.1), merged into one run: the same per-sample
values, aggregates and intervals as one process, one per-sample table, one MLflow run."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="execution=ray needs the .[cluster] extra (ray)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import write_records  # noqa: E402

import ragexp  # noqa: E402
from cli import free_port  # noqa: E402
from ragexp.cli.ui import stop_process_group  # noqa: E402


def _start(args: list[str], log: Path, cwd: Path) -> subprocess.Popen:
    """``ray start ... --block`` from a bare environment (as on another machine), ready once it says so."""
    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(cwd)), "RAY_USAGE_STATS_ENABLED": "0",
           "PYTHONPATH": str(Path(__file__).resolve().parents[1]),  # the nodes run this checkout's ragexp
           "RAY_AUTH_MODE": "disabled", "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}
    with open(log, "w") as out:
        proc = subprocess.Popen([ray, "start", *args, "--node-ip-address=127.0.0.1", "--num-cpus=1",
                                 "--disable-usage-stats", "--block"], env=env, cwd=cwd, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while "Ray runtime started." not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc, term_wait=30, kill_wait=10)
            pytest.fail(log.read_text()[-3000:])
        time.sleep(0.2)
    return proc


@pytest.fixture
def two_nodes(tmp_path):
    port = free_port()
    head = _start(["--head", f"--port={port}", "--include-dashboard=false"], tmp_path / "head.log", tmp_path)
    try:
        worker = _start([f"--address=127.0.0.1:{port}"], tmp_path / "worker.log", tmp_path)
        try:
            yield f"127.0.0.1:{port}"
        finally:
            stop_process_group(worker, term_wait=30, kill_wait=10)
    finally:
        stop_process_group(head, term_wait=30, kill_wait=10)


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow
def test_a_ray_run_on_two_nodes_equals_one_process(tmp_path, monkeypatch, two_nodes):
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    monkeypatch.chdir(tmp_path)
    path = write_records(tmp_path / "records.jsonl", 1_000)
    common = dict(tracking={"plots": False}, stats={"resamples": 2000})
    sharded = ragexp.evaluate(path, log=f"sqlite:///{tmp_path}/mlflow.db",
                              execution={"mode": "ray", "address": two_nodes, "chunk_records": 125}, **common)
    alone = ragexp.evaluate(path, log=False, execution={"mode": "memory"}, **common)
    ex = sharded.summary["execution"]
    assert ex["mode"] == "ray" and ex["processes"] == 2 and ex["nodes"] == 2, ex  # both nodes scored chunks
    assert sharded.metrics.equals(alone.metrics)
    assert sharded.per_sample.equals(alone.per_sample)
    varying = ("seconds", "execution", "results_folder", "run_id", "tracking_uri")
    assert (json.dumps({k: v for k, v in sharded.summary.items() if k not in varying}, sort_keys=True, default=str)
            == json.dumps({k: v for k, v in alone.summary.items() if k not in varying}, sort_keys=True, default=str))
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.run_id for r in runs] == [sharded.run_id]  # one run, one per-sample table
    assert sorted(p.name for p in Path(sharded.summary["results_folder"]).glob("per_sample.*")) == [
        "per_sample.json", "per_sample.parquet"]
