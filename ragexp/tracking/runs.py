"""The runs a comparison reads and the run it logs.

:func:`read_runs` finds runs in the store the runner uses (``tracking.uri=``, else
``$MLFLOW_TRACKING_URI``, else ``./mlflow.db``) by run id or run name — a name that several runs
carry is refused with the candidates and their ids; sweep parents and comparison runs are not
candidates — and reads their ``per_sample.json`` and ``summary.json``. :func:`log_comparison` logs
a comparison as a run in the candidate's experiment tagged ``ragexp.kind=comparison`` with
``ragexp.baseline_run_id`` / ``ragexp.candidate_run_id``, holding ``comparison.json`` (every
number), ``regressions.json`` (an MLflow table) and ``comparison.png``.
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any, Mapping

from ragexp.common.renamed import current_key, current_keys
from ragexp.core.pairing import TABLE_FILE, RunTable
from ragexp.results.columns import FULL_TABLE_FILE, current_columns, table_columns
from ragexp.errors import ConfigError, DataError, RagexpError, TrackingError, did_you_mean

SUMMARY_FILE = "summary.json"
KIND_TAG, BASELINE_TAG, CANDIDATE_TAG = "ragexp.kind", "ragexp.baseline_run_id", "ragexp.candidate_run_id"
_RUN_ID = re.compile(r"[0-9a-f]{32}")


def read_runs(uri: str, refs: Mapping[str, str], client: Any = None) -> tuple[Any, dict[str, RunTable]]:
    """The client of the (existing) store at ``uri`` and, per role, the table of the run ``refs`` names
    there; any failure of the store is one line naming it."""
    from ragexp.common.secrets import redact_url
    from ragexp.tracking.store import bounded_http, first_line, open_client, require_existing_store

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # two small files: no bars
    what = "runs" if len(refs) > 1 else f"{next(iter(refs))} run"
    try:
        with bounded_http():
            if client is None:
                require_existing_store(uri)
                client = open_client(uri)
            found = {role: find_run(client, ref, role) for role, ref in refs.items()}
            return client, {role: load_run(client, run, role) for role, run in found.items()}
    except RagexpError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLflow raises many kinds; the user needs one line
        raise TrackingError(f"tracking store {redact_url(uri)}: cannot read the {what}: {first_line(exc)}") from None


def _closest_names(client: Any, experiment_ids: list[str], ref: str) -> str:
    """``; did you mean 'dataset.system=weak'?`` when a run of the store is named close to ``ref`` (a typo in
    ``baseline='dataset.system=wek'``), else nothing."""
    names = {r.info.run_name for r in client.search_runs(experiment_ids, max_results=1000) if r.info.run_name}
    return did_you_mean(ref, sorted(names))


def find_run(client: Any, ref: str, role: str) -> Any:
    """The run a user named: a run id, else the one run carrying that name (FINISHED, not a sweep
    parent nor a comparison); none or several → one line saying so."""
    from mlflow.entities import ViewType

    ref = str(ref)
    if _RUN_ID.fullmatch(ref):
        try:
            return client.get_run(ref)
        except Exception:  # noqa: BLE001 - not an id after all: try it as a name
            pass
    experiments = client.search_experiments(view_type=ViewType.ACTIVE_ONLY)
    quote = "'" if "'" not in ref else '"'
    found = client.search_runs([e.experiment_id for e in experiments],
                               filter_string=f"attributes.run_name = {quote}{ref}{quote}", max_results=1000)
    found = [r for r in found if r.data.tags.get("ragexp.role") != "parent"
             and r.data.tags.get(KIND_TAG) != "comparison" and r.info.status == "FINISHED"]
    if not found:
        raise ConfigError(f"{role}={ref}: no finished run has this id or name in the store"
                          f"{_closest_names(client, [e.experiment_id for e in experiments], ref)}")
    if len(found) > 1:
        import datetime

        names = {e.experiment_id: e.name for e in experiments}
        listed = "; ".join(
            f"{r.info.run_id} (experiment {names.get(r.info.experiment_id, r.info.experiment_id)}, started "
            f"{datetime.datetime.fromtimestamp(r.info.start_time / 1000):%Y-%m-%d %H:%M:%S})" for r in found[:10])
        more = f" and {len(found) - 10} more" if len(found) > 10 else ""
        raise ConfigError(f"{role}={ref}: {len(found)} runs have this name: {listed}{more}; pass {role}=<run id>")
    return found[0]


def load_run(client: Any, run: Any, role: str) -> RunTable:
    """A run's per-sample table and summary, downloaded from its artifacts."""
    name = run.info.run_name or run.info.run_id
    with tempfile.TemporaryDirectory() as tmp:
        table = _full_table(client, run.info.run_id, tmp)  # every sample; per_sample.json may show the first N
        if table is None:
            try:
                path = client.download_artifacts(run.info.run_id, TABLE_FILE, tmp)
            except Exception:  # noqa: BLE001 - MLflow raises several kinds for a missing artifact
                raise DataError(f"{role} run '{name}' ({run.info.run_id}) has no {TABLE_FILE}: "
                                f"is it a ragexp evaluation run?") from None
            table = json.loads(Path(path).read_text(encoding="utf-8"))
        summary: dict[str, Any] = {}
        try:
            summary = json.loads(Path(client.download_artifacts(run.info.run_id, SUMMARY_FILE, tmp)).read_text())
        except Exception:  # noqa: BLE001 - an older run without summary.json: the id+query check remains
            pass
    if not isinstance(table, dict) or "columns" not in table or "data" not in table:
        raise DataError(f"{role} run '{name}': {TABLE_FILE} is not an MLflow table (columns, data)")
    # a run logged before the slash scheme (K.status) reads as today's columns, and its keyword verdict's
    # accuracy … f1 (the keys before the rename) as today's keyword_verdict_accuracy … (ragexp.common.renamed)
    return RunTable(name=name, columns=current_columns(table["columns"]), rows=table["data"], run_id=run.info.run_id,
                    experiment_id=run.info.experiment_id, questions_digest=summary.get("questions_digest"),
                    dataset=run.data.tags.get("ragexp.dataset"), metrics=current_keys(run.data.metrics),
                    headline=[current_key(k) for k in summary.get("headline") or []],
                    cluster_by=(summary.get("stats") or {}).get("cluster_by"))


def _full_table(client: Any, run_id: str, tmp: str) -> dict[str, Any] | None:
    """The run's ``per_sample.parquet`` as an MLflow table (cells trimmed as ``per_sample.json``'s are),
    or None for a run logged without it."""
    from ragexp.results.tables import read_parquet_columns

    try:
        path = client.download_artifacts(run_id, FULL_TABLE_FILE, tmp)
    except Exception:  # noqa: BLE001 - an older run: per_sample.json holds every sample
        return None
    columns = table_columns(read_parquet_columns(Path(path)))
    return {"columns": list(columns), "data": [list(row) for row in zip(*columns.values())]}


def log_comparison(client: Any, result: Mapping[str, Any], candidate: RunTable) -> str:
    """A run in the candidate's experiment with comparison.json, the regressions table and the plot."""
    import pandas as pd

    from ragexp.report.plots import plot_paired_differences
    from ragexp.tracking.store import retrying

    b, c = result["baseline"], result["candidate"]
    tags = {KIND_TAG: "comparison", BASELINE_TAG: b["run_id"], CANDIDATE_TAG: c["run_id"],
            "ragexp.baseline_run_name": b["name"], "ragexp.candidate_run_name": c["name"],
            "mlflow.note.content": f"Paired comparison: baseline {b['name']} ({b['run_id']}) vs candidate "
                                   f"{c['name']} ({c['run_id']})"}
    run = retrying(client.create_run, candidate.experiment_id, run_name=f"compare {b['name']} → {c['name']}",
                   tags=tags)
    run_id = run.info.run_id
    try:
        retrying(client.log_text, run_id, json.dumps(result, indent=2, ensure_ascii=False, default=str),
                 "comparison.json")
        with tempfile.TemporaryDirectory() as tmp:
            png = plot_paired_differences(result, Path(tmp) / "comparison.png")
            if png is not None:
                retrying(client.log_artifact, run_id, str(png))
        rows = [{"metric": key, "id": r["id"], "query": r["query"], "baseline": r["baseline"],
                 "candidate": r["candidate"], "change": r["candidate"] - r["baseline"]}
                for key, regs in result["regressions"].items() for r in regs]
        frame = pd.DataFrame(rows, columns=["metric", "id", "query", "baseline", "candidate", "change"])
        retrying(client.log_table, run_id, data=frame, artifact_file="regressions.json")
        import time

        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        metrics = [Metric(f"diff/{k}", float(r["diff"]), now, 0) for k, r in result["metrics"].items()
                   if r.get("diff") is not None and math.isfinite(r["diff"])]
        metrics += [Metric("gate/failures", float(len(result["gate"]["failures"])), now, 0)]
        retrying(client.log_batch, run_id, metrics=metrics)
        retrying(client.set_terminated, run_id, "FINISHED")
    except BaseException:
        client.set_terminated(run_id, "FAILED")
        raise
    return run_id
