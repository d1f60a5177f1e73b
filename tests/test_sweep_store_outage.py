"""A tracking server that goes away mid-sweep (issue 33, item 4), by real processes: a 3-job sweep whose
``mlflow server`` is stopped right after job 1 is logged. Every job still computes and saves its folder,
the unlogged ones are named with the exact upload command, the sweep exits 3; once the server is back,
that command logs them under the sweep's parent run and closes the parent FINISHED."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys

import pytest

from cli import free_port, parent_and_children, start_mlflow_server
from ragexp.cli.ui import stop_process_group


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow  # two server starts (a few seconds each on an idle machine)
def test_store_gone_after_job_1_saves_every_job_and_upload_closes_the_parent(tmp_path, data_dir):
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_mlflow_server(tmp_path / "server", port)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    sweep = subprocess.Popen(
        [sys.executable, "-m", "ragexp", "-m", f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=memory",
         "metric.keyword_verdict_accuracy.threshold=0.3,0.6,0.9", f"tracking.uri={url}", "tracking.traces=0",
         "tracking.plots=false", "progress=false", "hydra.sweep.dir=sweep"],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out = []
        for line in sweep.stdout:
            out.append(line)
            if "logged as MLflow run" in line:  # job 1 is in MLflow: the store goes away before job 2 logs
                os.kill(sweep.pid, signal.SIGSTOP)
                stop_process_group(server, term_wait=20)
                os.kill(sweep.pid, signal.SIGCONT)
                break
        rest, err = sweep.communicate(timeout=240)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        stop_process_group(server, term_wait=20)
    out = "".join(out) + rest
    assert sweep.returncode == 3, f"exit {sweep.returncode}\nSTDOUT:\n{out[-3000:]}\nSTDERR:\n{err[-3000:]}"
    assert "Traceback" not in out + err
    folders = sorted(p for p in (tmp_path / "sweep").iterdir() if p.is_dir())
    assert [p.name for p in folders] == ["0", "1", "2"]
    for f in folders:  # every job computed and saved its results
        assert (f / "summary.json").is_file() and (f / "per_sample.json").is_file()
    logged = {f.name: json.loads((f / "mlflow_run.json").read_text())["logged"] for f in folders}
    assert logged["0"] is not None and logged["1"] is None and logged["2"] is None
    assert out.count("  unlogged: ") == 2, out  # one line per unlogged job, with why
    command = err.strip().splitlines()[-1].strip()  # the sweep's last line: the exact upload command
    assert "job(s) of this sweep computed and saved their results but are not logged" in err and "1, 2" in err, err
    assert shlex.split(command)[:3] == ["python", "-m", "ragexp.tracking.upload"], err
    assert [os.path.basename(a) for a in shlex.split(command)[3:]] == ["1", "2"]

    server = start_mlflow_server(tmp_path / "server", port)  # the server is back, same store
    try:
        client, parents, children = parent_and_children(url)
        assert len(parents) == 1 and parents[0].info.status == "RUNNING"  # nobody could close it yet
        up = subprocess.run([sys.executable, *shlex.split(command)[1:]], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=120)
        assert up.returncode == 0, up.stdout + up.stderr
        client, parents, children = parent_and_children(url)
        parent = parents[0]
        assert len(parents) == 1 and parent.info.status == "FINISHED", (parent.info.status, parent.data.tags)
        assert "ragexp.failure_reason" not in parent.data.tags
        assert len(children) == 3 and all(c.info.status == "FINISHED" for c in children)
        assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parent.info.run_id}
        assert parent.data.metrics["sweep/children"] == 3.0
        assert f"sweep parent run {parent.info.run_id} closed FINISHED" in up.stdout
    finally:
        stop_process_group(server, term_wait=20)
