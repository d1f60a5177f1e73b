"""A parallel sweep logged to a real ``mlflow server`` on 127.0.0.1 (started and stopped here)."""

from __future__ import annotations

import pytest

from cli import free_port, parent_and_children, run_cli, start_mlflow_server
from ragexp.cli.ui import stop_process_group


@pytest.fixture
def mlflow_server(tmp_path):
    port = free_port()
    proc = start_mlflow_server(tmp_path / "server", port)
    url = f"http://127.0.0.1:{port}"
    yield url
    stop_process_group(proc, term_wait=20)  # the server and the uvicorn workers it started


@pytest.mark.integration
@pytest.mark.services
def test_joblib_sweep_against_a_real_mlflow_server(tmp_path, data_dir, mlflow_server):
    run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"data_dir={data_dir}",
            "dataset=memory_eval_true,memory_eval_false", "metric=memory", "metric.keyword_verdict_accuracy.threshold=0.3,0.6",
            f"tracking.uri={mlflow_server}", "progress=false", cwd=tmp_path)
    assert not (tmp_path / "mlflow.db").exists()
    client, parents, children = parent_and_children(mlflow_server)
    assert len(parents) == 1 and len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    for child in children:
        names = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"per_sample.json", "config.yaml", "summary.json", ".hydra"} <= names
        assert "keyword_overlap" in child.data.metrics
