"""A sweep's leaderboard logged on its parent run: every child run's mean ± CI on one metric, and which differ
from the best (the arithmetic and its definitions: :mod:`ragexp.core.leaderboard`).

:func:`log_leaderboard` reads each child's ``summary.json``
and ``per_sample.parquet`` from its job folder (from MLflow when the folder is elsewhere), ranks them
(:func:`ragexp.core.leaderboard.rank`), logs
``leaderboard.json``, ``leaderboard.png`` (a forest plot) and ``heatmap.png`` (every child's mean
of the headline metrics) on the parent run, and prints the table; the pictures and the table are
drawn by :mod:`ragexp.report`.
"""

from __future__ import annotations

import json
import math
import tempfile
from pathlib import Path
from typing import Any, Mapping

from ragexp.core.leaderboard import (Entry, answers_recorded, choose_metric, headline_columns, higher_is_better,
                                     mixed_granularity, other_headlines, rank, clusters_note)

LEADERBOARD_FILE = "leaderboard.json"
PLOT_FILE = "leaderboard.png"
HEATMAP_FILE = "heatmap.png"


def _child_entry(child: Any, metric: str, summary: Mapping[str, Any] | None, read: Any,
                 corrected: bool = False) -> Entry:
    from ragexp.results.columns import FULL_TABLE_FILE, status_column
    from ragexp.results.tables import read_parquet_columns

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
    by = (summary.get("stats") or {}).get("cluster_by")
    try:
        table = read_parquet_columns(read(child.info.run_id, FULL_TABLE_FILE),
                                     ["id", metric, status_column(metric), f"human/{metric}", *([by] if by else [])])
    except Exception as exc:  # noqa: BLE001 - said in the row, the rest of the board still stands
        entry.problem = f"{FULL_TABLE_FILE} unreadable ({type(exc).__name__}): not compared"
        return entry
    ids, status = table.get("id"), table.get(status_column(metric))
    if metric in table and ids is not None:
        for k, value in enumerate(table[metric]):
            ok = status is None or status[k] == "ok"
            if ok and value is not None and not (isinstance(value, float) and math.isnan(value)):
                entry.values[str(ids[k])] = float(value)
        if by and table.get(by) is not None:  # the paired tests resample these clusters (core.leaderboard.rank)
            entry.cluster_by, entry.clusters = str(by), dict(zip(map(str, ids), table[by]))
        labels = table.get(f"human/{metric}")
        if fixed and labels is not None:
            entry.human = {str(i): float(h) for i, h in zip(ids, labels) if h is not None}
    return entry


def _summary(read: Any, run_id: str) -> dict[str, Any] | None:
    try:
        return json.loads(read(run_id, "summary.json").read_text())
    except Exception:  # noqa: BLE001 - a child that failed before logging has none
        return None


def job_folders(sweep_dir: str | Path | None) -> dict[str, Path]:
    """The sweep's job folders by the MLflow run each was logged as (its ``mlflow_run.json``)."""
    from ragexp.tracking.log import MANIFEST_FILE

    found = {}
    for f in Path(sweep_dir).glob(f"**/{MANIFEST_FILE}") if sweep_dir else ():
        try:
            found[json.loads(f.read_text())["logged"]["run_id"]] = f.parent
        except (OSError, ValueError, KeyError, TypeError):  # not logged (yet): MLflow has no run of it
            continue
    return found


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
    """Build the leaderboard of ``children``, log it on the parent run, print it; return it. ``stats``: the sweep's
    whole ``stats`` settings (resamples, confidence, seed, correct_with_labels), defaults filled by the caller."""
    from ragexp.report.console import print_leaderboard
    from ragexp.report.plots import forest_plot, sweep_heatmap
    from ragexp.common.secrets import redact
    from ragexp.tracking.store import retrying

    import os

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # no bar per child download
    folders = job_folders(sweep_dir)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)

        def read(run_id: str, name: str) -> Path:  # a child's file in its job folder, else from MLflow
            here = folders.get(run_id, tmp) / name
            return here if here.is_file() else Path(retrying(client.download_artifacts, run_id, name, str(tmp / run_id)))

        summaries = {c.info.run_id: _summary(read, c.info.run_id) for c in children}
        ordered = sorted(children, key=lambda c: c.info.start_time or 0)
        metric = choose_metric(primary, objective, [s for s in (summaries[c.info.run_id] for c in ordered) if s])
        if metric is None:
            print("[ragexp] no leaderboard: no child run logged a summary with metrics")
            return None
        correct = bool(stats["correct_with_labels"])
        present = [s for s in (summaries[c.info.run_id] for c in ordered) if s]
        boards = {}
        for key in [metric, *other_headlines(metric, present)]:
            entries = [_child_entry(c, key, summaries[c.info.run_id], read, correct) for c in ordered]
            boards[key] = rank(entries, metric=key, higher=higher_is_better(key),
                               resamples=int(stats["resamples"]), confidence=float(stats["confidence"]),
                               seed=int(stats["seed"]), corrected=correct and any(e.human for e in entries))
        board = boards.pop(metric)
        _add_labels(board["rows"])
        headline_columns(board, {k: b for k, b in boards.items() if any(r.get("mean") is not None for r in b["rows"])})
        if not primary and not objective:  # nobody named the metric: say which one was taken, and how to choose
            named = any(metric in (s.get("headline") or ()) for s in present)
            first = named and all(metric == (s.get("headline") or [None])[0] for s in present)
            board["chosen_by"] = (f"Ranked by {metric}, " + ("the suite's first headline metric" if first else
                                  "the suite's first headline metric this sweep can change" if named else
                                  "the suite's first metric") + "; to rank by another, add stats.primary=<metric key>.")
        if answers_recorded(present):
            board["recorded_answers"] = ("Every job kept the dataset's recorded answers (generator=precomputed): the "
                                         "answer metrics cannot differ between them; only the retrieval was swept.")
        if note := clusters_note(board, present, int(stats["resamples"])):  # the tests are over clusters: how many
            board["clusters"] = note
        if mixed_granularity(present):
            board["granularity"] = ("Some jobs retrieved sessions (memory_layer=sessions or summaries, ids S<n>) and "
                                    "some turns: LoCoMo's evidence recall counts a retrieved session for every evidence "
                                    "turn in it, and under metric=locomo recall@k, MRR and nDCG rank the evidence's "
                                    "sessions for those jobs (under other suites their ids match no turn), so a session "
                                    "job and a turn job are not comparable on them: compare each kind among its own "
                                    "(docs/memory-layers.md).")
        on_disk = unlogged_jobs(sweep_dir, children)
        if on_disk:
            board["not_ranked"] = (f"{len(on_disk) - len(children)} job(s) of this sweep saved results but have no "
                                   f"MLflow run; they are not on this board (results folders under {sweep_dir})")
        board = redact(board)  # run names are overrides, which may carry a key
        retrying(client.log_dict, parent_run_id, board, LEADERBOARD_FILE)
        (pictures := tmp / "pictures").mkdir()
        if any(r.get("mean") is not None for r in board["rows"]):
            forest_plot(board, pictures / PLOT_FILE)
        sweep_heatmap(board, summaries, metric, pictures / HEATMAP_FILE)
        retrying(client.log_artifacts, parent_run_id, str(pictures))
    try:  # what the UI opens on: each child's description and the experiment's saved view
        describe_children(client, board, retrying)
        share_view(client, parent_run_id, board, retrying)
    except Exception as exc:  # noqa: BLE001 - the board is logged and printed; say what the UI lacks
        print(f"[ragexp] warning: the children's descriptions or the saved view were not updated: "
              f"{type(exc).__name__}: {exc}")
    print_leaderboard(board)
    return board


#: the experiment's saved view of the last sweep (MLflow's shared view state: ``?viewStateShareKey=``)
VIEW_KEY = "ragexp-last-sweep"
VIEW_TAG = "mlflow.sharedViewState." + VIEW_KEY


def standing(board: Mapping[str, Any], row: Mapping[str, Any]) -> str:
    """One Markdown line: the child's headline metrics with their intervals, and where it stands against the
    sweep's best on each (``best``, or the difference and whether it is larger than the noise).

    >>> board = {"metric": "answer_token_f1", "rows": [{"label": "dataset.system=strong", "best": True}]}
    >>> standing(board, {"mean": 0.222, "ci_low": 0.150, "ci_high": 0.304, "diff_vs_best": -0.272,
    ...     "p_holm": 0.0002, "differs": True, "also": {"context_recall": {"mean": 0.522, "differs": True}}})
    '**answer_token_f1 0.222** [0.150, 0.304]: 0.272 below the best run (dataset.system=strong), larger than the noise (p 0.0002) · **context_recall 0.522**: differs from the best'
    """
    best = next((r for r in board["rows"] if r.get("best")), {})
    head = f"**{board['metric']} {row['mean']:.3f}**"
    if row.get("ci_low") is not None:
        head += f" [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    if row.get("best"):
        head += f": the best of {sum(r.get('mean') is not None for r in board['rows'])} runs"
    elif row.get("diff_vs_best") is not None:
        gap = abs(row["diff_vs_best"])
        head += (f": {gap:.3f} {'below' if row['diff_vs_best'] < 0 else 'above'} the best run "
                 f"({best.get('label') or best.get('run_name')}), "
                 + (f"larger than the noise (p {row['p_holm']:.2g})" if row.get("differs") else
                    f"within the noise (p {row['p_holm']:.2g})"))
    parts = [head]
    for key, o in (row.get("also") or {}).items():
        if o.get("mean") is not None:
            said = "the best" if o.get("best") else "differs from the best" if o.get("differs") else \
                "within the noise of the best"
            parts.append(f"**{key} {o['mean']:.3f}**: {said}")
    return " · ".join(parts)


def with_interval(value: Mapping[str, Any]) -> str:
    """A headline mean as the runs table shows it (the tag :func:`interval_tag`): four decimals, its interval, n.

    >>> with_interval({"mean": 0.49399806, "ci_low": 0.4123, "ci_high": 0.57311, "n": 50})
    '0.4940 [0.4123, 0.5731] n 50'
    """
    text = f"{value['mean']:.4f}"
    if value.get("ci_low") is not None and value.get("ci_high") is not None:
        text += f" [{value['ci_low']:.4f}, {value['ci_high']:.4f}]"
    return text + (f" n {int(value['n'])}" if value.get("n") is not None else "")


def interval_tag(key: str) -> str:
    """The run tag holding a headline metric's :func:`with_interval` (``answer_token_f1 with CI``): MLflow's runs
    table shows a metric's float unrounded and without its interval, so the sweep's saved view leads with these."""
    return f"{key} with CI"


#: The children's colours in MLflow's charts, best first (Okabe and Ito's palette, told apart with colour blindness)
RUN_COLORS = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000")
#: The run tag MLflow's UI keeps a run's colour in (what its colour picker sets)
COLOR_TAG = "mlflow.runColor"


def run_color(position: int) -> str:
    """The colour of the child at ``position`` on the board (0: the best): MLflow's own colours, picked from a run's
    id, can be two near-identical greys, and its charts tell runs apart by colour alone.

    >>> run_color(0), run_color(1), run_color(len(RUN_COLORS))
    ('#0072B2', '#E69F00', '#0072B2')
    """
    return RUN_COLORS[position % len(RUN_COLORS)]


def describe_children(client: Any, board: Mapping[str, Any], retrying: Any) -> None:
    """Each child's MLflow description gains, first, its :func:`standing` in the sweep; each headline metric's
    mean with its interval is a tag (:func:`interval_tag`), the saved view's first columns; each child without a
    colour of its own gets :func:`run_color` of its place on the board."""
    for position, row in enumerate(board["rows"]):
        if row.get("mean") is None:
            continue
        values = {board["metric"]: row, **(row.get("also") or {})}
        for key in board.get("headline") or [board["metric"]]:
            if (values.get(key) or {}).get("mean") is not None:
                retrying(client.set_tag, row["run_id"], interval_tag(key), with_interval(values[key]))
        tags = client.get_run(row["run_id"]).data.tags
        if COLOR_TAG not in tags:  # a colour the user picked stays
            retrying(client.set_tag, row["run_id"], COLOR_TAG, run_color(position))
        note = tags.get("mlflow.note.content", "")
        line = "Sweep: " + standing(board, row)
        if not note.startswith("Sweep: "):
            retrying(client.set_tag, row["run_id"], "mlflow.note.content", f"{line}\n\n{note}".strip())


def share_view(client: Any, parent_run_id: str, board: Mapping[str, Any], retrying: Any) -> None:
    """The experiment's saved view of this sweep (MLflow's shared view state, opened by ``python -m ragexp.ui``):
    this sweep's children only (:func:`sweep_filter`), sorted best first on the board's metric; as columns, each
    headline metric's mean with its interval (:func:`interval_tag`), then its value; its chart view led by
    :func:`headline_charts`."""
    experiment = client.get_run(parent_run_id).info.experiment_id
    keys = list(board.get("headline") or [board["metric"]])
    tags = [f"tags.`{interval_tag(k)}`" for k in keys]
    columns = [f"metrics.`{k}`" for k in keys]
    view = {"searchFilter": sweep_filter(parent_run_id), "orderByKey": f"metrics.`{board['metric']}`",
            "orderByAsc": not board.get("higher_is_better", True), "startTime": "ALL", "lifecycleFilter": "Active",
            "selectedColumns": ["attributes.`Run Name`", *tags, *columns], "runsExpanded": {parent_run_id: True},
            # MLflow applies the widths of the columns its saved order names (and that order): the intervals first
            "columnOrder": ["attributes.`Run Name`", *tags, *columns],
            "columnWidths": {**{c: max(230, 8 * len(interval_tag(k)) + 40) for c, k in zip(tags, keys)},
                             **{c: 10 * len(k) + 40 for c, k in zip(columns, keys)}},
            **headline_charts(keys)}
    retrying(client.set_experiment_tag, experiment, VIEW_TAG, json.dumps(view))


def sweep_filter(parent_run_id: str) -> str:
    """MLflow's search filter for a sweep's children (the saved view's): earlier runs in the experiment stay out.

    >>> sweep_filter("e662")
    "tags.`mlflow.parentRunId` = 'e662'"
    """
    return f"tags.`mlflow.parentRunId` = '{parent_run_id}'"


#: The chart view's first section: the sweep's headline metrics, each beside its interval's ends
HEADLINE_SECTION = "Headline metrics: mean, CI low, CI high"


def headline_charts(keys: list[str]) -> dict[str, Any]:
    """The saved view's chart state (MLflow's ``compareRunSections`` / ``compareRunCharts``): a first section
    holding a bar chart of each headline metric followed by its ``/ci_low`` and ``/ci_high``; MLflow adds every
    other metric's chart after it, in sections of their own (``isAccordionReordered``: the order given is kept).

    >>> state = headline_charts(["answer_token_f1"])
    >>> [c["metricKey"] for c in state["compareRunCharts"]], state["compareRunSections"][0]["name"][:16]
    (['answer_token_f1', 'answer_token_f1/ci_low', 'answer_token_f1/ci_high'], 'Headline metrics')
    """
    section = "ragexp-headline"
    charts = [{"uuid": f"ragexp-{n}", "type": "BAR", "runsCountToCompare": 10, "metricSectionId": section,
               "deleted": False, "isGenerated": False, "metricKey": key, "displayName": key}
              for n, key in enumerate(k + part for k in keys for part in ("", "/ci_low", "/ci_high"))]
    return {"compareRunSections": [{"uuid": section, "name": HEADLINE_SECTION, "display": True, "isReordered": True,
                                    "deleted": False, "isGenerated": False}],
            "compareRunCharts": charts, "isAccordionReordered": True}


def _add_labels(rows: list[dict[str, Any]]) -> None:
    """A short ``label`` per row: the run name's overrides that not every child shares
    (``dataset.system=weak,stats.primary=mrr`` → ``dataset.system=weak``)."""
    parts = [str(r["run_name"]).split(",") for r in rows]
    shared = set.intersection(*(set(p) for p in parts)) if len(parts) > 1 else set()
    for r, p in zip(rows, parts):
        r["label"] = ",".join(x for x in p if x not in shared) or str(r["run_name"])
