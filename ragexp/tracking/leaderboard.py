"""A sweep's leaderboard: every child run's mean ± CI on one metric, and which differ from the best.

The metric is ``stats.primary``, else the sweep's ``objective``, else the first metric of the
suite (the first key of the children's ``summary.json`` metrics). Each child's mean and
interval are the ones the child computed (its ``summary.json`` ``intervals``). The best child
is the one with the highest mean (the lowest for a lower-is-better metric such as
``avg_latency``). Every other child is compared with the best one **paired over sample ids**
(the ids where both have an ``ok`` value) with :func:`ragexp.stats.paired.paired_compare`, and
the p-values are Holm-adjusted across the comparisons; a child ``differs`` from the best when
its adjusted p-value is below ``1 − stats.confidence``. With ``stats.correct_with_labels=true`` and
people's labels on the metric, each child's judge-corrected mean (PPI++) is ranked instead, and the
paired test is the corrected difference over the same items (docs/judge-trust.md).

:func:`rank` is the arithmetic (no I/O); :func:`log_leaderboard` reads the children from MLflow,
logs ``leaderboard.json``, ``leaderboard.png`` (a forest plot) and ``heatmap.png`` (every child's
mean of the headline metrics) on the parent run, and prints the table; the pictures and the table
are drawn by :mod:`ragexp.report`.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

LEADERBOARD_FILE = "leaderboard.json"
PLOT_FILE = "leaderboard.png"
HEATMAP_FILE = "heatmap.png"


@dataclass
class Entry:
    """One child run as the leaderboard sees it."""

    run_id: str
    name: str
    status: str
    interval: dict[str, Any] | None = None  # the child's summary.json interval of the metric
    values: dict[str, float] = field(default_factory=dict)  # sample id → ok value of the metric
    problem: str | None = None  # why the child has no value (failed run, metric absent)
    human: dict[str, float] = field(default_factory=dict)  # sample id → people's label of the metric


def choose_metric(primary: str | None, objective: str | None, summaries: list[Mapping[str, Any]]) -> str | None:
    """``stats.primary``, else the objective, else the first metric of the first child's summary."""
    if primary:
        return str(primary)
    if objective:
        return str(objective)
    for s in summaries:
        if s.get("metrics"):
            return next(iter(s["metrics"]))
    return None


def higher_is_better(key: str) -> bool:
    """From the metric registry (``ndcg/k10`` → ``ndcg``); ``latency/<stage>`` is lower-is-better."""
    from ragexp.metrics.base import direction

    return direction(key)[0]


def rank(entries: list[Entry], *, metric: str, higher: bool = True, resamples: int = 10_000,
         confidence: float = 0.95, seed: int = 0, corrected: bool = False) -> dict[str, Any]:
    """The leaderboard as a dict (the content of ``leaderboard.json``), rows best first."""
    from ragexp.stats.paired import holm, paired_compare

    scored = [e for e in entries if e.interval and e.interval.get("mean") is not None]
    scored.sort(key=lambda e: e.interval["mean"], reverse=higher)
    best = scored[0] if scored else None
    rows: list[dict[str, Any]] = []
    tests: list[tuple[int, float]] = []
    for e in scored:
        iv = e.interval
        row = {"run_id": e.run_id, "run_name": e.name, "status": e.status, "mean": iv.get("mean"),
               "stderr": iv.get("stderr"), "ci_low": iv.get("ci_low"), "ci_high": iv.get("ci_high"),
               "n": iv.get("n"), "method": iv.get("method"), "best": e is best}
        if e is not best:
            ids = [i for i in best.values if i in e.values]
            row["n_paired"] = len(ids)
            d = None
            if corrected:
                from ragexp.core.labels import corrected_difference

                nan = math.nan
                d = corrected_difference([best.human.get(i, nan) for i in ids], [best.values[i] for i in ids],
                                         [e.human.get(i, nan) for i in ids], [e.values[i] for i in ids],
                                         confidence=confidence)
            if d is not None:
                row.update(diff_vs_best=d["diff"], diff_ci_low=d["ci_low"], diff_ci_high=d["ci_high"],
                           p_value=d["p_value"], test="ppi++ (corrected difference)")
                tests.append((len(rows), d["p_value"]))
            elif len(ids) >= 2:
                r = paired_compare([best.values[i] for i in ids], [e.values[i] for i in ids],
                                   resamples=resamples, confidence=confidence, seed=seed)
                row.update(diff_vs_best=r.diff, diff_ci_low=r.ci_low, diff_ci_high=r.ci_high, p_value=r.p_value,
                           test=r.test, wins=r.wins, ties=r.ties, losses=r.losses)
                tests.append((len(rows), r.p_value))
            else:
                row["note"] = f"only {len(ids)} sample ids with an ok value in both runs: not compared"
        rows.append(row)
    for (i, _), adjusted in zip(tests, holm([p for _, p in tests]) if tests else []):
        rows[i]["p_holm"] = adjusted
        rows[i]["differs"] = bool(adjusted < 1 - confidence)
    for e in entries:
        if e not in scored:
            rows.append({"run_id": e.run_id, "run_name": e.name, "status": e.status, "mean": None,
                         "note": e.problem or f"no value of {metric}"})
    return {"metric": metric, "higher_is_better": higher, "confidence": confidence,
            "best": best.name if best else None, "comparison": "paired over sample ids, Holm-adjusted",
            **({"corrected_with_labels": True} if corrected else {}),
            "rows": rows}


def _child_entry(client: Any, child: Any, metric: str, tmp: Path, summary: Mapping[str, Any] | None,
                 corrected: bool = False) -> Entry:
    from ragexp.tracking.store import retrying

    entry = Entry(child.info.run_id, child.info.run_name or child.info.run_id[:8], child.info.status)
    if summary is None:
        entry.problem = "no summary.json (the job failed before logging)"
        return entry
    iv = (summary.get("intervals") or {}).get(metric)
    if iv is None:
        entry.problem = f"{metric} is not among this run's aggregates"
        return entry
    entry.interval = iv
    fixed = (((summary.get("agreement") or {}).get(metric) or {}).get("corrected") or {}) if corrected else {}
    if fixed.get("mean") is not None:  # stats.correct_with_labels: the judge-corrected mean is the child's
        entry.interval = {**fixed, "n": fixed.get("n_total"), "method": "ppi++"}
    try:
        path = retrying(client.download_artifacts, child.info.run_id, "per_sample.json", str(tmp / child.info.run_id))
        table = json.loads(Path(path).read_text())
    except Exception as exc:  # noqa: BLE001 - said in the row, the rest of the board still stands
        entry.problem = f"per_sample.json unreadable ({type(exc).__name__}): not compared"
        return entry
    from ragexp.core.results import current_columns, status_column

    cols = current_columns(table["columns"])  # a child logged before the slash scheme reads the same
    if metric in cols and "id" in cols:
        iid, iv_col = cols.index("id"), cols.index(metric)
        ist = cols.index(status_column(metric)) if status_column(metric) in cols else None
        for row in table["data"]:
            value = row[iv_col]
            ok = ist is None or row[ist] == "ok"
            if ok and value is not None and not (isinstance(value, float) and math.isnan(value)):
                entry.values[str(row[iid])] = float(value)
        labels = f"human/{metric}"
        if fixed and labels in cols:
            ih = cols.index(labels)
            entry.human = {str(row[iid]): float(row[ih]) for row in table["data"] if row[ih] is not None}
    return entry


def _summary(client: Any, run_id: str, tmp: Path) -> dict[str, Any] | None:
    from ragexp.tracking.store import retrying

    try:
        path = retrying(client.download_artifacts, run_id, "summary.json", str(tmp / f"{run_id}-summary"))
        return json.loads(Path(path).read_text())
    except Exception:  # noqa: BLE001 - a child that failed before logging has none
        return None


def unlogged_jobs(sweep_dir: str | Path | None, children: list[Any]) -> list[str]:
    """Job folders of the sweep holding results (``summary.json``) beyond the runs MLflow has:
    jobs whose logging failed (their results wait for ``python -m ragexp.tracking.upload``)."""
    if not sweep_dir or not Path(sweep_dir).is_dir():
        return []
    folders = sorted(str(f.parent) for f in Path(sweep_dir).glob("*/summary.json"))
    return folders if len(folders) > len(children) else []


def log_leaderboard(client: Any, parent_run_id: str, children: list[Any], *, primary: str | None,
                    objective: str | None, stats: Mapping[str, Any], sweep_dir: str | None = None
                    ) -> dict[str, Any] | None:
    """Build the leaderboard of ``children``, log it on the parent run, print it; return it."""
    from ragexp.report.console import print_leaderboard
    from ragexp.report.plots import forest_plot, sweep_heatmap
    from ragexp.common.secrets import redact
    from ragexp.tracking.store import retrying

    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bar per child download
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        (tmp / "dl").mkdir()
        summaries = {c.info.run_id: _summary(client, c.info.run_id, tmp / "dl") for c in children}
        ordered = sorted(children, key=lambda c: c.info.start_time or 0)
        metric = choose_metric(primary, objective, [s for s in (summaries[c.info.run_id] for c in ordered) if s])
        if metric is None:
            print("[ragexp] no leaderboard: no child run logged a summary with metrics")
            return None
        correct = bool(stats.get("correct_with_labels", False))
        entries = [_child_entry(client, c, metric, tmp / "dl", summaries[c.info.run_id], correct) for c in ordered]
        board = rank(entries, metric=metric, higher=higher_is_better(metric),
                     resamples=int(stats.get("resamples", 10_000)), confidence=float(stats.get("confidence", 0.95)),
                     seed=int(stats.get("seed", 0)), corrected=correct and any(e.human for e in entries))
        _add_labels(board["rows"])
        if not primary and not objective:  # nobody named the metric: say which one was taken, and how to choose
            board["chosen_by"] = (f"ranked by {metric}, the suite's first metric: rank by the one you care about "
                                  f"with stats.primary=<metric key> (or objective=<metric key>)")
        on_disk = unlogged_jobs(sweep_dir, children)
        if on_disk:
            board["not_ranked"] = (f"{len(on_disk) - len(children)} job(s) of this sweep saved results but have no "
                                   f"MLflow run; they are not on this board (results folders under {sweep_dir})")
        board = redact(board)  # run names are overrides, which may carry a key
        retrying(client.log_dict, parent_run_id, board, LEADERBOARD_FILE)
        if any(r.get("mean") is not None for r in board["rows"]):
            png = forest_plot(board, tmp / PLOT_FILE)
            retrying(client.log_artifact, parent_run_id, str(png))
        png = sweep_heatmap(board, summaries, metric, tmp / HEATMAP_FILE)
        if png is not None:
            retrying(client.log_artifact, parent_run_id, str(png))
    print_leaderboard(board)
    return board


def _add_labels(rows: list[dict[str, Any]]) -> None:
    """A short ``label`` per row: the run name's overrides that not every child shares
    (``dataset.system=weak,stats.primary=mrr`` → ``dataset.system=weak``)."""
    parts = [str(r["run_name"]).split(",") for r in rows]
    shared = set.intersection(*(set(p) for p in parts)) if len(parts) > 1 else set()
    for r, p in zip(rows, parts):
        r["label"] = ",".join(x for x in p if x not in shared) or str(r["run_name"])
