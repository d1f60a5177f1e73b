"""execution=ray: the chunks of one dataset scored by tasks on a two-node Ray cluster (a head and a
worker started here with ``ray start``, both on 127.0.0.1), merged into one run: the same per-sample
values, aggregates and intervals as one process, one per-sample table, one MLflow run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="execution=ray needs the .[cluster] extra (ray)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import write_records  # noqa: E402
from ray_cluster import two_nodes  # noqa: E402,F401

import ragexp  # noqa: E402


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow
def test_a_ray_run_on_two_nodes_equals_one_process(tmp_path, monkeypatch, two_nodes):
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
