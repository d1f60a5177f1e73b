"""The work behind ``python -m ragexp`` and ``ragexp.evaluate``, as named steps, one path for every run:
check (records, metrics and their fields, stats settings, judge credentials, the store — all before any
work) → pipeline → score into the run's one aggregator (:class:`ragexp.core.tally.Tally`) → aggregate →
uncertainty → trust → summary → save the results folder → print the table → log to MLflow → traces.

A run over a big file is checked and scored chunk by chunk (:mod:`ragexp.workflow.streaming`); every
other run holds its records in memory, one chunk. Both then take the same steps
(:mod:`ragexp.workflow.steps`). :func:`run` takes the composed config and returns the summary (a dict);
when the config names ``objective``, the summary carries that metric's value under ``"objective"`` so a
Hydra sweeper (Optuna) can optimise it. Only the workflow and :mod:`ragexp.tracking` touch disk and MLflow.
"""

from __future__ import annotations

import sys
import time
import warnings
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from ragexp.report.console import progress
from ragexp.datasets.base import Dataset
from ragexp.errors import ConfigError
from ragexp.core.scoring import MetricSpec, check_fields, score
from ragexp.core.breakdown import attach
from ragexp.core.tally import Tally, part_of
from ragexp.common.records import Record, cluster_labels
from ragexp.results.columns import per_sample_columns
from ragexp.common.paths import plain
from ragexp.stats.settings import stats_settings
from ragexp.workflow import streaming
from ragexp.workflow.steps import (CORPUS_KEYS, Computed, Outcome, Plan, Scored, aggregate_step, check_store_step,
                                   judge_failed_step, labels_step, load_dataset, log_step, metrics_step,
                                   print_step, save_step, summary_step, Survey, traces_step, trust_step,
                                   uncertainty_step)

__all__ = ["CORPUS_KEYS", "Outcome", "execute", "load_dataset", "run"]


def run(cfg: DictConfig, *, record: Any = None) -> dict[str, Any]:
    """Evaluate the configured dataset and metrics, log the run to MLflow, return the summary."""
    return execute(cfg, record=record).summary


def execute(cfg: DictConfig, *, dataset: Dataset | None = None, save: bool = True, show: bool = True,
            overrides: Sequence[str] | None = None, record: Any = None) -> Outcome:
    """The steps of :func:`run`. ``dataset`` is records already read (``ragexp.evaluate`` on a
    DataFrame), else ``cfg.dataset`` is loaded; ``save=False`` writes nothing (no results folder,
    no MLflow run: the tracking config is ignored); ``show=False`` prints no table (progress bars
    follow ``cfg.progress``); ``overrides``: those ``cfg`` was composed with outside a Hydra job
    (``ragexp.evaluate``), so its params are those ``python -m ragexp`` logs; ``record``: a
    :class:`ragexp.tracking.log.RunRecord` told where the results were saved and logged (for an interrupt's line)."""
    started = time.perf_counter()
    bars = bool(cfg.get("progress", True))
    tracking = OmegaConf.to_container(cfg.tracking, resolve=True) if cfg.get("tracking") else {}
    if not save:
        tracking = {**tracking, "enabled": False}
    # a big file: checked and scored chunk by chunk (None: the run holds its records in memory)
    done = streaming.score_streamed(cfg, tracking, dataset, save=save, show=show and bars)
    if done is None:
        done = in_memory(cfg, tracking, dataset, bars)
    plan, scored, intervals = done.plan, done.scored, done.intervals
    try:
        summary = summary_step(cfg, plan, scored, intervals, done.survey)
        cluster_by = plan.stats.get("cluster_by")  # a run with clusters is held in memory: its table has their column
        attach(scored.tally.breakdown, scored.tally.values, summary, scored.extra, intervals,
               clusters=done.per_sample.get(cluster_by) if cluster_by and isinstance(done.per_sample, dict) else None)
        if done.execution:
            summary["execution"] = done.execution
        summary["seconds"] = round(time.perf_counter() - started, 3)
        folder = None
        if save:
            folder = save_step(cfg, tracking, plan, scored, intervals, summary, done.per_sample,
                               done.survey.dataset_shape(), done.folder, overrides, record)
        elif done.folder is not None:  # a streamed run's table, in a folder of its own for the caller
            done.per_sample.finish(done.folder / "per_sample.parquet")
        if show:
            print_step(plan, done.survey.n, scored, intervals, summary, folder,
                       show_all=bool(OmegaConf.select(cfg, "report.all", default=False)))
        outcome = Outcome(summary, done.per_sample, intervals, done.records, folder)
        judge_failed_step(plan, scored, folder, outcome)
        if save:
            log_step(tracking, folder, summary, record)
            traces_step(cfg, tracking, plan, summary, done.per_sample, done.records, scored.tally.timings)
    finally:
        if done.cleanup is not None:
            done.cleanup()
    return outcome


def in_memory(cfg: DictConfig, tracking: dict[str, Any], dataset: Dataset | None, bars: bool) -> Computed:
    """A run holding its records: checked, through the pipeline, scored as one chunk, aggregated."""
    plan = check_step(cfg, tracking, dataset)  # every check, before any work
    records = pipeline_step(plan, bars)
    scored = score_step(plan, records, bars, processes=OmegaConf.select(cfg, "execution.processes"))
    st = plan.stats
    clusters = cluster_labels(records, st["cluster_by"], dataset=plan.dataset.name, source=plan.dataset.source)
    intervals = uncertainty_step(plan, scored.tally, clusters)
    trust_step(plan, scored, records, clusters)
    per_sample = per_sample_columns(records, scored.scores, st["cluster_by"])  # no pandas
    survey = Survey()
    survey(records)  # the records as one chunk: what a streamed run's check pass takes
    return Computed(plan, scored, intervals, survey, per_sample, records)


def check_step(cfg: DictConfig, tracking: dict[str, Any], dataset: Dataset | None = None) -> Plan:
    """Load the records (unless given) and check everything a run needs before doing any work: the
    metrics and their fields, the stats settings and cluster column, the judge's credentials, the store."""
    if dataset is None:
        dataset = load_dataset(cfg.dataset)
    records = dataset.records
    specs, all_that_apply = metrics_step(cfg)

    from ragexp.pipeline import build_pipeline  # light: stages import their libraries when run

    pipeline = build_pipeline(cfg, dataset)
    produced = set(pipeline.produces) if pipeline else set()
    for r in records:  # the pipeline's output replaces what the dataset brought
        for f in produced:
            setattr(r, f, None)
    specs, skipped = check_fields(specs, records, dataset.name, all_that_apply, provided=produced)
    if dataset.conversations and not any(s.key.startswith("locomo_") for s in specs):  # a memory's own scores
        print(f"[ragexp] dataset {dataset.name}: questions about conversations are scored LoCoMo's way by "
              "metric=locomo (locomo_qa, locomo_evidence_recall, recall@k/MRR/nDCG at the memory's granularity); "
              "this run's suite has none of them", file=sys.stderr)
    stats_cfg = stats_settings(plain(cfg.get("stats")))  # one check for the run and the compare
    cluster_labels(records, stats_cfg["cluster_by"], dataset=dataset.name, source=dataset.source)
    labels_step(specs, dataset, records)

    judge_specs = [s for s in specs if s.info.judge]
    judge = None
    if judge_specs:
        from ragexp.judge import build_judge

        judge = build_judge(cfg.get("judge"), judge_specs)  # checks credentials
        if judge.settings.examples:  # worked examples from the dev part only (docs/judge-trust.md)
            _judge_examples(cfg, judge, judge_specs, records)
    # the store last among the checks (a refused config leaves no mlflow.db behind): a store MLflow
    # cannot use fails here, in seconds
    check_store_step(tracking)
    return Plan(dataset, records, specs, skipped, pipeline, judge, judge_specs, stats_cfg)


def _judge_examples(cfg: DictConfig, judge: Any, specs: list[MetricSpec], records: list[Record]) -> None:
    """judge.examples=k: the dataset's dev part (same split seed and fraction, no limit) gives the examples."""
    from ragexp.judge.examples import attach

    node = OmegaConf.to_container(cfg.dataset, resolve=True)
    if "split" not in node:
        raise ConfigError(f"judge.examples needs labelled records split into dev and test; dataset "
                          f"'{node.get('name', '?')}' takes no dataset.split")
    node.update(split="dev", limit=None)
    attach(judge, specs, load_dataset(OmegaConf.create(node)).records, records)


def pipeline_step(plan: Plan, show: bool) -> list[Record]:
    """The records with the pipeline's outputs (contexts, answers, timings), or as the dataset brought them."""
    if plan.pipeline is None:
        return plan.records
    return plan.pipeline.run(plan.records, progress=progress(show, "pipeline", len(plan.records)))


def score_step(plan: Plan, records: list[Record], show: bool, processes: int | None = None) -> Scored:
    """Every metric on every record (the judge's too), into the run's one aggregator as one chunk, aggregated.
    ``processes``: ``execution.processes`` (None: the machine's rule, :func:`ragexp.core.scoring.score`)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        scores = score(records, plan.specs, progress=progress(show and len(records) >= 200, "metrics", len(records)),
                       processes=processes)
        usage: dict[str, float] = {}
        if plan.judge is not None:
            judge_scores, usage = plan.judge.score(records, plan.judge_specs, progress=show)
            scores.update(judge_scores)
        part = part_of(records, plan.specs, scores)
    part.notes = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    part.usage = usage
    tally = Tally(plan.specs)
    tally.add(part)
    scored = aggregate_step(plan, tally, getattr(plan.pipeline, "stats", None))
    scored.scores = scores
    return scored
