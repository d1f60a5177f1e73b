"""The secrets a Ray sweep's jobs need reach them without Ray writing them to its logs (issue 33): a real 2-job
sweep on hydra/launcher=ray, then every file of Ray's temporary folder is searched."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from cli import run_cli

pytest.importorskip("ray", reason="the Ray launcher needs the .[cluster] extra (ray)")

EXTRA = "rayextra-SECRET-9137"  # a value hydra.launcher.ray.env_vars names
URL_PASSWORD = "raypw-SECRET-5521"  # a password in a URL ragexp forwards


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow
def test_a_local_ray_sweep_logs_no_secret(tmp_path, data_dir):
    temp = Path(tempfile.mkdtemp(prefix="rx", dir="/tmp"))  # Ray's sockets live under it: a short path
    env = {"RAY_USAGE_STATS_ENABLED": "0", "MY_EXTRA_VAR": EXTRA,
           "RAGEXP_PARENT_TRACKING_URI": f"http://u:{URL_PASSWORD}@127.0.0.1:9"}
    try:
        _sweep_and_check(tmp_path, data_dir, temp, env)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def _sweep_and_check(tmp_path, data_dir, temp, env):
    proc = run_cli("-m", "hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2",
                   f"+hydra.launcher.ray.init._temp_dir={temp}", "hydra.launcher.ray.env_vars=[MY_EXTRA_VAR]",
                   f"data_dir={data_dir}", "metric=exact_match", "dataset.system=strong,weak", "progress=false",
                   f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", cwd=tmp_path, env=env, timeout=600)
    assert "Started a local Ray instance" in proc.stderr
    files = [p for p in temp.rglob("*") if p.is_file() and not p.is_symlink()]
    assert any(p.name == "runtime_env_agent.log" or "raylet" in p.name for p in files)
    leaks = [str(p) for p in files for s in (EXTRA, URL_PASSWORD) if s.encode() in p.read_bytes()]
    assert leaks == []
