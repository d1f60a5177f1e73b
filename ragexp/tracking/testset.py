"""A generated test set in MLflow: one run with the set as an MLflow dataset (context ``testset``), the
report's counts as metrics, and the test set, its report and its config as artifacts (docs/testset.md)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Mapping

from ragexp.tracking.settings import TrackingSettings
from ragexp.tracking.store import check_store, resolve_uri


def check_testset_store(tracking: TrackingSettings) -> tuple[Any, str, str]:
    """Before any work: the store is usable; ``(client, experiment id, uri)``."""
    uri = resolve_uri(tracking.uri)
    client, exp_id = check_store(uri, tracking.experiment)
    return client, exp_id, uri


def log_testset(tracking: TrackingSettings, out: Path, report_path: Path, config: Mapping[str, Any],
                report: Mapping[str, Any], records: list[dict[str, Any]]) -> str:
    """Log the run; its id."""
    import mlflow
    import pandas as pd

    from ragexp.common.secrets import scrub

    _, exp_id, uri = check_testset_store(tracking)
    mlflow.set_tracking_uri(uri)
    params = {"n": config.get("n"), "seed": config.get("seed"), "corpus": (config.get("corpus") or {}).get("path"),
              "judge": (config.get("judge") or {}).get("name"), "judge_model": (config.get("judge") or {}).get("model"),
              "chunker": (config.get("chunker") or {}).get("name"), "kinds": json.dumps(config.get("kinds"))}
    counts = {"testset/asked": report["asked"], "testset/generated": report["generated"], "testset/kept": report["kept"]}
    for group in ("filtered", "failed", "not_generated"):
        for reason, k in report[group].items():
            counts[f"testset/{group}/{reason}"] = k
    with mlflow.start_run(experiment_id=exp_id, run_name=f"testset {out.name}", tags={"ragexp.kind": "testset"}) as run:
        mlflow.log_params({k: scrub(str(v)) for k, v in params.items()})
        mlflow.log_metrics({k: float(v) for k, v in counts.items()})
        frame = pd.DataFrame([{k: (json.dumps(v, ensure_ascii=False) if isinstance(v, (list, dict)) else v)
                               for k, v in r.items()} for r in records])
        if not frame.empty:
            with warnings.catch_warnings():  # MLflow's hints (a path source "interpreted in multiple ways", integer
                warnings.simplefilter("ignore")  # columns in the schema): console noise, nothing the user can act on
                mlflow.log_input(mlflow.data.from_pandas(frame, source=str(out.resolve()), name=out.stem),
                                 context="testset")
        mlflow.log_artifact(str(out))
        mlflow.log_artifact(str(report_path))
        mlflow.log_text(scrub(json.dumps(config, indent=2, ensure_ascii=False, default=str)), "generate_config.json")
        return run.info.run_id
