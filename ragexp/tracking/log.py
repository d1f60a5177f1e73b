"""Log one evaluation run to MLflow as SPEC §4 describes.

Params (flattened, redacted), aggregate metrics, status counts, judge usage and latencies;
artifacts ``per_sample.json`` (an MLflow table), ``config.yaml``, ``.hydra/`` and
``summary.json``; tags for the git commit, the dataset name and digest, and ragexp's version.
In a multirun the run is nested under the sweep's parent run.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any, Mapping

from .. import __version__
from .secrets import flatten, redact, scrub
from .store import get_or_create_experiment, resolve_uri, retrying

PARENT_ENV = "RAGEXP_PARENT_RUN_ID"
PARENT_FILE = "mlflow_parent_run.json"


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the repository the command runs in, else of the one ragexp itself runs from."""
    for where in (path or Path.cwd(), Path(__file__).resolve().parents[2]):
        try:
            out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def find_parent_run(sweep_dir: str | None) -> str | None:
    """The parent run id a multirun's callback left (environment first, then the sweep folder)."""
    if sweep_dir:
        f = Path(sweep_dir) / PARENT_FILE
        if f.exists():
            return json.loads(f.read_text())["run_id"]
    return os.environ.get(PARENT_ENV) or None


def _finite(value: float | None) -> bool:
    return value is not None and not (isinstance(value, float) and (math.isnan(value) or math.isinf(value)))


def _redacted_hydra_dir(src: Path, dst: Path) -> None:
    """Copy Hydra's ``.hydra`` folder with secrets redacted (overrides may carry keys)."""
    import yaml

    dst.mkdir(parents=True, exist_ok=True)
    for f in src.glob("*.yaml"):
        data = yaml.safe_load(f.read_text())
        (dst / f.name).write_text(yaml.safe_dump(redact(data), sort_keys=False, allow_unicode=True))
    for f in dst.glob("overrides.yaml"):
        lines = yaml.safe_load(f.read_text()) or []
        from .secrets import is_secret_key

        cleaned = []
        for line in lines:
            key, sep, _ = str(line).partition("=")
            cleaned.append(f"{key}=***" if sep and is_secret_key(key.split(".")[-1].lstrip("+~")) else scrub(str(line)))
        f.write_text(yaml.safe_dump(cleaned, allow_unicode=True))


def log_run(
    *,
    config: Mapping[str, Any],
    tracking: Mapping[str, Any],
    run_name: str | None,
    dataset_name: str,
    dataset_digest: str,
    dataset_frame: Any,
    per_sample: Any,
    metrics: Mapping[str, float | None],
    extra_metrics: Mapping[str, float],
    summary: Mapping[str, Any],
    hydra_dir: Path | None = None,
    sweep_dir: str | None = None,
) -> tuple[str, str]:
    """Create the run, log everything, and return ``(run_id, tracking_uri)``."""
    import mlflow
    from mlflow.entities import Metric, Param, RunTag
    from mlflow.tracking import MlflowClient

    uri = resolve_uri(tracking.get("uri"))
    client = MlflowClient(tracking_uri=uri)
    exp_id = get_or_create_experiment(client, tracking.get("experiment") or "ragexp", uri)
    parent = find_parent_run(sweep_dir)
    tags = {
        "ragexp.version": __version__,
        "ragexp.dataset": dataset_name,
        "ragexp.dataset_digest": dataset_digest,
        "mlflow.source.type": "LOCAL",
    }
    commit = git_commit()
    if commit:
        tags["mlflow.source.git.commit"] = commit
    if parent:
        tags["mlflow.parentRunId"] = parent
    for k, v in (tracking.get("tags") or {}).items():
        tags[str(k)] = scrub(str(v))
    run = retrying(client.create_run, exp_id, run_name=run_name, tags=tags)
    run_id = run.info.run_id
    try:
        params = [Param(k, v) for k, v in flatten(config).items()]
        for i in range(0, len(params), 100):
            retrying(client.log_batch, run_id, params=params[i:i + 100])
        import time

        now = int(time.time() * 1000)
        values = {k: v for k, v in {**metrics, **extra_metrics}.items() if _finite(v)}
        entries = [Metric(k, float(v), now, 0) for k, v in values.items()]
        for i in range(0, len(entries), 500):
            retrying(client.log_batch, run_id, metrics=entries[i:i + 500])
        retrying(client.log_table, run_id, data=per_sample, artifact_file="per_sample.json")
        with tempfile.TemporaryDirectory() as tmp:
            t = Path(tmp)
            import yaml

            (t / "config.yaml").write_text(yaml.safe_dump(redact(dict(config)), sort_keys=False, allow_unicode=True))
            (t / "summary.json").write_text(json.dumps(redact(dict(summary)), indent=2, ensure_ascii=False, default=str))
            retrying(client.log_artifact, run_id, str(t / "config.yaml"))
            retrying(client.log_artifact, run_id, str(t / "summary.json"))
            if hydra_dir is not None and hydra_dir.is_dir():
                _redacted_hydra_dir(hydra_dir, t / ".hydra")
                retrying(client.log_artifacts, run_id, str(t / ".hydra"), ".hydra")
        if dataset_frame is not None:
            _log_dataset(client, run_id, dataset_frame, dataset_name, dataset_digest, mlflow)
        retrying(client.set_terminated, run_id, "FINISHED")
    except BaseException:
        retrying(client.set_terminated, run_id, "FAILED")
        raise
    return run_id, uri


def _log_dataset(client: Any, run_id: str, frame: Any, name: str, digest: str, mlflow: Any) -> None:
    """Record the dataset as an MLflow dataset input, with its content digest."""
    from mlflow.entities import DatasetInput, InputTag

    ds = mlflow.data.from_pandas(frame, name=name, digest=digest)
    entity = ds._to_mlflow_entity()
    retrying(client.log_inputs, run_id, datasets=[DatasetInput(entity, tags=[InputTag("mlflow.data.context", "eval")])])
