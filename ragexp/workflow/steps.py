"""The steps every run takes, in memory or streamed (:mod:`ragexp.workflow.runner` runs them; a streamed
run's check and score steps are :mod:`ragexp.workflow.streaming`'s): the run's objects (:class:`Plan`,
:class:`Scored`, :class:`Facts`, :class:`Outcome`), the checks both paths make (a metric configured, the
label keys, the store), the aggregation of the run's one :class:`ragexp.core.tally.Tally` into its numbers,
the trust step, the summary, the results folder, the printed table, the judge-failed check, the MLflow
run and its traces, and where a job's results go (Hydra's folders).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from omegaconf import DictConfig, OmegaConf

from ragexp.version import __version__
from ragexp.report.console import print_job_line, print_summary
from ragexp.datasets.base import Dataset, RecordSink
from ragexp.errors import ConfigError, JudgeFailed, TrackingError
from ragexp.core.scoring import MetricSpec, build_metrics
from ragexp.metrics.base import Score
from ragexp.common.records import FIELDS, Record
from ragexp.core.headline import declared, headline_keys
from ragexp.results.columns import ANSWER_FIELDS, OUTPUT_FIELDS, QUESTION_FIELDS, FieldsDigest, update_digests
from ragexp.common.paths import conf_dir, launch_dir, plain
from ragexp.common.targets import build, resolve
from ragexp.common.secrets import redact_url, scrub


def load_dataset(dataset_cfg: DictConfig) -> Dataset:
    if dataset_cfg is None or "_target_" not in dataset_cfg:
        raise ConfigError("no dataset: choose one with dataset=<name> (see conf/dataset/)")
    corpus_keys = {k: dataset_cfg.get(k) for k in CORPUS_KEYS if k in dataset_cfg and not _takes(dataset_cfg, k)}
    if corpus_keys:  # the user's own corpus, for any adapter: read by ragexp.datasets.corpus, not the adapter
        dataset_cfg = {k: v for k, v in OmegaConf.to_container(dataset_cfg, resolve=True).items() if k not in corpus_keys}
    ds = build(dataset_cfg, "dataset")
    if not isinstance(ds, Dataset):
        raise ConfigError(f"dataset loader {dataset_cfg['_target_']} returned {type(ds).__name__}, expected a Dataset")
    if corpus_keys.get("corpus") is not None:
        attach_corpus(ds, corpus_keys["corpus"], plain(corpus_keys.get("corpus_columns")), corpus_keys.get("corpus_format"))
    return ds


#: keys of any dataset config that name the user's own corpus (docs/testset.md, "Your corpus"); an adapter
#: whose loader takes one itself (``dataset=autorag``'s corpus parquet) reads it its own way
CORPUS_KEYS = ("corpus", "corpus_columns", "corpus_format")


def _takes(dataset_cfg: Any, key: str) -> bool:
    """True when the dataset's loader has a parameter ``key`` of its own."""
    import inspect

    try:
        return key in inspect.signature(resolve(dataset_cfg["_target_"], "dataset._target_")).parameters
    except (ConfigError, TypeError, ValueError):  # a target that cannot be found fails in build, with its own line
        return False


def attach_corpus(ds: Dataset, path: Any, columns: Any = None, format: str | None = None) -> None:
    """``ds.corpus`` from the user's corpus file or folder; one warning line when ground-truth ids are not in it."""
    from ragexp.datasets.corpus import read_corpus, unmatched_ids

    corpus = read_corpus(str(path), columns=columns, format=format, format_key="dataset.corpus_format")
    ds.corpus = corpus.docs
    missing, total, examples = unmatched_ids(ds.records, corpus.docs)
    ds.info.update(corpus=corpus.source, corpus_documents=len(corpus.docs), gt_ids_not_in_corpus=missing)
    if missing:
        print(f"ragexp: warning: {missing} of {total} gt_context_ids are not in the corpus {corpus.source} "
              f"(e.g. {', '.join(repr(e) for e in examples)}): no retrieved passage can match them, so the id-based "
              "context metrics count them as misses", file=sys.stderr)


@dataclass
class Plan:
    """What the checks settled before any work: the records, the metrics that apply, the stages."""

    dataset: Dataset
    records: list[Record]
    specs: list[MetricSpec]
    skipped: list[str]
    pipeline: Any
    judge: Any
    judge_specs: list[MetricSpec]
    stats: dict[str, Any]


@dataclass
class Scored:
    """Per-sample scores and what the run reduces them to."""

    scores: dict[str, list[Score]]
    values: dict[str, float | None]
    counts: dict[str, dict[str, int]]
    extra: dict[str, float]  # latencies, pipeline stats, judge usage, status counts
    usage: dict[str, float]
    notes: list[str]
    trust: dict[str, Any] | None = None  # agreement with human labels (ragexp.core.labels.judge_trust)
    tally: Any = None  # ragexp.core.tally.Tally: what the run's numbers were computed from


def _held(value: Any) -> bool:
    """:meth:`ragexp.common.records.Record.has` of a field's value: not None, and not an empty text, list or mapping."""
    return value is not None and not (isinstance(value, (str, list, dict)) and len(value) == 0)


class Survey(RecordSink):
    """What the summary, the MLflow dataset and the checks need of every record, taken chunk by chunk and keeping
    none: a streamed run's check pass, and a run in memory's records as one chunk."""

    def __init__(self, size: int = 0) -> None:
        self.size = size
        self.n = 0
        self.present: set[str] = set()
        self.questions, self.outputs = FieldsDigest(QUESTION_FIELDS), FieldsDigest(("id", *OUTPUT_FIELDS))
        self.answers = FieldsDigest(ANSWER_FIELDS)
        self.shape: dict[str, list] = {}  # field → [first truthy value, first non-None value, a record lacks it]
        self.labelled = False
        self.human: dict[str, int] = {}  # the keys of people's labels of metrics (record.human) → their first row
        self.stages: set[str] = set()  # pipeline stages a record timed
        self.depth = 0  # the most passages a record has

    def __call__(self, chunk: list) -> None:
        update_digests(chunk, self.questions, self.outputs, self.answers)  # one pass: id and answer encoded once
        # field by field over the chunk's column (list.count at C speed), not record by record
        columns = {f: [getattr(r, f) for r in chunk] for f in FIELDS}
        added: dict[str, tuple[int, list]] = {}  # a field no earlier record held → (its first record here, shape)
        for f, values in columns.items():
            absent, s = values.count(None), self.shape.get(f)
            if absent == len(values):
                if s is not None:
                    s[2] = True
                continue
            self.present.add(f)
            if s is not None and s[0] is not None and s[2]:
                continue  # its kinds, and that a record lacks it, are known
            start = 0 if s is not None else next((i for i, v in enumerate(values) if _held(v)), None)
            if start is None:
                continue
            rest = values[start:] if start else values
            if s is None:
                s = [None, rest[0], self.n + start > 0]
                added[f] = (start, s)
            if not s[2]:  # held by every record so far: does one here lack it (None, or empty)? Only a falsy
                # value can be None or empty, so all() (truth at C speed) spares the four counts of a field always held
                s[2] = not all(rest) and (bool(rest.count(None) if start else absent)
                                          or any(map(rest.count, ("", [], {}))))
            if s[0] is None:
                s[0] = next((v for v in rest if v), None)
        # in the order record by record would add them: by first record, then as FIELDS lists them
        for f, (_, s) in sorted(added.items(), key=lambda kv: kv[1][0]):
            self.shape[f] = s
        humans = columns["human"]
        for i, labels in enumerate(humans):
            for key in labels or ():
                self.human.setdefault(key, self.n + i + 1)
        self.n += len(chunk)
        self.labelled = self.labelled or columns["label"].count(None) < len(chunk) or any(humans)
        self.stages.update(s for t in columns["timings"] if t for s in t)
        self.depth = max(self.depth, max((len(ids or texts or ()) for ids, texts
                                          in zip(columns["context_ids"], columns["contexts"])), default=0))

    def fields(self) -> list[str]:
        return [f for f in FIELDS if f in self.present]

    def dataset_shape(self) -> dict[str, Any]:
        """What ``ragexp.tracking.log`` keeps of the MLflow dataset input (``RunResults.dataset_shape``)."""
        kinds = {}
        for f, (truthy, first, lacking) in self.shape.items():
            if f in QUESTION_FIELDS:
                v = truthy if truthy is not None else first
                kind = "" if isinstance(v, str) else [""] if v else []
                kinds[f] = [kind, None if lacking else kind]
        return {"rows": self.n, "kinds": kinds}


class Present:
    """A stand-in record for :func:`ragexp.core.scoring.check_fields`: the fields some record has."""

    def __init__(self, fields: list[str]) -> None:
        self._fields = set(fields)

    def present(self, f: str) -> bool:
        return f in self._fields


@dataclass
class Outcome:
    """What a run computed, for a caller in the same process (``ragexp.evaluate``): the summary, the
    full per-sample table and the intervals, without reading the results folder back."""

    summary: dict[str, Any]
    per_sample: Any  # plain columns (ragexp.results.columns.per_sample_columns, untrimmed), or a streamed run's
    # ragexp.results.tables.StreamedTable (its Parquet file: ragexp.evaluate loads it when asked)
    intervals: dict[str, Any]  # aggregate key → ragexp.stats.intervals.Interval
    records: list[Record]
    folder: Path | None
@dataclass
class Computed:
    """What a run's check and score steps give the steps after them (the summary, the results folder, the
    table, the MLflow run): one shape for a run in memory and a streamed one (:mod:`ragexp.workflow.streaming`)."""

    plan: Plan
    scored: Scored
    intervals: dict[str, Any]
    survey: Survey  # what the summary and the MLflow dataset say of the records
    per_sample: Any  # plain columns, or a streamed run's ragexp.results.tables.StreamedTable
    records: list[Record]  # a streamed run keeps none
    folder: Path | None = None  # where a streamed run writes its table as it goes
    execution: dict[str, Any] | None = None  # how a streamed run was carried out (summary.json's "execution")
    cleanup: Any = None  # called when the run is over (a streamed run's columns on disk)


def metrics_step(cfg: DictConfig) -> tuple[list[MetricSpec], bool]:
    """The configured metrics (and whether the suite asks for all that apply); none is a config error."""
    specs, all_that_apply = build_metrics(cfg.get("metric"), cfg.get("matcher"))
    if not specs:
        raise ConfigError("no metric configured: choose one with metric=<name> (see conf/metric/)")
    return specs, all_that_apply


def labels_step(specs: list[MetricSpec], dataset: Dataset, records: Sequence[Record] = (),
                rows: dict[str, int] | None = None) -> None:
    """A misspelled label key stops the run (exit 2, the closest metric named); a key for a metric this run
    does not compute is one warning line (docs/judge-trust.md, "Label hygiene"). ``rows``: each label key's
    first row, when the records are not kept (a streamed run)."""
    from ragexp.core.labels import check_label_keys

    if not rows and not any(r.human for r in records):
        return
    known = [p.stem for p in (Path(conf_dir()) / "metric").glob("*.yaml")]
    for line in check_label_keys(specs, records, source=dataset.source, known=known, rows=rows):
        print(f"ragexp: warning: {line}", file=sys.stderr)


def aggregate_step(plan: Plan, tally: Any, pipeline_stats: dict[str, float] | None = None) -> Scored:
    """The run's numbers from its :class:`ragexp.core.tally.Tally`: every metric's value and status counts, the
    stage latencies, the pipeline's and the judge's counters (``judge/failures/<status>`` last) and the count of
    every status other than ``ok`` (``status/<status>/<key>``)."""
    values, counts = tally.aggregate()
    extra = tally.stage_latencies()
    extra.update(pipeline_stats or {})
    usage = dict(sorted(tally.usage.items(), key=lambda kv: kv[0] if kv[0].startswith("judge/failures/") else ""))
    extra.update(usage)
    for key, c in counts.items():
        for status, n in c.items():
            if status != "ok":
                extra[f"status/{status}/{key}"] = float(n)
    return Scored({}, values, counts, extra, usage, list(tally.notes), tally=tally)


def uncertainty_step(plan: Plan, tally: Any, clusters: list[Any] | None = None) -> dict[str, Any]:
    """Standard error and confidence interval of every aggregate (clustered when ``stats.cluster_by`` is set)."""
    st = plan.stats
    return tally.intervals(resamples=st["resamples"], confidence=st["confidence"], seed=st["seed"],
                           method=st["method"], clusters=clusters)


def trust_step(plan: Plan, scored: Scored, records: Sequence[Record] | None = None,
               clusters: list[Any] | None = None) -> None:
    """Agreement of every labelled judge metric with people, the corrected means and the labels hint
    (docs/judge-trust.md), onto ``scored.trust`` and the run's metrics; nothing when no record is labelled.
    ``records``: a run in memory's (their scores are ``scored.scores``), else the tally's pairs are used."""
    from ragexp.core.labels import judge_trust, trust_metrics

    st = plan.stats
    opts = dict(resamples=st["resamples"], confidence=st["confidence"], seed=st["seed"],
                target_halfwidth=st.get("target_halfwidth"))
    if records is None:
        trust = scored.tally.trust(**opts)
    elif any(r.human for r in records) or any(r.label is not None for r in records):
        trust = judge_trust(plan.specs, scored.scores, records, clusters=clusters, **opts)
    else:
        return
    scored.trust = trust or None
    if scored.trust:
        scored.extra.update(trust_metrics(scored.trust))


def summary_step(cfg: DictConfig, plan: Plan, scored: Scored, intervals: dict[str, Any], survey: Survey
                 ) -> dict[str, Any]:
    """``summary.json``: the aggregates with their intervals and counts, what they were computed on (the
    records' :class:`Survey`) and where contexts, answers and latencies came from (:func:`provenance`)."""
    inputs = survey.questions.hexdigest()
    summary: dict[str, Any] = {
        "dataset": plan.dataset.name,
        "dataset_source": plan.dataset.source,
        "dataset_digest": inputs,  # the inputs: the run's MLflow dataset digest
        "questions_digest": inputs,  # the same value, the name compare reads
        "outputs_digest": survey.outputs.hexdigest(),  # what the system produced: contexts, their ids, answers
        # the answers alone: a sweep's jobs share their answers when it is equal
        "answers_digest": survey.answers.hexdigest(),
        "n_samples": survey.n,
        "fields": survey.fields(),
        "metrics": scored.values,
        # the keys every report leads with: stats.primary, then the suite's _headline_ (ragexp.core.headline)
        "headline": headline_keys(declared(cfg.get("metric")), list(scored.values), plan.stats.get("primary")),
        "intervals": {k: iv.as_dict() for k, iv in intervals.items()},
        "stats": plan.stats,
        "status_counts": scored.counts,
        "skipped_metrics": plan.skipped,
        "warnings": scored.notes,
        "latency": {k: v for k, v in scored.extra.items() if k.startswith("latency/")},
        "latency_batch": scored.extra.get("pipeline/batch_size"),  # >1: a query's latency is its share of a batch
        "judge": scored.usage,
        "ragexp_version": __version__,
        "seconds": None,
    }
    objective_key = cfg.get("objective")
    if objective_key:
        if objective_key not in scored.values:
            raise ConfigError(f"objective '{objective_key}' is not among this run's metrics: "
                              f"{', '.join(scored.values)}")
        v = scored.values[objective_key]
        summary["objective"] = float("nan") if v is None else v
    if plan.judge is not None and plan.judge.example_ids:  # judge.examples: which records the judge was shown
        summary["judge_examples"] = {"k": plan.judge.settings.examples, "ids": plan.judge.example_ids,
                                     "drawn_from": "dev"}
    summary["provenance"] = provenance(plan, survey)
    if scored.trust:
        summary["agreement"] = scored.trust["agreement"]
    return summary


def provenance(plan: Plan, survey: Survey) -> dict[str, Any]:
    """Where this run's contexts, answers and ``avg_latency`` came from: ``"pipeline"`` (this run's stages,
    named) or ``"dataset"`` (recorded by the system that produced the file), and the most passages a question
    got (the records' :class:`Survey`)."""
    produced = set(plan.pipeline.produces) if plan.pipeline is not None else set()
    stages, depth = sorted(survey.stages - {"total"}), survey.depth
    stage_names = {}
    for stage in ("retriever", "compressor", "generator"):
        name = getattr(getattr(plan.pipeline, stage, None), "name", None)
        if name:
            stage_names[stage] = str(name)
    return {"contexts": "pipeline" if "contexts" in produced else "dataset",
            # None: no answers at all (SQuAD's questions with a retriever alone)
            "answers": "pipeline" if "answer" in produced else "dataset" if "answer" in survey.present else None,
            "latency": "pipeline" if "latency_s" in produced else "dataset", "latency_stages": stages,
            "stages": stage_names, "max_passages": depth or None}
#: keys of a run's extra numbers that are settings it ran with, not measurements: in summary.json and MLflow, not
#: rows of the console's table
SETTINGS_NOT_SHOWN = ("pipeline/batch_size",)


def print_step(plan: Plan, n: int, scored: Scored, intervals: dict[str, Any],
               summary: dict[str, Any], folder: Path | None, show_all: bool = False) -> None:
    """The summary table, with what was skipped, the warnings and where the results are; in a sweep one
    line per job (``show_all``, ``report.all=true``: every row, and in a sweep each job's table)."""
    footer = [f"[dim]{m}[/dim]" for m in plan.skipped] + [f"[yellow]warning: {m}[/yellow]" for m in scored.notes]
    if folder is not None:
        footer.append(f"Results (summary.json, per_sample.parquet: every sample) in {folder}")
    shown = dict(scored.values)
    if scored.trust:  # agreement first under the table; the headline agreement and the corrected means as rows
        from ragexp.report.agreement import trust_lines, trust_rows

        footer = ["[bold]Agreement with people[/bold] (agreement.json)", *trust_lines(scored.trust), *footer]
        rows, extra_intervals = trust_rows(scored.trust)
        shown.update(rows)
        intervals = {**intervals, **extra_intervals}
    shown.update({k: v for k, v in scored.extra.items()  # what the run measured (a setting such as the batch size is
                  if k.startswith(("latency/", "judge/", "pipeline/")) and k not in SETTINGS_NOT_SHOWN})  # not a row)
    from ragexp.report.describe import provenance_lines

    said = provenance_lines(summary.get("provenance") or {}, "avg_latency" in scored.values)
    if _job_label() and not show_all:  # in a sweep: a line per job; the sweep's leaderboard is its one table
        print_job_line(f"ragexp{_job_label()} · {plan.dataset.name} · {n} samples", shown, intervals, summary.get("headline") or [], folder)
        if (summary.get("provenance") or {}).get("contexts") == "pipeline":  # what a pipeline sweep measured
            for line in said:
                print(f"  {line}")
        return
    print_summary(f"ragexp{_job_label()} · {plan.dataset.name} · {n} samples · {summary['seconds']} s",
                  shown, scored.counts, n, footer, intervals=intervals, stats=plan.stats,
                  headline=summary.get("headline") or [], depth=(summary.get("provenance") or {}).get("max_passages"),
                  show_all=show_all, notes_first=said)
    if summary.get("breakdown"):  # by category, by source: one compact table each, after the run's own
        from ragexp.report.groups import print_breakdown

        print_breakdown(intervals, summary["breakdown"]["by"], summary.get("headline") or [], plan.stats)
def save_step(cfg: DictConfig, tracking: dict[str, Any], plan: Plan, scored: Scored, intervals: dict[str, Any],
              summary: dict[str, Any], per_sample: Any, shape: dict[str, Any], folder: Path | None = None,
              overrides: Sequence[str] | None = None, record: Any = None) -> Path:
    """Write the results folder (summary, per-sample table, config, what to log) before any logging: an MLflow
    failure at the end loses nothing. ``shape``: the MLflow dataset's (:meth:`Survey.dataset_shape`);
    ``folder``: where a streamed run already writes its table."""
    from ragexp.tracking.log import RunResults, save_results

    hydra_dir, sweep_dir, job_name = _hydra_paths()
    folder = folder or results_folder()
    if record is not None:  # uploadable from its first file on: an interrupt's line names it from then
        record.saved = folder
    folder = save_results(folder, RunResults(
        config=OmegaConf.to_container(cfg, resolve=True), tracking=tracking,
        run_name=cfg.get("run_name") or job_name, dataset_name=plan.dataset.name,
        dataset_digest=summary["dataset_digest"], per_sample=per_sample, metrics=scored.values,
        extra_metrics={**scored.extra, **interval_metrics(intervals)}, summary=summary, hydra_dir=hydra_dir,
        sweep_dir=sweep_dir, overrides=overrides, agreement=scored.trust, dataset_shape=shape))
    summary["results_folder"] = str(folder)
    return folder


def judge_failed_step(plan: Plan, scored: Scored, folder: Path | None, outcome: Outcome | None = None) -> None:
    """A judge that answered nothing usable: not a run to log, and not exit 0 (its results are on disk,
    or, when nothing was saved, on the exception's ``outcome``)."""
    import collections

    from ragexp.judge import failed_line

    judged = [s.key for s in plan.specs if s.info.judge]
    if not judged or any(scored.counts.get(k, {}).get("ok") for k in judged):
        return
    failed = failed_line(sum((collections.Counter(scored.counts.get(k, {})) for k in judged), collections.Counter()),
                         next((scored.tally.failed[k] for k in judged if k in scored.tally.failed), ""))
    if failed:
        where = f"{folder}/per_sample.parquet" if folder is not None else "the exception's .result.per_sample"
        raise JudgeFailed(f"{failed}. Each sample's reason is in {where}; nothing was logged", outcome=outcome)


def interval_metrics(intervals: dict[str, Any]) -> dict[str, float]:
    """MLflow keys of the uncertainty: ``K/n``, ``K/stderr``, ``K/ci_low``, ``K/ci_high`` for aggregate key K."""
    out: dict[str, float] = {}
    for key, iv in intervals.items():
        out[f"{key}/n"] = float(iv.n)
        for part in ("stderr", "ci_low", "ci_high"):
            value = getattr(iv, part)
            if value is not None:
                out[f"{key}/{part}"] = float(value)
    return out


def check_store_step(tracking: dict[str, Any]) -> None:
    """The MLflow store takes runs (scheme, reachable, writable), checked before any work;
    runs left RUNNING by dead processes of this host are closed FAILED (one line says so)."""
    if not tracking.get("enabled", True):
        return
    from ragexp.tracking.store import check_store, configure_http, resolve_uri
    from ragexp.tracking.traces import DEFAULT_ASSESSMENTS, check_assessments, check_cap

    check_cap(tracking.get("traces"))  # tracking.traces: a bad cap said before any work
    check_assessments(tracking.get("trace_assessments", DEFAULT_ASSESSMENTS))
    check_cap(tracking.get("sweep_traces"))

    configure_http(tracking)  # tracking.http_timeout_s / http_max_retries, for this job's MLflow calls
    try:
        check_store(resolve_uri(tracking.get("uri")), tracking.get("experiment") or "ragexp")
    except TrackingError:
        if not _sweep_parent():
            raise
        # a sweep's store that went away after its parent run was opened: the job still computes and saves;
        # log_step tries again at its end and, failing, leaves the job unlogged (docs/guarantees.md)


def log_step(tracking: dict[str, Any], folder: Path, summary: dict[str, Any], record: Any = None) -> None:
    """Log the saved results folder to MLflow and say where; a failure says how to log it later."""
    if not tracking.get("enabled", True):
        return
    from ragexp.tracking.log import log_run
    from ragexp.tracking.store import resolve_uri, ui_command

    try:
        run_id, uri = log_run(folder, uri=resolve_uri(tracking.get("uri")), record=record)  # mlflow_run.json keeps it without credentials
    except TrackingError as exc:
        if not _sweep_parent():
            raise
        # in a sweep: this job is saved but unlogged; the sweep goes on, and its end names the upload command
        why = scrub(str(exc).split("; the results are in ")[0])
        print(f"  unlogged: {why}; its results are saved in {folder} (the sweep's end says how to log them)")
        return
    summary["run_id"] = run_id
    summary["tracking_uri"] = uri
    if _job_label():  # in a sweep: its end says how to open them all
        print(f"  logged as MLflow run {run_id}")
        return
    print(f"MLflow run {run_id} logged to {redact_url(uri)}")
    print(f"Open it with:  {ui_command(uri)}")
def traces_step(cfg: DictConfig, tracking: dict[str, Any], plan: Plan, summary: dict[str, Any], per_sample: Any,
                records: list[Record], timings: Any = None) -> None:
    """Each sample (up to ``tracking.traces``) as an MLflow trace linked to the logged run (docs/traces.md),
    after the run is logged: a trace that fails to log is said in one line and a run tag, never fails the run.
    A streamed run's (``per_sample`` a :class:`ragexp.results.tables.StreamedTable`) are read back from its
    Parquet file and its ``timings`` columns."""
    if not tracking.get("enabled", True) or not summary.get("run_id") or tracking.get("traces", 1) == 0:
        return
    from ragexp.tracking.traces import (DEFAULT_ASSESSMENTS, DEFAULT_CAP, DEFAULT_SWEEP_CAP, job_cap, log_run_traces,
                                        log_streamed_traces)

    in_sweep = bool(_job_label())  # a sweep's job: tracking.sweep_traces, the same questions in every job

    if hasattr(per_sample, "finish"):
        line = log_streamed_traces(per_sample.path, timings, OmegaConf.to_container(cfg, resolve=True),
                                   summary["tracking_uri"], summary["run_id"], summary["dataset_digest"], in_sweep)
    else:
        judge_model = scrub(str(cfg.judge.get("model"))) if plan.judge is not None and cfg.get("judge") else None
        judges = {s.key: judge_model for s in plan.judge_specs} if judge_model else {}
        line = log_run_traces(summary["tracking_uri"], summary["run_id"], records, per_sample,
                              summary["dataset_digest"], judges, stratify=not in_sweep,
                              cap=job_cap(tracking.get("traces", DEFAULT_CAP),
                                          tracking.get("sweep_traces", DEFAULT_SWEEP_CAP)) if in_sweep
                              else tracking.get("traces", DEFAULT_CAP),
                              seed=plan.stats.get("seed") or 0, session_by=plan.stats.get("cluster_by"),
                              headline=summary.get("headline") or (),
                              assessments=tracking.get("trace_assessments", DEFAULT_ASSESSMENTS))
    if line:
        print(line)


def _sweep_parent() -> str | None:
    """The parent run of the sweep this job belongs to (None outside a sweep, or a sweep logging nothing)."""
    from ragexp.tracking.launch import find_parent_run

    return find_parent_run(_hydra_paths()[1])


def results_folder() -> Path:
    """Where a run writes its results before logging: the job's Hydra output folder, or (without
    Hydra, e.g. ``run(cfg)`` from a script) ``ragexp_results/<date>_<time>_<random>/`` in the launch dir."""
    if (hc := _hydra()) is not None:
        return Path(hc.runtime.output_dir)
    import uuid

    return launch_dir() / "ragexp_results" / f"{time.strftime('%Y-%m-%d_%H-%M-%S')}_{uuid.uuid4().hex[:8]}"


def _hydra() -> Any:
    """Hydra's config of the running job; None outside a Hydra app (``run(cfg)`` from a script, ``evaluate``)."""
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.get() if HydraConfig.initialized() else None


def _job_label() -> str:
    """In a multirun, which job a printed table belongs to: `` · job 3: retriever=dense retriever.top_k=5``."""
    hc = _hydra()
    if hc is None or str(hc.mode) != "RunMode.MULTIRUN":
        return ""
    overrides = scrub(" ".join(o for o in map(str, hc.overrides.task) if not _is_plumbing(o)))
    return f" · job {hc.job.num}" + (f": {overrides}" if overrides else "")


#: Overrides that say where and how a job runs, not which system it evaluates: left out of a child run's name.
PLUMBING_KEYS = ("data_dir", "progress", "tracking", "hydra", "run_name", "execution", "report")


def _is_plumbing(override: str) -> bool:
    """``data_dir=/some/path`` or ``tracking.uri=...``: not part of what tells a sweep's jobs apart.

    >>> _is_plumbing("progress=False"), _is_plumbing("tracking.uri=sqlite:///x.db"), _is_plumbing("retriever.top_k=5")
    (True, True, False)
    """
    key = override.split("=", 1)[0].lstrip("+~")
    return key.split(".", 1)[0] in PLUMBING_KEYS


def _hydra_paths() -> tuple[Path | None, str | None, str | None]:
    """The job's ``.hydra`` folder, the sweep's folder and the job's run name (in a multirun), or Nones."""
    hc = _hydra()
    if hc is None:
        return None, None, None
    sweep = str(hc.sweep.dir) if str(hc.mode) == "RunMode.MULTIRUN" else None
    name = None
    if sweep is not None:
        name = ",".join(o for o in map(str, hc.overrides.task) if not _is_plumbing(o)) or f"job {hc.job.num}"
    return Path(hc.runtime.output_dir) / hc.output_subdir if hc.output_subdir else None, sweep, name
