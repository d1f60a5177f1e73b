"""Running ``python -m ragexp`` as a user does, in a fresh directory, and reading MLflow back."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_cli(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 600,
            check: bool = True) -> subprocess.CompletedProcess:
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
