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

:func:`rank` is the arithmetic (no I/O); :func:`log_leaderboard` reads each child's ``summary.json``
and ``per_sample.parquet`` from its job folder (from MLflow when the folder is elsewhere), logs
``leaderboard.json``, ``leaderboard.png`` (a forest plot) and ``heatmap.png`` (every child's mean
of the headline metrics) on the parent run, and prints the table; the pictures and the table are
drawn by :mod:`ragexp.report`.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from ragexp.stats.intervals import CONFIDENCE, RESAMPLES, SEED
from ragexp.metrics.base import direction, load_all

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
    """``stats.primary``, else the objective, else the first headline metric of the children's summaries
    (the suite's ``_headline_``, :mod:`ragexp.core.headline`), else the first metric of the first child's summary."""
    if primary:
        return str(primary)
    if objective:
        return str(objective)
    recorded = answers_recorded(summaries)
    for s in summaries:
        if s.get("headline"):  # over recorded answers, a metric of the answer cannot tell the jobs apart
            movable = [k for k in s["headline"] if not (recorded and reads_answer(k))]
            return str((movable or s["headline"])[0])
    for s in summaries:
        if s.get("metrics"):
            return next(iter(s["metrics"]))
    return None


def answers_recorded(summaries: list[Mapping[str, Any]]) -> bool:
    """Every child retrieved with its own pipeline, kept the dataset's recorded answers (``generator=precomputed``
    with a retriever) and those answers are the same in every job (one ``answers_digest``): only then can no
    answer metric differ between them. A sweep over ``dataset.system=strong,weak`` keeps two systems' recorded
    answers, which differ; a summary without the digest (an older run) is not taken to share its answers.

    >>> kept = {"provenance": {"contexts": "pipeline", "answers": "dataset"}}
    >>> answers_recorded([{**kept, "answers_digest": "a1"}, {**kept, "answers_digest": "a1"}])
    True
    >>> answers_recorded([{**kept, "answers_digest": "a1"}, {**kept, "answers_digest": "b2"}])
    False
    """
    said = [s.get("provenance") or {} for s in summaries]
    kept = bool(said) and all(p.get("contexts") == "pipeline" and p.get("answers") == "dataset" for p in said)
    digests = {s.get("answers_digest") for s in summaries}
    return kept and len(digests) == 1 and None not in digests


#: how a child's provenance names a memory layer that retrieves sessions (ids ``S<n>``): ``<retriever> over memory_layer=<kind>``
_SESSION_MEMORIES = ("memory_layer=sessions", "memory_layer=summaries")


def mixed_granularity(summaries: list[Mapping[str, Any]]) -> bool:
    """Some children's memory layer retrieved sessions (``S<n>`` ids) and others turns: LoCoMo's evidence recall
    reads the first at session level and an id metric matches no turn id with a session id (docs/memory-layers.md).

    >>> def job(kind): return {"provenance": {"stages": {"retriever": f"bm25 over memory_layer={kind}"}}}
    >>> mixed_granularity([job("turns"), job("summaries")]), mixed_granularity([job("sessions"), job("summaries")])
    (True, False)
    """
    said = [str(((s.get("provenance") or {}).get("stages") or {}).get("retriever", "")) for s in summaries]
    sessions = [name.endswith(_SESSION_MEMORIES) for name in said]
    return any(sessions) and not all(sessions)


def reads_answer(key: str) -> bool:
    """Whether the metric of ``key`` reads the record's answer (``answer_token_f1``: yes; ``context_recall``: no)."""
    info = load_all().get(key.split("/", 1)[0])
    try:
        return info is not None and "answer" in info.required_fields()
    except ValueError:
        return False


def other_headlines(metric: str, summaries: list[Mapping[str, Any]]) -> list[str]:
    """The children's headline metrics other than the board's ``metric``, in their order."""
    keys: list[str] = []
    for s in summaries:
        keys += [str(k) for k in s.get("headline") or () if k != metric and str(k) not in keys]
    return keys


def headline_columns(board: dict[str, Any], others: dict[str, dict[str, Any]]) -> None:
    """Each row of ``board`` gets ``also``: for every other headline metric, its mean and whether it
    differs from that metric's best (``others``: that metric's own board); ``board["mixed"]`` says in
    sentences where the ranking metric sees noise but another headline metric a real difference."""
    mixed = []
    for key, other in others.items():
        by_run = {r["run_id"]: r for r in other["rows"]}
        for row in board["rows"]:
            o = by_run.get(row["run_id"]) or {}
            row.setdefault("also", {})[key] = {
                "mean": o.get("mean"), "ci_low": o.get("ci_low"), "ci_high": o.get("ci_high"), "n": o.get("n"),
                "best": bool(o.get("best")), "differs": o.get("differs"), "p_holm": o.get("p_holm")}
            if row.get("differs") is False and o.get("differs"):
                mixed.append(f"{row.get('label') or row['run_name']} is within noise of the best on {board['metric']}, "
                             f"but differs from the best on {key} ({o['mean']:.4f} against {other['rows'][0]['mean']:.4f}, "
                             f"p {o['p_holm']:.3g}): look at both before choosing")
    board["headline"] = [board["metric"], *others]
    if mixed:
        board["mixed"] = mixed


def higher_is_better(key: str) -> bool:
    """From the metric registry (``ndcg/k10`` → ``ndcg``); ``latency/<stage>`` is lower-is-better."""
    return direction(key)[0]


def rank(entries: list[Entry], *, metric: str, higher: bool = True, resamples: int = RESAMPLES,
         confidence: float = CONFIDENCE, seed: int = SEED, corrected: bool = False) -> dict[str, Any]:
    """The leaderboard as a dict (the content of ``leaderboard.json``), rows best first."""
    import numpy as np

    from ragexp.stats.paired import holm, paired_compare_columns

    scored = [e for e in entries if e.interval and e.interval.get("mean") is not None]
    scored.sort(key=lambda e: e.interval["mean"], reverse=higher)
    best = scored[0] if scored else None
    rows: list[dict[str, Any]] = []
    tests: list[tuple[int, float]] = []
    paired: dict[tuple[str, ...], list[tuple[int, Entry]]] = {}  # the rows to test, by the ids they pair on
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
                paired.setdefault(tuple(ids), []).append((len(rows), e))
            else:
                row["note"] = f"only {len(ids)} sample ids with an ok value in both runs: not compared"
        rows.append(row)
    for ids, group in paired.items():  # the children paired on the same ids share one resampling
        b = np.array([[best.values[i]] * len(group) for i in ids])
        c = np.array([[e.values[i] for _, e in group] for i in ids])
        for (k, _), r in zip(group, paired_compare_columns(b, c, resamples=resamples, confidence=confidence,
                                                           seed=seed)):
            rows[k].update(diff_vs_best=r.diff, diff_ci_low=r.ci_low, diff_ci_high=r.ci_high, p_value=r.p_value,
                           test=r.test, wins=r.wins, ties=r.ties, losses=r.losses)
            tests.append((k, r.p_value))
    tests.sort()
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
    try:
        table = read_parquet_columns(read(child.info.run_id, FULL_TABLE_FILE),
                                     ["id", metric, status_column(metric), f"human/{metric}"])
    except Exception as exc:  # noqa: BLE001 - said in the row, the rest of the board still stands
        entry.problem = f"{FULL_TABLE_FILE} unreadable ({type(exc).__name__}): not compared"
        return entry
    ids, status = table.get("id"), table.get(status_column(metric))
    if metric in table and ids is not None:
        for k, value in enumerate(table[metric]):
            ok = status is None or status[k] == "ok"
            if ok and value is not None and not (isinstance(value, float) and math.isnan(value)):
                entry.values[str(ids[k])] = float(value)
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
    """Build the leaderboard of ``children``, log it on the parent run, print it; return it."""
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
        correct = bool(stats.get("correct_with_labels", False))
        present = [s for s in (summaries[c.info.run_id] for c in ordered) if s]
        boards = {}
        for key in [metric, *other_headlines(metric, present)]:
            entries = [_child_entry(c, key, summaries[c.info.run_id], read, correct) for c in ordered]
            boards[key] = rank(entries, metric=key, higher=higher_is_better(key),
                               resamples=int(stats.get("resamples", RESAMPLES)),
                               confidence=float(stats.get("confidence", CONFIDENCE)),
                               seed=int(stats.get("seed", SEED)), corrected=correct and any(e.human for e in entries))
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
        if mixed_granularity(present):
            board["granularity"] = ("Some jobs retrieved sessions (memory_layer=sessions or summaries, ids S<n>) and "
                                    "some turns: LoCoMo's evidence recall counts a retrieved session for every evidence "
                                    "turn in it, and the id metrics match no turn with a session id, so the two kinds "
                                    "of jobs are not comparable on them (docs/memory-layers.md).")
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


def describe_children(client: Any, board: Mapping[str, Any], retrying: Any) -> None:
    """Each child's MLflow description gains, first, its :func:`standing` in the sweep; each headline metric's
    mean with its interval is a tag (:func:`interval_tag`), the saved view's first columns."""
    for row in board["rows"]:
        if row.get("mean") is None:
            continue
        values = {board["metric"]: row, **(row.get("also") or {})}
        for key in board.get("headline") or [board["metric"]]:
            if (values.get(key) or {}).get("mean") is not None:
                retrying(client.set_tag, row["run_id"], interval_tag(key), with_interval(values[key]))
        note = client.get_run(row["run_id"]).data.tags.get("mlflow.note.content", "")
        line = "Sweep: " + standing(board, row)
        if not note.startswith("Sweep: "):
            retrying(client.set_tag, row["run_id"], "mlflow.note.content", f"{line}\n\n{note}".strip())


def share_view(client: Any, parent_run_id: str, board: Mapping[str, Any], retrying: Any) -> None:
    """The experiment's saved view of this sweep (MLflow's shared view state, opened by ``python -m ragexp.ui``):
    its children unfolded, sorted best first on the board's metric; as columns, each headline metric's mean with
    its interval (:func:`interval_tag`), then its value; its chart view led by :func:`headline_charts`."""
    experiment = client.get_run(parent_run_id).info.experiment_id
    keys = list(board.get("headline") or [board["metric"]])
    tags = [f"tags.`{interval_tag(k)}`" for k in keys]
    columns = [f"metrics.`{k}`" for k in keys]
    view = {"searchFilter": "", "orderByKey": f"metrics.`{board['metric']}`",
            "orderByAsc": not board.get("higher_is_better", True), "startTime": "ALL", "lifecycleFilter": "Active",
            "selectedColumns": ["attributes.`Run Name`", *tags, *columns], "runsExpanded": {parent_run_id: True},
            # MLflow applies the widths of the columns its saved order names (and that order): the intervals first
            "columnOrder": ["attributes.`Run Name`", *tags, *columns],
            "columnWidths": {**{c: max(230, 8 * len(interval_tag(k)) + 40) for c, k in zip(tags, keys)},
                             **{c: 10 * len(k) + 40 for c, k in zip(columns, keys)}},
            **headline_charts(keys)}
    retrying(client.set_experiment_tag, experiment, VIEW_TAG, json.dumps(view))


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
