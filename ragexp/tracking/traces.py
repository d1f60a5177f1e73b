"""Every sample of a run as an MLflow trace linked to the run (docs/traces.md), through MLflow's public
tracing and assessment APIs (``mlflow.start_span``, ``mlflow.log_feedback``, ``mlflow.log_expectation``).

One trace per sample: a root span (inputs ``{"query": ...}``, the same bytes for the same record in every
run, so MLflow's comparison of two runs pairs the rows; outputs ``{"answer": ...}``), a ``RETRIEVER``
span whose outputs are the passages in MLflow's document form, a span per pipeline stage with its
measured duration when ragexp ran the pipeline, and the record id and dataset digest as trace tags. On
the root span: every metric's per-sample value as one attribute (``ragexp.scores``). On the trace, as
assessments (``tracking.trace_assessments``): the run's headline metrics first, then any metric whose status is
not ``ok`` (feedback carrying that error and no value) — or, with ``all``, every metric — each as feedback (a
deterministic metric from a ``CODE`` source named by the metric, a judge metric from the judge model as
``LLM_JUDGE`` source with the judge's reasons as rationale); the references as expectations, people's labels as
``HUMAN`` feedback. MLflow stores assessments one row at a time, about half a trace's CPU at 43 of them
(docs/performance.md, "Traces"), hence the headline default.

The feedback is added while the trace is still open, so each trace reaches the store in one write
with everything on it, in MLflow's background export (flushed every :data:`FLUSH_EVERY` traces, so
its queue never overflows and drops one). ``tracking.traces`` caps how many samples become traces
(:func:`choose`: every one up to the cap, above it a seeded sample stratified by status). Logging
traces happens after the run is logged: a failure is recorded on the run (tag
``ragexp.traces_failed``) and said in one line, and never fails the run; the values stay in the
per-sample table. The run's ``ragexp.traces`` tag says ``being logged`` while they are, and the count
that landed once MLflow's export has drained (waited for at most :data:`WAIT_S`): a run stopped while logging
them keeps the ``being logged`` value.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ragexp.common.paths import conf_file
from ragexp.common.secrets import scrub, scrub_columns
from ragexp.results.columns import detail_column, metric_keys, status_column
from ragexp.tracking.settings import TrackingSettings

#: Samples that become traces when ``tracking.traces`` is not set: conf/tracking/local.yaml's (docs/performance.md,
#: "Traces": measured so a default run with traces stays within 1.5x the wall time of one without).
DEFAULT_CAP = conf_file("tracking/local")["traces"]
#: A sweep job's cap (``tracking.sweep_traces``): the same questions in every job (docs/traces.md).
DEFAULT_SWEEP_CAP = conf_file("tracking/local")["sweep_traces"]
#: Which metrics are each trace's assessments (``tracking.trace_assessments``): ``headline`` (the headline metrics
#: and those whose status is not ``ok``) or ``all``.
ASSESSMENTS = ("headline", "all")
DEFAULT_ASSESSMENTS = conf_file("tracking/local")["trace_assessments"]
#: Root span attribute: every metric's per-sample value (None where its status is not ``ok``).
SCORES_ATTRIBUTE = "ragexp.scores"
#: Seconds a run waits at its end for MLflow's export of its traces to drain; what has not landed by then is
#: said on the run (tag ``ragexp.traces_failed`` and its description).
WAIT_S = 120.0
#: Traces started between two flushes of MLflow's export queue (its default size is 1,000: a trace
#: put on a full queue is dropped).
FLUSH_EVERY = 500
#: Tags and names on every trace.
RECORD_TAG, DIGEST_TAG, RUN_TAG = "ragexp.record_id", "ragexp.dataset_digest", "ragexp.run_id"
TRACE_NAME = "ragexp"
#: Run tags: how many samples became traces, and why some did not.
COUNT_TAG, FAILED_TAG = "ragexp.traces", "ragexp.traces_failed"
#: The ``ragexp.traces`` value while they are logged: a run that keeps it was stopped before they all landed.
BEING_LOGGED = "being logged: {chosen} of {samples} (a run that keeps this value stopped before they all landed)"
#: Trace tag of a sample with no timing: MLflow would show its trace's execution time as 0 s.
DURATION_TAG, NOT_MEASURED = "ragexp.duration", "not measured (the record has no latency_s or timings)"
#: Traces linked to a run per ``MlflowClient.link_traces_to_run`` call (MLflow's limit).
LINK_BATCH = 100
#: Timing keys of a record that are no stage of their own.
_NOT_STAGES = ("total",)
#: Stage names of ragexp's pipeline → MLflow span types (``search`` / ``answer``: a memory layer's, docs/memory-layers.md).
_SPAN_TYPES = {"retrieve": "RETRIEVER", "embed": "EMBEDDING", "rerank": "RERANKER", "compress": "PARSER",
               "generate": "LLM", "search": "RETRIEVER", "answer": "LLM"}


@dataclass
class TraceReport:
    """What :func:`log_traces` did: samples in the run, chosen, logged, and why any were not."""

    samples: int
    chosen: int
    logged: int = 0
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    linked: int = 0
    stratified: bool = True  # false: a sweep job's, the same seeded questions in every job

    def note(self, cap: int | None) -> str | None:
        """The sentence the run's description gets when not every sample is a trace."""
        parts = [f"Traces: {self.linked} of them are the app's own traces, linked to this run with ragexp's scores "
                 "on them."] if self.linked else []
        if self.chosen >= self.samples and not self.failed:
            return " ".join(parts) or None
        if self.chosen < self.samples:
            parts.append(f"Traces: {self.chosen} of {self.samples} samples (tracking.traces={cap}), a seeded "
                         "sample stratified by status; every sample is in per_sample.parquet." if self.stratified else
                         f"Traces: {self.chosen} of {self.samples} samples (tracking.sweep_traces={cap}), the same "
                         "seeded questions in every job of the sweep; every sample is in per_sample.parquet.")
        if self.failed:
            parts.append(f"Traces: {self.chosen - self.logged} could not be logged ({self.failed[0]}); "
                         "their values are in per_sample.parquet.")
        return " ".join(parts)

    def console(self, cap: int | None) -> str:
        """The line a run prints when not every sample became a trace: the key that set the cap, and the
        override that traces every sample (in a sweep's job ``tracking.traces`` alone changes nothing).

        >>> TraceReport(samples=50, chosen=10, logged=10, stratified=False).console(10)[:71]
        'Traces: 10 of 50 samples (tracking.sweep_traces=10, the same questions '
        """
        if self.stratified:
            return (f"Traces: {self.logged} of {self.samples} samples (tracking.traces={cap}; "
                    "tracking.traces=null logs every one)")
        return (f"Traces: {self.logged} of {self.samples} samples (tracking.sweep_traces={cap}, the same questions "
                "in every job; tracking.sweep_traces=null tracking.traces=null logs every one)")


def sample_status(columns: Mapping[str, list], keys: Sequence[str]) -> list[str]:
    """Each sample's stratum: ``ok`` when every metric is ``ok``, else its first other status."""
    n = len(columns.get("id", []))
    statuses = [columns[status_column(k)] for k in keys]
    return [next((s[i] for s in statuses if s[i] != "ok"), "ok") for i in range(n)]


def choose(strata: Sequence[str], cap: int | None, seed: int = 0) -> list[int]:
    """Which samples become traces, in record order: all when ``cap`` is None or not below their number;
    else ``cap`` of them drawn with ``seed``, each stratum (status) in proportion to its size and never
    left out while the cap allows one per stratum.

    >>> choose(["ok"] * 8 + ["error"] * 2, None)
    [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    >>> picked = choose(["ok"] * 98 + ["error"] * 2, 10, seed=1)
    >>> len(picked), sum(i >= 98 for i in picked)
    (10, 1)
    """
    n = len(strata)
    if cap is None or cap >= n:
        return list(range(n))
    if cap <= 0:
        return []
    groups: dict[str, list[int]] = {}
    for i, s in enumerate(strata):
        groups.setdefault(s, []).append(i)
    # largest remainder, with one for each stratum first when the cap allows it
    share = {s: cap * len(g) / n for s, g in groups.items()}
    take = {s: min(len(groups[s]), max(1 if cap >= len(groups) else 0, math.floor(v))) for s, v in share.items()}
    rest = sorted(groups, key=lambda s: (take[s] - share[s], s))
    while sum(take.values()) > cap:  # the ones given a place they had no share for give it back first
        s = max((s for s in rest if take[s] > 0), key=lambda s: (take[s] - share[s], s))
        take[s] -= 1
    for s in rest:
        if sum(take.values()) >= cap:
            break
        if take[s] < len(groups[s]):
            take[s] += 1
    rng = random.Random(seed)
    out: list[int] = []
    for s in sorted(groups):
        out.extend(rng.sample(groups[s], take[s]))
    return sorted(out)


def rationale(detail: Any) -> str | None:
    """The judge's stated reasons out of a judge metric's detail (``{"reasons": [...]}``), else the detail; secrets
    redacted (a judge may quote a key it was shown)."""
    said = _reasons(detail)
    return scrub(said) if said else said


def _reasons(detail: Any) -> str | None:
    if detail is None:
        return None
    try:
        parsed = json.loads(detail)
    except (TypeError, ValueError):
        return str(detail)
    if isinstance(parsed, dict):
        reasons = parsed.get("reasons")
        if reasons is None and isinstance(parsed.get("first"), str):
            return _reasons(parsed["first"])
        if isinstance(reasons, list):
            return "\n".join(str(r) for r in reasons if r) or None
        if isinstance(reasons, str):
            return reasons
    return str(detail)


def documents(contexts: Sequence[str] | None, ids: Sequence[str] | None,
              scores: Sequence[float] | None = None, chunk_ids: Sequence[str] | None = None) -> list[dict]:
    """Passages in MLflow's document form (``page_content``; ``metadata.doc_uri``, ``chunk_id``, ``rank``,
    ``score`` where known): the outputs of a ``RETRIEVER`` span.

    >>> documents(["a text"], ["d1"], [0.5])
    [{'page_content': 'a text', 'metadata': {'rank': 1, 'doc_uri': 'd1', 'score': 0.5}, 'id': 'd1'}]
    """
    texts = list(contexts) if contexts is not None else [None] * len(ids or [])
    ids = list(ids) if ids is not None and len(ids) == len(texts) else None
    scores = list(scores) if scores is not None and len(scores) == len(texts) else None
    chunk_ids = list(chunk_ids) if chunk_ids is not None and len(chunk_ids) == len(texts) else None
    out = []
    for i, text in enumerate(texts):
        meta: dict[str, Any] = {"rank": i + 1}
        doc: dict[str, Any] = {"page_content": text if text is not None else "", "metadata": meta}
        if ids is not None:
            meta["doc_uri"] = str(ids[i])
            doc["id"] = str(ids[i])
        if chunk_ids is not None:
            meta["chunk_id"] = str(chunk_ids[i])
        if scores is not None and scores[i] is not None and math.isfinite(scores[i]):
            meta["score"] = float(scores[i])
        out.append(doc)
    return out


def _plain(value: Any) -> Any:
    """A cell as JSON-ready plain data (numpy arrays and scalars from a Parquet table become lists and numbers)."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


@dataclass
class TraceSource:
    """What the traces of one run are made of: the per-sample table (:func:`ragexp.results.columns.per_sample_columns`),
    per sample the stage timings, the retriever's scores and chunk ids when ragexp ran the pipeline,
    and which metric keys a judge scored (key → judge model)."""

    columns: Mapping[str, list]
    dataset_digest: str
    judges: Mapping[str, str] = field(default_factory=dict)
    timings: Sequence[Mapping[str, float] | None] | None = None
    scores: Sequence[Sequence[float] | None] | None = None
    chunk_ids: Sequence[Sequence[str] | None] | None = None
    samples: int | None = None  # set: ``columns`` hold only the chosen ones of this many (a streamed run)
    #: the column of each sample's conversation (``stats.cluster_by``): the trace's MLflow session
    session_by: str | None = None


def source_of(records: Sequence[Any], per_sample: Mapping[str, list], dataset_digest: str,
              judges: Mapping[str, str], session_by: str | None = None) -> TraceSource:
    """A :class:`TraceSource` of a run's records (``ragexp.common.records.Record``) and its per-sample table;
    ``session_by``: its column of each record's conversation (``stats.cluster_by``), the traces' session."""
    timings = [r.timings for r in records] if any(r.timings for r in records) else None
    scores = ([r.extra.get("context_scores") for r in records]
              if any(r.extra.get("context_scores") for r in records) else None)
    chunks = [r.extra.get("chunk_ids") for r in records] if any(r.extra.get("chunk_ids") for r in records) else None
    return TraceSource(per_sample, dataset_digest, dict(judges), timings, scores, chunks,
                       session_by=session_by if session_by in per_sample else None)


def log_traces(uri: str, experiment_id: str, run_id: str, source: TraceSource, *, cap: int | None = DEFAULT_CAP,
               seed: int = 0, headline: Sequence[str] = (), assessments: str = DEFAULT_ASSESSMENTS,
               started_tag: Any = None, stratify: bool = True) -> TraceReport:
    """Log the chosen samples of ``source`` as traces linked to run ``run_id``; return what was logged.
    ``headline``: the run's headline metric keys (their assessments come first); ``assessments``: ``headline`` or
    ``all`` (:func:`marked_keys`); ``started_tag(chosen, samples)``: called once the samples are chosen, before any
    trace (the run's ``being logged`` tag); ``stratify`` false: the seeded sample ignores the status (a sweep's jobs
    then trace the same questions).

    Never raises for a trace that could not be logged: the report says how many and why."""
    started = time.perf_counter()
    columns = source.columns
    keys = metric_keys(columns)
    n = len(columns.get("id", [])) if source.samples is None else source.samples
    strata = sample_status(columns, keys) if stratify else ["ok"] * n
    chosen = choose(strata, cap, seed) if source.samples is None else list(range(len(columns.get("id", []))))
    report = TraceReport(samples=n, chosen=len(chosen), stratified=stratify)
    if not chosen:
        return report
    if started_tag is not None:
        started_tag(len(chosen), n)
    rows = scrub_columns({name: [values[i] for i in chosen] for name, values in columns.items()})
    try:
        import mlflow
        from mlflow.entities.trace_location import MlflowExperimentLocation
    except ImportError as exc:  # pragma: no cover - mlflow is a core dependency
        report.failed.append(f"mlflow cannot trace: {exc}")
        return report
    if uri.startswith("sqlite:"):  # one writer: MLflow's 10 export threads on one SQLite file wait on its lock
        os.environ.setdefault("MLFLOW_ASYNC_TRACE_LOGGING_MAX_WORKERS", "1")
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    watch, failures = logging.getLogger("mlflow.tracing"), _Failures()
    watch.addHandler(failures)
    ended = logging.getLogger("opentelemetry.sdk.trace")
    ended.addFilter(_ended_again)
    try:
        where = MlflowExperimentLocation(experiment_id)
        sources = _sources(keys, source.judges)  # built once: the same source objects on every trace
        marked = marked_keys(keys, headline, assessments)
        apps = _app_traces(mlflow, rows)
        ids = []
        for j, i in enumerate(chosen):
            try:
                marks = _assessments(rows, j, keys, sources, marked)
                ids.append(_onto_app_trace(mlflow, apps[j], run_id, marks) if j in apps
                           else _one_trace(mlflow, where, run_id, source, rows, j, i, marks, keys))
            except Exception as exc:  # noqa: BLE001 - one trace's failure is reported, never the run's
                report.failed.append(f"record {rows['id'][j]}: {scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}")
            if (j + 1) % FLUSH_EVERY == 0:
                mlflow.flush_trace_async_logging()
        own = len(ids) - len(apps)  # the app's traces are stored already; ragexp's own go through MLflow's export
        drained = _landed_all(mlflow.MlflowClient(uri), experiment_id, run_id, own, failures, WAIT_S)
        drained = _drain(mlflow, WAIT_S) if drained is None else drained
        _at_exit_once(mlflow)
        report.linked = _link(mlflow.MlflowClient(uri), [apps[j].info.trace_id for j in apps], run_id, report.failed)
        lost = [m for m in failures.messages if "fail" in m.lower() or "discard" in m.lower()]
        report.logged = max(0, len(ids) - len(lost))
        if not drained:  # what the store holds of this run's traces after the wait
            report.logged = min(report.logged, _landed(mlflow.MlflowClient(uri), experiment_id, run_id) or 0)
            report.failed.append(f"{len(ids) - report.logged} of {len(ids)} traces had not reached the store after "
                                 f"{WAIT_S:.0f} s")
        if lost:
            report.failed.append(f"{len(lost)} of {len(ids)} traces did not reach the store: {scrub(lost[0])[:300]}")
    finally:
        watch.removeHandler(failures)
        ended.removeFilter(_ended_again)
        mlflow.set_tracking_uri(before)
    report.seconds = time.perf_counter() - started
    return report


def marked_keys(keys: Sequence[str], headline: Sequence[str], assessments: str) -> list[str]:
    """The metric keys every trace carries as feedback, headline metrics first (MLflow's Traces tab shows the first
    ones): with ``headline`` those of ``headline`` among ``keys`` (the first key when none is), with ``all`` every key.
    A metric whose status on a sample is not ``ok`` is that sample's feedback either way (:func:`_assessments`).

    >>> marked_keys(["a", "b", "c"], ["c", "a"], "headline"), marked_keys(["a", "b", "c"], ["c"], "all")
    (['c', 'a'], ['c', 'a', 'b'])
    >>> marked_keys(["a", "b"], ["x"], "headline")
    ['a']
    """
    first = [k for k in headline if k in keys] or list(keys[:1])
    return first + [k for k in keys if k not in first] if assessments == "all" else first


def job_cap(cap: Any, per_job: Any) -> int | None:
    """A sweep job's cap: ``tracking.sweep_traces`` (``per_job``) when set and below ``tracking.traces``.

    >>> job_cap(50, 10), job_cap(None, 10), job_cap(5, 10), job_cap(50, None)
    (10, 10, 5, 50)
    """
    cap, per_job = check_cap(cap), check_cap(per_job)
    return cap if per_job is None else per_job if cap is None else min(cap, per_job)


def check_assessments(value: Any) -> str:
    """``tracking.trace_assessments`` checked: ``headline`` or ``all``.

    >>> check_assessments("all")
    'all'
    >>> check_assessments("every")
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: tracking.trace_assessments: expected one of headline, all, got 'every'
    """
    from ragexp.errors import ConfigError

    if value in ASSESSMENTS:
        return value
    raise ConfigError(f"tracking.trace_assessments: expected one of {', '.join(ASSESSMENTS)}, got {value!r}")


def _landed_all(client: Any, experiment_id: str, run_id: str, own: int, failures: "_Failures",
                seconds: float) -> bool | None:
    """Wait until the store holds the run's ``own`` traces (or MLflow's export has said the rest failed), polling it
    (a search of the run's traces without their spans) at most ``seconds``; whether they all came, None when the store
    cannot be searched (then :func:`_drain` waits). Cheaper than
    flushing MLflow's export, whose flush waits up to a second for its consumer thread even when all is written
    (docs/performance.md, "Traces")."""
    deadline, pause = time.monotonic() + seconds, 0.02
    while True:
        lost = sum("fail" in m.lower() or "discard" in m.lower() for m in failures.messages)
        if own - lost <= 0:
            return True
        found = _landed(client, experiment_id, run_id)
        if found is None:
            return None
        if found >= own - lost:
            return True
        if time.monotonic() + pause > deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 1.5, 0.5)


def _drain(mlflow: Any, seconds: float) -> bool:
    """Wait for MLflow's export of the traces started so far, at most ``seconds``; whether it drained."""
    done = threading.Event()

    def flush() -> None:
        try:
            mlflow.flush_trace_async_logging()
        finally:
            done.set()

    threading.Thread(target=flush, name="ragexp-trace-flush", daemon=True).start()
    return done.wait(seconds)


def _landed(client: Any, experiment_id: str, run_id: str) -> int | None:
    """How many of the run's traces the store holds; None when it cannot be searched."""
    try:
        found, token = 0, None
        while True:
            page = client.search_traces(locations=[experiment_id], run_id=run_id, max_results=500,
                                        page_token=token, include_spans=False)
            found += len(page)
            token = page.token
            if not token:
                return found
    except Exception:  # noqa: BLE001 - unknown
        return None


_EXIT: list[bool] = []


def _at_exit_once(mlflow: Any) -> None:
    """At the process's exit, close MLflow's export queue (already flushed) before MLflow's own exit hook runs
    (hooks run last-registered first), so a run does not end on MLflow's "Flushing the async trace logging
    queue before program exit" line; the queue stays open until then for the process's next run."""
    if not _EXIT:
        import atexit

        atexit.register(mlflow.flush_trace_async_logging, terminate=True)
        _EXIT.append(True)


class _Failures(logging.Handler):
    """MLflow's export says a trace that did not reach the store in a warning of its ``mlflow.tracing``
    loggers (and goes on): kept here, so the run can say how many and why."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage().splitlines()[0] if record.getMessage() else record.levelname)


def _ended_again(record: logging.LogRecord) -> bool:
    """Drops OpenTelemetry's "... on an ended span" note: :func:`_one_trace` ends the root span at the record's
    duration, and ``mlflow.start_span``'s exit ends it once more (OpenTelemetry keeps the first end)."""
    return "ended span" not in record.getMessage()


def duration(latency: Any, timings: Mapping[str, Any]) -> float | None:
    """The seconds a sample's trace lasts: the record's ``latency_s``, else its ``timings``' ``total``, else the
    sum of its stages; None when the record has no timing (MLflow would show 0 s: the trace says not measured).

    >>> duration(1.5, {"generate": 1.0}), duration(None, {"retrieve": 0.25, "generate": 1.0}), duration(None, {})
    (1.5, 1.25, None)
    """
    def seconds(v: Any) -> bool:
        return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0

    for value in (latency, timings.get("total")):
        if seconds(value):
            return float(value)
    stages = [v for k, v in timings.items() if k not in _NOT_STAGES and seconds(v)]
    return float(sum(stages)) if stages else None


def _one_trace(mlflow: Any, where: Any, run_id: str, source: TraceSource, rows: Mapping[str, list], j: int,
               i: int, marks: Sequence[Any], keys: Sequence[str] = ()) -> str:
    """The trace of sample ``i`` (row ``j`` of the scrubbed ``rows``) with its assessments ``marks``; returns
    its id; every metric of ``keys``'s value on the root span (:data:`SCORES_ATTRIBUTE`). The root span lasts the record's :func:`duration` and the stage spans their measured seconds, one
    after the other from the root's start, so MLflow's execution time and span durations are the record's."""
    from mlflow.entities import SpanType

    def cell(name: str) -> Any:
        return _plain(rows[name][j]) if name in rows else None

    record_id, query, answer = str(cell("id")), cell("query"), cell("answer")
    timings = dict(source.timings[i] or {}) if source.timings is not None else {}
    seconds = duration(cell("latency_s"), timings)
    with mlflow.start_span(TRACE_NAME, span_type=SpanType.CHAIN, trace_destination=where, run_id=run_id) as root:
        root.set_inputs({"query": query})
        trace_id = root.trace_id
        tags = {RECORD_TAG: record_id, DIGEST_TAG: source.dataset_digest, RUN_TAG: run_id}
        if seconds is None:
            tags[DURATION_TAG] = NOT_MEASURED
        session = cell(source.session_by) if source.session_by else None  # the conversation: MLflow's Sessions view
        mlflow.update_current_trace(tags=tags, client_request_id=request_id(run_id, record_id),
                                    session_id=str(session) if session is not None else None)
        if keys:
            root.set_attribute(SCORES_ATTRIBUTE, {k: cell(k) if cell(status_column(k)) == "ok" else None for k in keys})
        latency = cell("latency_s")
        if latency is not None:
            root.set_attribute("ragexp.latency_s", latency)
        if cell("pipeline_error"):
            root.set_attribute("ragexp.pipeline_error", cell("pipeline_error"))
        t = start = root.start_time_ns
        stages = [s for s in timings if s not in _NOT_STAGES]
        docs = documents(cell("contexts"), cell("context_ids"),
                         _plain(source.scores[i]) if source.scores is not None and "compress" not in timings else None,
                         _plain(source.chunk_ids[i]) if source.chunk_ids is not None and "compress" not in timings else None)
        if not {"retrieve", "search"} & set(stages) and (cell("contexts") is not None or cell("context_ids") is not None):
            stages.insert(0, "retrieve")  # passages the dataset brought: a retriever span without a duration
        for stage in stages:
            kind = _SPAN_TYPES.get(stage, SpanType.UNKNOWN)
            inputs = {"query": query} if stage in ("retrieve", "search", "embed", "rerank") else None
            span = mlflow.start_span_no_context(stage, span_type=kind, parent_span=root, inputs=inputs, start_time_ns=t)
            took = timings.get(stage)
            end = t + round(took * 1e9) if took is not None else t
            outputs = docs if stage in ("retrieve", "search", "compress") else \
                {"answer": answer} if stage in ("generate", "answer") else None
            if took is not None:
                span.set_attribute("ragexp.seconds", took)
            span.end(outputs=outputs, end_time_ns=end)
            t = end
        for mark in marks:  # on the open trace: MLflow keeps them with it and stores them in its one write
            mlflow.log_assessment(trace_id=trace_id, assessment=mark)
        root.end(outputs={"answer": answer}, end_time_ns=start + round(seconds * 1e9) if seconds is not None else start)
    return trace_id


def _sources(keys: Sequence[str], judges: Mapping[str, str]) -> dict[str, Any]:
    """Each metric key's assessment source: the judge model (``LLM_JUDGE``) or a ``CODE`` source named by the key."""
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    return {key: AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=judges[key]) if key in judges
            else AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=key) for key in keys}


def _assessments(rows: Mapping[str, list], j: int, keys: Sequence[str], sources: Mapping[str, Any],
                 marked: Sequence[str] | None = None) -> list[Any]:
    """Row ``j``'s assessments: the feedback of each metric of ``marked`` (default: every key), in its order, then of
    each other metric whose status is not ``ok`` (an error, no value, as for any metric not ``ok``), the
    references as expectations (:func:`_expectations`), people's labels as ``HUMAN`` feedback."""
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Expectation, Feedback

    def cell(name: str) -> Any:
        return _plain(rows[name][j]) if name in rows else None

    out = []
    marked = list(keys) if marked is None else list(marked)
    for key in marked + [k for k in keys if k not in marked and cell(status_column(k)) != "ok"]:
        status, detail, src = cell(status_column(key)), cell(detail_column(key)), sources[key]
        judged = src.source_type == AssessmentSourceType.LLM_JUDGE
        if status == "ok":
            out.append(Feedback(name=key, value=cell(key), source=src, rationale=rationale(detail) if judged else None,
                                metadata={"detail": str(detail)[:1000]} if detail and not judged else None))
        else:
            out.append(Feedback(name=key, source=src, error=AssessmentError(error_code=str(status).upper(),
                                                                            error_message=str(detail or status))))
    out += [Expectation(name=name, value=value) for name, value in _expectations(cell)]
    people = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="ragexp dataset labels")
    for name in rows:
        if (name.startswith("human/") or name == "label") and (value := cell(name)) is not None:
            out.append(Feedback(name=name, value=value, source=people))
    return out


def _expectations(cell: Any) -> list[tuple[str, Any]]:
    """The references as expectations: ``expected_response`` (one reference answer, else the list),
    ``expected_retrieved_context`` (the ground-truth passages and ids, MLflow's names) and ``gt_context_ids``."""
    out: list[tuple[str, Any]] = []
    refs = cell("reference_answers")
    if refs:
        out.append(("expected_response", refs[0] if len(refs) == 1 else refs))
    texts, ids = cell("gt_contexts"), cell("gt_context_ids")
    if texts or ids:
        n = len(texts or ids)
        expected = []
        for k in range(n):
            item: dict[str, Any] = {}
            if texts and k < len(texts):
                item["content"] = texts[k]
            if ids and len(ids) == n:
                item["doc_uri"] = str(ids[k])
            expected.append(item)
        out.append(("expected_retrieved_context", expected))
    if ids:
        out.append(("gt_context_ids", [str(x) for x in ids]))
    return out


def _app_traces(mlflow: Any, rows: Mapping[str, list]) -> dict[int, Any]:
    """Row → the app's own trace, for the rows read from one (``dataset=mlflow_traces``, ``pipeline=traced``: the
    ``trace_id`` column) whose trace is in the store the run is logged to; not another ragexp run's trace."""
    found = {}
    for j, trace_id in enumerate(rows.get("trace_id") or []):
        if isinstance(trace_id, str) and trace_id and (trace := mlflow.get_trace(trace_id, silent=True)) is not None \
                and RUN_TAG not in (trace.info.tags or {}):
            found[j] = trace
    return found


def _onto_app_trace(mlflow: Any, trace: Any, run_id: str, marks: Sequence[Any]) -> str:
    """ragexp's assessments on the app's own trace, as ``mlflow.genai.evaluate`` scores existing traces: each
    metric's feedback names the run (``mlflow.assessment.sourceRunId``); an expectation or people's label is
    added only when the trace has none of that name (the dataset may have read it from there)."""
    from mlflow.entities import AssessmentSourceType, Feedback
    from mlflow.tracing.constant import AssessmentMetadataKey

    trace_id, have = trace.info.trace_id, {a.name for a in trace.info.assessments or []}
    for mark in marks:
        if isinstance(mark, Feedback) and mark.source.source_type != AssessmentSourceType.HUMAN:
            mark.metadata = {**(mark.metadata or {}), AssessmentMetadataKey.SOURCE_RUN_ID: run_id}
        elif mark.name in have:
            continue
        mlflow.log_assessment(trace_id=trace_id, assessment=mark)
    return trace_id


def _link(client: Any, trace_ids: Sequence[str], run_id: str, failed: list[str]) -> int:
    """Link the app's traces to the run (``MlflowClient.link_traces_to_run``, :data:`LINK_BATCH` at a time), so
    the run's Traces tab lists them; how many were linked (a failure is added to ``failed``)."""
    done = 0
    for k in range(0, len(trace_ids), LINK_BATCH):
        try:
            client.link_traces_to_run(list(trace_ids[k:k + LINK_BATCH]), run_id)
            done += len(trace_ids[k:k + LINK_BATCH])
        except Exception as exc:  # noqa: BLE001 - the scores are on the traces; only the link is missing
            failed.append(f"the app's traces could not be linked to the run: {scrub(str(exc).splitlines()[0])[:200]}")
    return done


#: MLflow's SQL store keeps a trace's ``client_request_id`` in 50 characters (PostgreSQL refuses a longer one).
REQUEST_ID_CHARS = 50


def request_id(run_id: str, record_id: str) -> str:
    """A trace's ``client_request_id``: ``<run id>:<record id>``, or, when that is longer than MLflow's SQL
    store keeps (:data:`REQUEST_ID_CHARS`), the record id's place taken by a digest of it; the whole record id
    is the trace's tag ``ragexp.record_id``.

    >>> request_id("0" * 32, "q-1")
    '00000000000000000000000000000000:q-1'
    >>> long = request_id("0" * 32, "a record id longer than the store keeps")
    >>> len(long), long[:33]
    (50, '00000000000000000000000000000000:')
    """
    import hashlib

    whole = f"{run_id}:{record_id}"
    if len(whole) <= REQUEST_ID_CHARS:
        return whole
    room = max(8, REQUEST_ID_CHARS - len(run_id) - 1)
    return f"{run_id}:{hashlib.sha256(record_id.encode()).hexdigest()[:room]}"[-REQUEST_ID_CHARS:]


def check_cap(value: Any) -> int | None:
    """``tracking.traces`` checked: a whole number >= 0 (0: no traces) or null (every sample).

    >>> check_cap(None), check_cap(50)
    (None, 50)
    >>> check_cap("many")
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: tracking.traces: expected a whole number >= 0 (0: no traces) or null (every sample), got 'many'
    """
    from ragexp.errors import ConfigError

    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value
    raise ConfigError("tracking.traces: expected a whole number >= 0 (0: no traces) or null (every sample), "
                      f"got {value!r}")


def log_run_traces(uri: str, run_id: str, records: Sequence[Any], per_sample: Mapping[str, list], dataset_digest: str,
                   judges: Mapping[str, str], *, cap: int | None = DEFAULT_CAP, seed: int = 0,
                   session_by: str | None = None, headline: Sequence[str] = (),
                   assessments: str = DEFAULT_ASSESSMENTS, stratify: bool = True) -> str | None:
    """The traces of a logged run (:func:`log_traces`), with what they are on the run: tag ``ragexp.traces``
    (``50 of 50``), a sentence in its description when not every sample is a trace, ``ragexp.traces_failed``
    when some could not be logged. Returns the line to print when something is worth saying, else None.
    Never raises: the run is logged, and its values are in its per-sample table whatever happens here.
    ``session_by``: the per-sample column of each record's conversation (``stats.cluster_by``), each trace's
    session (``mlflow.trace.session``), so that MLflow's Sessions view groups a conversation's questions.
    ``headline``: the run's headline metric keys (``summary["headline"]``); ``assessments``:
    ``tracking.trace_assessments`` (:func:`marked_keys`); ``stratify`` false in a sweep's job (:func:`job_cap`)."""
    return _traces_on_run(uri, run_id, source_of(records, per_sample, dataset_digest, judges, session_by),
                          cap=cap, seed=seed, headline=headline, assessments=assessments, stratify=stratify)


def log_folder_traces(folder: Path, uri: str, run_id: str) -> str | None:
    """The traces of a results folder logged later (``python -m ragexp.tracking.upload``), through the same
    code as a run's own: every sample whole from ``per_sample.parquet``, the cap, seed and judge from the run's
    ``config.yaml``. The folder keeps no per-stage durations, so the stage spans of a pipeline ragexp ran are
    not among them (docs/traces.md). Returns the line to print, as :func:`log_run_traces`; never raises."""
    from ragexp.common.secrets import redact_url
    from ragexp.results.columns import FULL_TABLE_FILE
    from ragexp.results.tables import read_parquet_columns

    try:
        import yaml

        cfg = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8")) or {}
        tracking = TrackingSettings.from_config(cfg.get("tracking"))
        if not tracking.enabled or tracking.traces == 0:
            return None
        cap = check_cap(tracking.traces)
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        if summary.get("execution"):  # a run streamed in chunks: its rows read as it reads them
            return log_streamed_traces(folder / FULL_TABLE_FILE, {}, cfg, uri, run_id, summary["dataset_digest"])
        columns = read_parquet_columns(folder / FULL_TABLE_FILE)
        source = TraceSource(columns, summary["dataset_digest"], _judges(cfg), None,
                             columns.get("context_scores"), _lists(columns.get("chunk_ids")),
                             session_by=_session_by(cfg, columns))
        seed = (cfg.get("stats") or {}).get("seed") or 0
        headline = summary.get("headline") or ()
    except Exception as exc:  # noqa: BLE001 - the run is logged; its traces are extra
        return (f"warning: the traces of run {run_id} could not be logged to {redact_url(uri)} "
                f"({scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); every value is in its "
                "per-sample table")
    return _traces_on_run(uri, run_id, source, cap=cap, seed=seed, headline=headline,
                          assessments=tracking.trace_assessments)


def log_streamed_traces(table: Path, timings: Mapping[str, Any], config: Mapping[str, Any], uri: str, run_id: str,
                        dataset_digest: str, in_sweep: bool = False) -> str | None:
    """The traces of a run scored in chunks: those :func:`log_run_traces` logs for the same records in memory,
    reading only what they need — each sample's status from ``per_sample.parquet`` a row group at a time, then the
    chosen rows, and their stage timings from the run's ``timings`` columns (stage → seconds, NaN where a record
    did not time it); cap, seed and judge from ``config``. Returns the line to print; never raises."""
    from ragexp.common.secrets import redact_url
    from ragexp.core.headline import declared, headline_keys
    from ragexp.results.tables import parquet_names, read_parquet_groups, read_parquet_rows

    try:
        tracking = TrackingSettings.from_config(config.get("tracking"))
        cap = job_cap(tracking.traces, tracking.sweep_traces) if in_sweep else check_cap(tracking.traces)
        seed = (config.get("stats") or {}).get("seed") or 0
        keys = metric_keys(parquet_names(table))
        headline = headline_keys(declared(config.get("metric")), keys, (config.get("stats") or {}).get("primary"))
        strata: list[str] = []
        known: dict[str, str] = {}  # one string object per status, not one per sample
        for group in read_parquet_groups(table, ["id", *(status_column(k) for k in keys)]):
            strata.extend(known.setdefault(s, s) for s in sample_status(group, keys) if not in_sweep)
            strata.extend(["ok"] * len(group["id"]) if in_sweep else [])
        chosen = choose(strata, cap, seed)
        columns = read_parquet_rows(table, chosen)
        stages = {stage: timings[stage][chosen] for stage in timings}
        times = ([{s: float(v[j]) for s, v in stages.items() if v[j] == v[j]} for j in range(len(chosen))]
                 if stages else None)
        scores = columns.get("context_scores")  # the Parquet table holds them as text
        source = TraceSource(columns, dataset_digest, _judges(config), times,
                             scores and [v and [float(x) for x in v] for v in scores], _lists(columns.get("chunk_ids")),
                             samples=len(strata), session_by=_session_by(config, columns))
    except Exception as exc:  # noqa: BLE001 - the run is logged; its traces are extra
        return (f"warning: the traces of run {run_id} could not be logged to {redact_url(uri)} "
                f"({scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); every value is in its "
                "per-sample table")
    return _traces_on_run(uri, run_id, source, cap=cap, seed=seed, headline=headline,
                          assessments=tracking.trace_assessments, stratify=not in_sweep)


def _session_by(cfg: Mapping[str, Any], columns: Mapping[str, Any]) -> str | None:
    """The saved config's ``stats.cluster_by`` when the per-sample table has that column: the traces' session."""
    key = (cfg.get("stats") or {}).get("cluster_by")
    return key if key and key in columns else None


def _judges(cfg: Mapping[str, Any]) -> dict[str, str]:
    """Metric key → judge model of a saved config, as the run had them (the metrics a judge scores)."""
    from ragexp.core.scoring import build_metrics

    specs, _ = build_metrics(cfg.get("metric"), cfg.get("matcher"))
    keys = [s.key for s in specs if s.info.judge]
    model = (cfg.get("judge") or {}).get("model")
    return {key: scrub(str(model)) for key in keys} if keys and model is not None else {}


def _lists(values: Sequence[Any] | None) -> list | None:
    """A column of lists read back from the folder (an extra column holds a list as JSON text)."""
    if values is None:
        return None
    return [json.loads(v) if isinstance(v, str) else v for v in values]


def _traces_on_run(uri: str, run_id: str, source: TraceSource, *, cap: int | None, seed: int,
                   headline: Sequence[str] = (), assessments: str = DEFAULT_ASSESSMENTS,
                   stratify: bool = True) -> str | None:
    """:func:`log_run_traces`'s work on a built :class:`TraceSource`: the run's ``ragexp.traces`` tag says
    :data:`BEING_LOGGED` before the first trace and how many landed after the last."""
    from ragexp.common.secrets import redact_url
    from ragexp.tracking.store import bounded_http, open_client, retrying

    cap, assessments = check_cap(cap), check_assessments(assessments)
    try:
        with bounded_http():
            client = open_client(uri)
            run = retrying(client.get_run, run_id)

            def being_logged(chosen: int, samples: int) -> None:
                retrying(client.set_tag, run_id, COUNT_TAG, BEING_LOGGED.format(chosen=chosen, samples=samples))

            report = log_traces(uri, run.info.experiment_id, run_id, source, cap=cap, seed=seed,
                                headline=list(headline or ()), assessments=assessments, started_tag=being_logged,
                                stratify=stratify)
            tags = {COUNT_TAG: f"{report.logged} of {report.samples}"}
            note = report.note(cap)
            if note:
                tags["mlflow.note.content"] = (run.data.tags.get("mlflow.note.content", "") + "\n\n" + note).strip()
            if report.failed:
                tags[FAILED_TAG] = scrub("; ".join(report.failed[:3]))[:5000]
            for key, value in tags.items():
                retrying(client.set_tag, run_id, key, value)
    except Exception as exc:  # noqa: BLE001 - the run is logged; its traces are extra
        return (f"warning: the traces of run {run_id} could not be logged to {redact_url(uri)} "
                f"({scrub(str(exc).splitlines()[0] if str(exc) else type(exc).__name__)}); every value is in its "
                "per-sample table")
    if report.failed:
        return f"warning: {note}"
    if report.chosen < report.samples:
        return report.console(cap)
    return None
