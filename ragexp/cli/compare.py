"""``python -m ragexp.compare baseline=<run> candidate=<run>``: is the candidate really different?

A paired comparison of two evaluation runs of the same questions, metric by metric:

1. **Find the runs** in the store the runner uses (``tracking.uri=``, else
   ``$MLFLOW_TRACKING_URI``, else ``./mlflow.db``) by run id or run name. A name that several
   runs carry is refused with the candidates and their ids; sweep parents and comparison runs
   are not candidates.
2. **Pair the samples** of their ``per_sample.json`` tables by sample id. Refused, with one
   line: runs evaluated on different questions (the ``questions_digest`` of their
   ``summary.json`` differ, or a shared id has another query), or fewer shared ids than
   ``min_match_fraction`` of the larger run (the line says how many). Ids in one run only are
   counted and left out.
3. **Per metric** present in both tables: the samples whose status is ``ok`` in both runs are
   compared (the others are counted by status), with :func:`ragexp.stats.paired.paired_compare`:
   both means, the difference candidate − baseline with its paired bootstrap CI, the p-value
   (sign-flip permutation; exact McNemar for 0/1 metrics), Holm-adjusted across the metrics
   compared, better/tie/worse counts and the minimum detectable difference at 80% power.
   ``higher_is_better`` comes from the metric registry (by the key's part before ``/``), so
   ``avg_latency`` going down is an improvement. A metric present in one run only is listed
   as such.
4. **Report**: a table (significant changes marked ▲ better / ▼ worse), the samples that
   regressed most, and — with ``log=true`` — a run in the candidate's experiment tagged
   ``ragexp.kind=comparison`` with ``ragexp.baseline_run_id`` / ``ragexp.candidate_run_id``,
   holding ``comparison.json`` (every number), ``regressions.json`` (an MLflow table) and
   ``comparison.png``.
5. **Gate** (:mod:`ragexp.core.gate`): exit status 1 with one line per failed condition.

:func:`compare_tables` is the pure part (two tables in, the comparison out); :func:`compare_runs`
adds the store; ``main`` the command line.
"""

from __future__ import annotations

import json
import math
import re
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Mapping

import hydra
from omegaconf import DictConfig, OmegaConf

from ragexp.common.paths import conf_dir
from ragexp.errors import ConfigError, DataError, RagexpError, TrackingError
from ragexp.metrics.base import direction
from ragexp.core.results import current_columns, metric_keys, status_column, trim

SUMMARY_FILE, TABLE_FILE = "summary.json", "per_sample.json"
KIND_TAG, BASELINE_TAG, CANDIDATE_TAG = "ragexp.kind", "ragexp.baseline_run_id", "ragexp.candidate_run_id"
_RUN_ID = re.compile(r"[0-9a-f]{32}")


@dataclass
class RunTable:
    """What a comparison reads of one run: its per-sample table and a few facts."""

    name: str
    columns: list[str]
    rows: list[list[Any]]
    run_id: str | None = None
    experiment_id: str | None = None
    questions_digest: str | None = None
    dataset: str | None = None
    #: the run's own aggregates (over every sample it scored), for the gate's floors
    metrics: dict[str, float] = field(default_factory=dict)




def _index(table: RunTable, role: str) -> dict[str, int]:
    if "id" not in table.columns:
        raise DataError(f"{role} run '{table.name}': {TABLE_FILE} has no 'id' column")
    col = table.columns.index("id")
    index: dict[str, int] = {}
    for i, row in enumerate(table.rows):
        sid = str(row[col])
        if sid in index:
            raise DataError(f"{role} run '{table.name}': {TABLE_FILE} row {i + 1}: sample id '{sid}' appears twice")
        index[sid] = i
    return index


def _column(table: RunTable, name: str, rows: list[int]) -> list[Any]:
    col = table.columns.index(name)
    return [table.rows[i][col] for i in rows]


def _columns(table: RunTable, rows: list[int]) -> dict[str, tuple]:
    """The table's columns (name → values), for these rows, in this order."""
    picked = [table.rows[i] for i in rows]
    if not picked:
        return {c: () for c in table.columns}
    return dict(zip(table.columns, zip(*picked)))


def _numbers(values: tuple) -> Any:
    """Metric values as floats; None (a sample that did not score) and anything not a number → NaN."""
    import numpy as np

    if set(map(type, values)) <= {float, int, bool, type(None)}:  # what JSON gives: NaN for None
        return np.asarray(values, dtype=np.float64)
    return np.array([float(v) if isinstance(v, (int, float)) else math.nan for v in values], dtype=np.float64)


def compare_tables(baseline: RunTable, candidate: RunTable, *, resamples: int = 10_000,
                   confidence: float = 0.95, seed: int = 0, min_match_fraction: float = 0.9,
                   regressions: int = 10) -> dict[str, Any]:
    """Pair two runs' per-sample tables by id and compare every shared metric (module docstring).

    Returns the comparison as plain data (``comparison.json``): ``samples`` (the pairing),
    ``metrics`` (one row per metric key, in the baseline's column order, then the candidate's
    extra keys), ``regressions`` (per metric, the samples that got most worse), ``not_compared``
    (dataset-level metrics) and ``method``.
    """
    shared, b_rows, c_rows, queries = _pair(baseline, candidate, min_match_fraction)
    rows, both = _metric_rows(baseline, candidate)
    values_b, values_c, ok = _usable_values(baseline, candidate, b_rows, c_rows, both, rows)
    _test(values_b, values_c, ok, both, rows, resamples=resamples, confidence=confidence, seed=seed)
    compared = _verdicts(rows, 1 - confidence)
    n = len(shared)
    return {
        "not_compared": _dataset_level(baseline, candidate),
        "baseline": {"run_id": baseline.run_id, "name": baseline.name, "samples": len(baseline.rows)},
        "candidate": {"run_id": candidate.run_id, "name": candidate.name, "samples": len(candidate.rows)},
        "samples": {"matched": n, "only_in_baseline": len(baseline.rows) - n,
                    "only_in_candidate": len(candidate.rows) - n,
                    "questions_digest": baseline.questions_digest or candidate.questions_digest},
        "method": {"diff": "candidate − baseline", "confidence": confidence, "resamples": resamples, "seed": seed,
                   "ci": "paired bootstrap, percentile", "p_value": "two-sided: sign-flip permutation of the mean "
                   "difference; exact McNemar (binomial on discordant pairs) for 0/1 metrics",
                   "adjustment": f"Holm across the {len(compared)} metrics compared",
                   "significant": f"Holm-adjusted p < {1 - confidence:g}", "mde": "80% power, two-sided"},
        "metrics": rows,
        "regressions": _regressions(values_b, values_c, ok, both, rows, shared, queries, regressions),
    }


def _pair(baseline: RunTable, candidate: RunTable, min_match_fraction: float
          ) -> tuple[list[str], list[int], list[int], list[Any]]:
    """The shared sample ids (baseline order), their rows in each table and their queries; refuses
    runs of other questions or with too few shared ids."""
    if baseline.questions_digest and candidate.questions_digest \
            and baseline.questions_digest != candidate.questions_digest:
        raise DataError(
            f"the runs were evaluated on different questions: baseline '{baseline.name}' "
            f"(dataset {baseline.dataset or '?'}, questions digest {baseline.questions_digest}) vs candidate "
            f"'{candidate.name}' (dataset {candidate.dataset or '?'}, questions digest {candidate.questions_digest})")
    b_index, c_index = _index(baseline, "baseline"), _index(candidate, "candidate")
    shared = [sid for sid in b_index if sid in c_index]
    needed = max(2, math.ceil(min_match_fraction * max(len(b_index), len(c_index))))
    if len(shared) < needed:
        raise DataError(
            f"only {len(shared)} sample ids are in both runs (baseline '{baseline.name}' has {len(b_index)}, "
            f"candidate '{candidate.name}' has {len(c_index)}); at least {needed} are needed "
            f"(min_match_fraction={min_match_fraction:g}): are they runs of the same dataset?")
    b_rows = [b_index[s] for s in shared]
    c_rows = [c_index[s] for s in shared]
    queries = _column(baseline, "query", b_rows) if "query" in baseline.columns else [None] * len(shared)
    if "query" in baseline.columns and "query" in candidate.columns:
        for sid, qb, qc in zip(shared, queries, _column(candidate, "query", c_rows)):
            if qb != qc and trim(qb) != trim(qc):  # a logged table holds the query trimmed, a result's whole
                raise DataError(f"sample id '{sid}' has another query in each run ({qb!r} vs {qc!r}): "
                                f"the runs were evaluated on different questions")
    return shared, b_rows, c_rows, queries


def _metric_rows(baseline: RunTable, candidate: RunTable) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """One row per metric key of either run (its direction; where it is missing), and the shared keys."""
    b_keys, c_keys = metric_keys(baseline.columns), metric_keys(candidate.columns)
    both = [k for k in b_keys if k in set(c_keys)]
    rows: dict[str, dict[str, Any]] = {}
    for key in b_keys + [k for k in c_keys if k not in set(b_keys)]:
        hib, known = direction(key)
        rows[key] = {"key": key, "higher_is_better": hib, "direction_known": known}
        if key not in both:
            only = "baseline" if key in b_keys else "candidate"
            rows[key].update(only_in=only, note=f"computed in the {only} run only")
    return rows, both


def _usable_values(baseline: RunTable, candidate: RunTable, b_rows: list[int], c_rows: list[int],
                   both: list[str], rows: dict[str, dict[str, Any]]) -> tuple[Any, Any, Any]:
    """``(n, metrics)`` arrays of both runs' values and of "ok in both"; the others counted per row."""
    import numpy as np

    n = len(b_rows)
    values_b = np.full((n, len(both)), np.nan)
    values_c = np.full((n, len(both)), np.nan)
    ok = np.zeros((n, len(both)), dtype=bool)
    cols_b, cols_c = _columns(baseline, b_rows), _columns(candidate, c_rows)
    for j, key in enumerate(both):
        values_b[:, j] = _numbers(cols_b[key])
        values_c[:, j] = _numbers(cols_c[key])
        sb = np.asarray(cols_b[status_column(key)], dtype=object)
        sc = np.asarray(cols_c[status_column(key)], dtype=object)
        ok_b = (sb == "ok") & np.isfinite(values_b[:, j])
        ok_c = (sc == "ok") & np.isfinite(values_c[:, j])
        ok[:, j] = ok_b & ok_c
        excluded: dict[str, int] = {}
        for role, statuses, good in (("baseline", sb, ok_b), ("candidate", sc, ok_c)):
            for i in np.flatnonzero(~good):
                label = f"{role} {statuses[i] if statuses[i] != 'ok' else 'no value'}"
                excluded[label] = excluded.get(label, 0) + 1
        rows[key].update(n=int(ok[:, j].sum()), excluded=int(n - ok[:, j].sum()), excluded_by=excluded)
    return values_b, values_c, ok


def _test(values_b: Any, values_c: Any, ok: Any, both: list[str], rows: dict[str, dict[str, Any]], *,
          resamples: int, confidence: float, seed: int) -> None:
    """The paired statistics of every shared metric, into its row. Metrics with the same usable
    samples share one set of resamples (one matrix product for all of them)."""
    import numpy as np

    from ragexp.stats.paired import paired_compare_columns

    groups: dict[bytes, list[int]] = {}
    for j in range(len(both)):
        groups.setdefault(np.packbits(ok[:, j]).tobytes(), []).append(j)
    for cols in groups.values():
        mask = ok[:, cols[0]]
        if not mask.any():
            for j in cols:
                rows[both[j]].update(note="no sample is ok in both runs")
            continue
        results = paired_compare_columns(values_b[mask][:, cols], values_c[mask][:, cols], resamples=resamples,
                                         confidence=confidence, seed=seed)
        for j, r in zip(cols, results):
            row = rows[both[j]]
            row.update({k: v for k, v in asdict(r).items() if k != "n"})
            row["mde"] = None if math.isnan(r.mde) else r.mde
            row["better"], row["worse"] = (r.wins, r.losses) if row["higher_is_better"] else (r.losses, r.wins)


def _verdicts(rows: dict[str, dict[str, Any]], alpha: float) -> list[str]:
    """Holm across the metrics compared, and each one's verdict (direction-aware); their keys."""
    from ragexp.stats.paired import holm

    compared = [k for k, r in rows.items() if "p_value" in r]
    for key, p in zip(compared, holm([rows[k]["p_value"] for k in compared])):
        row = rows[key]
        row["p_holm"] = p
        if p < alpha and row["diff"] != 0:
            row["verdict"] = "better" if (row["diff"] > 0) == row["higher_is_better"] else "worse"
        else:
            row["verdict"] = "no significant difference"
    return compared


def _regressions(values_b: Any, values_c: Any, ok: Any, both: list[str], rows: dict[str, dict[str, Any]],
                 shared: list[str], queries: list[Any], limit: int) -> dict[str, list[dict[str, Any]]]:
    """Per compared metric, up to ``limit`` samples that got most worse (direction-aware)."""
    import numpy as np

    out: dict[str, list[dict[str, Any]]] = {}
    for j, key in enumerate(both):
        if "p_value" not in rows[key]:
            continue
        sign = 1.0 if rows[key]["higher_is_better"] else -1.0
        change = np.where(ok[:, j], sign * (values_c[:, j] - values_b[:, j]), np.nan)
        worst = [i for i in np.argsort(np.nan_to_num(change, nan=np.inf), kind="stable")[:limit] if change[i] < 0]
        out[key] = [{"id": shared[i], "query": queries[i], "baseline": float(values_b[i, j]),
                     "candidate": float(values_c[i, j])} for i in worst]
    return out


_INTERVAL_SUFFIXES = ("/n", "/stderr", "/ci_low", "/ci_high")


def _dataset_level(baseline: RunTable, candidate: RunTable) -> dict[str, dict[str, float]]:
    """Dataset-level metrics both runs logged (one value per run, no per-sample values to pair)."""
    from ragexp.metrics.base import load_all

    registry = load_all()
    out = {}
    for key in baseline.metrics:
        info = registry.get(key.split("/", 1)[0])
        if info is not None and info.level == "dataset" and key in candidate.metrics \
                and not key.endswith(_INTERVAL_SUFFIXES):
            out[key] = {"baseline": baseline.metrics[key], "candidate": candidate.metrics[key]}
    return out


# ---------------------------------------------------------------------------------------------
# The store


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
        raise ConfigError(f"{role}={ref}: no finished run has this id or name in the store")
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
    # a run logged before the slash scheme (K.status) reads as today's columns
    return RunTable(name=name, columns=current_columns(table["columns"]), rows=table["data"], run_id=run.info.run_id,
                    experiment_id=run.info.experiment_id, questions_digest=summary.get("questions_digest"),
                    dataset=run.data.tags.get("ragexp.dataset"), metrics=dict(run.data.metrics))


def compare_runs(cfg: DictConfig) -> dict[str, Any]:
    """Find both runs, compare them, print the report, log the comparison run; return the comparison
    (with ``gate_failures``: the lines of the failed gate conditions, empty when it passes)."""
    from ragexp.core.gate import drop_failures, floor_failures, read_gate
    from ragexp.common.secrets import redact_url
    from ragexp.tracking.store import bounded_http, first_line, open_client, require_existing_store, resolve_uri

    for role in ("baseline", "candidate"):
        if OmegaConf.is_missing(cfg, role) or cfg.get(role) in (None, ""):
            raise ConfigError(f"say which run is the {role}: {role}=<run id | run name>")
    allowances, floors = read_gate(cfg.get("gate"))  # a malformed gate fails before any work
    tracking = OmegaConf.to_container(cfg.tracking, resolve=True) if cfg.get("tracking") else {}
    uri = resolve_uri(tracking.get("uri"))
    require_existing_store(uri)
    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # two small files: no bars
    stats = cfg.get("stats") or {}
    confidence = float(stats.get("confidence", 0.95))
    try:
        with bounded_http():
            client = open_client(uri)
            b_run = find_run(client, cfg.baseline, "baseline")
            c_run = find_run(client, cfg.candidate, "candidate")
            baseline, candidate = load_run(client, b_run, "baseline"), load_run(client, c_run, "candidate")
    except RagexpError:
        raise
    except Exception as exc:  # noqa: BLE001 - MLflow raises many kinds; the user needs one line
        raise TrackingError(f"tracking store {redact_url(uri)}: cannot read the runs: {first_line(exc)}") from None
    result = compare_tables(baseline, candidate, resamples=int(stats.get("resamples", 10_000)),
                            confidence=confidence, seed=int(stats.get("seed", 0)),
                            min_match_fraction=float(cfg.get("min_match_fraction", 0.9)),
                            regressions=int(cfg.get("regressions", 10)))
    result["tracking_uri"] = redact_url(uri)  # the store's address without credentials
    failures = drop_failures(result["metrics"], allowances, 1 - confidence)
    candidate_values = {k: v for k, v in candidate.metrics.items()}
    for key, row in result["metrics"].items():  # a metric the run did not log (no sample ok) is undefined
        if key in metric_keys(candidate.columns) and key not in candidate_values:
            candidate_values[key] = row.get("mean_candidate")
    failures += floor_failures(candidate_values, floors, " in the candidate")
    result["gate"] = {"max_drop": allowances, "min": floors, "failures": failures}
    print_comparison(result, focus=(stats.get("primary") or None))
    for line in failures:  # before logging: a store failure must not hide them
        print(line, file=sys.stderr)
    if cfg.get("log", True):
        try:
            with bounded_http():
                result["comparison_run_id"] = log_comparison(client, result, candidate)
        except Exception as exc:  # noqa: BLE001 - the comparison was printed; say what was not logged
            raise TrackingError(f"the comparison above could not be logged to {redact_url(uri)}: {first_line(exc)} "
                                f"(log=false skips logging)") from None
        print(f"Comparison logged as MLflow run {result['comparison_run_id']} in {redact_url(uri)}")
    return result


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
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "comparison.json"
            path.write_text(json.dumps(result, indent=2, ensure_ascii=False, default=str))
            retrying(client.log_artifact, run_id, str(path))
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


# ---------------------------------------------------------------------------------------------
# The terminal


def _f(value: Any, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:.{digits}f}"


def _p(value: float) -> str:
    return "—" if value is None else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def focus_metric(result: Mapping[str, Any], primary: str | None = None) -> str | None:
    """The metric whose regressed samples are printed: ``stats.primary`` when compared, else the
    most significant regression, else the metric with the most samples gone worse."""
    rows = result["metrics"]
    if primary and primary in result["regressions"]:
        return primary
    worse = [r for r in rows.values() if r.get("verdict") == "worse"]
    if worse:
        return min(worse, key=lambda r: (r["p_holm"], -abs(r["diff"])))["key"]
    compared = [r for r in rows.values() if "p_value" in r and result["regressions"].get(r["key"])]
    return max(compared, key=lambda r: r["worse"])["key"] if compared else None


def print_comparison(result: Mapping[str, Any], focus: str | None = None) -> None:
    """The comparison table, the notes under it, and the samples that regressed most."""
    from rich.console import Console
    from rich.table import Table

    method, s = result["method"], result["samples"]
    level = round(100 * method["confidence"], 2)
    b, c = result["baseline"], result["candidate"]
    table = Table(title=f"ragexp.compare · baseline {b['name']} → candidate {c['name']} · {s['matched']} paired samples",
                  title_justify="left", caption_justify="left",
                  caption=(f"diff = candidate − baseline with its {level:g}% paired bootstrap CI "
                           f"({method['resamples']:,} resamples, seed {method['seed']}); p: sign-flip permutation, "
                           f"† exact McNemar for 0/1 metrics, {method['adjustment']}; "
                           f"▲/▼ = significantly better/worse ({method['significant']}), direction-aware; "
                           f"better/tie/worse = samples; MDE = smallest difference these samples detect with "
                           f"80% power; over = samples ok in both runs"))
    table.add_column("metric", no_wrap=True)
    for name in ("baseline", "candidate", "diff", f"{level:g}% CI", "p (Holm)", "better/tie/worse", "MDE", "over"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    notes = []
    for key, r in result["metrics"].items():
        arrow = "" if r.get("higher_is_better", True) else " ↓"
        label = f"{key}{arrow}" + ("" if r.get("direction_known", True) else " ?")
        if "p_value" not in r:
            table.add_row(label, "", "", "", "", "", "", "", f"{r.get('n', 0)} / {s['matched']}",
                          f"[dim]{r.get('note', '')}[/dim]")
            continue
        style = {"better": "green", "worse": "red"}.get(r["verdict"], "")
        mark = {"better": "▲ better", "worse": "▼ worse"}.get(r["verdict"], "")
        diff = f"{r['diff']:+.4f}"
        p = _p(r["p_holm"]) + ("†" if r["test"] == "mcnemar" else " ")
        table.add_row(label, _f(r["mean_baseline"]), _f(r["mean_candidate"]),
                      f"[{style}]{diff}[/{style}]" if style else diff,
                      f"[{_f(r['ci_low'])}, {_f(r['ci_high'])}]", p,
                      f"{r['better']}/{r['ties']}/{r['worse']}", _f(r["mde"]), f"{r['n']} / {s['matched']}",
                      f"[{style}]{mark}[/{style}]" if style else "")
        if r["excluded_by"]:
            notes.append(f"{key}: left out " + ", ".join(f"{v} ({k})" for k, v in r["excluded_by"].items()))
    console = Console(file=sys.stdout, width=max(140, Console().width))
    console.print(table)
    lines = [f"samples: {s['matched']} in both runs, {s['only_in_baseline']} only in the baseline, "
             f"{s['only_in_candidate']} only in the candidate (left out)"]
    if any(not r.get("higher_is_better", True) for r in result["metrics"].values()):
        lines.append("↓ = lower is better")
    if any(not r.get("direction_known", True) for r in result["metrics"].values()):
        lines.append("? = not a registered metric: higher is taken as better")
    permuted = sum(1 for r in result["metrics"].values() if r.get("test") == "permutation")
    compared = sum(1 for r in result["metrics"].values() if "p_value" in r)
    floor = 2 / (method["resamples"] + 1)  # the smallest p-value a random-pattern permutation test gives
    if permuted and compared * floor >= 1 - method["confidence"]:
        lines.append(f"with {method['resamples']:,} resamples no permutation p-value is below {floor:.2g}, and "
                     f"Holm over {compared} metrics cannot bring it under {1 - method['confidence']:g}: "
                     f"raise stats.resamples (e.g. stats.resamples={round(20 * compared / (1 - method['confidence'])):,})")
    whole = result.get("not_compared") or {}
    if whole:
        lines.append("not compared (one value per run, nothing to pair): " + ", ".join(
            f"{k} {_f(v['baseline'])} → {_f(v['candidate'])}" for k, v in whole.items()))
    for line in lines + notes:
        console.print(f"[dim]{line}[/dim]", highlight=False, soft_wrap=True)
    key = focus_metric(result, focus)
    regs = result["regressions"].get(key) if key else None
    if regs:
        worst = Table(title=f"Samples that regressed most on {key}", title_justify="left")
        for name in ("id", "query", "baseline", "candidate"):
            worst.add_column(name, justify="right" if name in ("baseline", "candidate") else "left",
                             overflow="ellipsis", max_width=60 if name == "query" else None, no_wrap=name == "query")
        for r in regs:
            worst.add_row(str(r["id"]), str(r["query"] or ""), _f(r["baseline"]), _f(r["candidate"]))
        console.print(worst)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="compare")
def _app(cfg: DictConfig) -> None:
    try:
        result = compare_runs(cfg)
    except RagexpError as exc:
        print(f"ragexp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    if result["gate"]["failures"]:  # printed, one line each, by compare_runs
        _GATE_FAILED.append(True)
        sys.exit(1)


_GATE_FAILED: list[bool] = []


def main() -> None:
    from ragexp.core.gate import add_override_prefix
    from ragexp.common.secrets import ScrubbingStream

    # as python -m ragexp: nothing printed carries a secret (Hydra quotes a bad override back in full)
    sys.stdout, sys.stderr = ScrubbingStream(sys.stdout), ScrubbingStream(sys.stderr)
    sys.argv[1:] = add_override_prefix(sys.argv[1:])
    try:
        _app()
    except SystemExit as exc:
        if exc.code == 1 and not _GATE_FAILED:  # Hydra's own errors (a bad override): exit 1 means the gate
            raise SystemExit(2) from None
        raise


if __name__ == "__main__":
    main()
