"""``dataset=mlflow_traces``: your app's MLflow traces as records, one per trace, read through
``mlflow.search_traces`` from the run's own store (or ``tracking_uri``). The field mapping is
:mod:`ragexp.common.spans` (docs/traced-apps.md, "Where each field comes from"); a trace it cannot read
whole keeps its record, its ``trace_status`` saying what is missing, and one line counts them.
"""

from __future__ import annotations

import contextlib
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ragexp._compat import store_file_problem
from ragexp.common.paths import env_defaults, sqlite_path, store_uri
from ragexp.common.secrets import redact_url
from ragexp.common.spans import (RECORD_TAG, SpanReading, count_problems, problems_line, read_trace, record_of,
                                 unreadable)
from ragexp.common.collector import collector_paused
from ragexp.datasets.base import Dataset
from ragexp.datasets.split import split_of, split_records
from ragexp.errors import DataError
from ragexp.metrics.base import label_scales

#: MLflow's HTTP retries and timeout while reading from a tracking server (a value set in the environment wins):
#: a server that does not answer is told in seconds
_HTTP = {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "1", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10"}
#: traces asked for per page of ``MlflowClient.search_traces``
PAGE = 500


def _millis(value: Any, key: str) -> int | None:
    """``since`` / ``until`` as epoch milliseconds: an ISO date or time (UTC unless it says), or a number of ms."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            if when.tzinfo is None:
                when = when.replace(tzinfo=timezone.utc)
            return int(when.timestamp() * 1000)
    raise DataError(f"dataset.{key}: expected an ISO date or time (2026-11-27, 2026-11-27T04:00) or epoch "
                    f"milliseconds, got {value!r}")


def _filter(user: str | None, since: Any, until: Any) -> str | None:
    parts = [user] if user else []
    if (lo := _millis(since, "since")) is not None:
        parts.append(f"attributes.timestamp_ms >= {lo}")
    if (hi := _millis(until, "until")) is not None:
        parts.append(f"attributes.timestamp_ms < {hi}")
    return " AND ".join(parts) or None


def _client(uri: str):
    """An MlflowClient on ``uri``, after checking that a local store is there (MLflow would create an empty one)."""
    from mlflow import MlflowClient

    if (path := sqlite_path(uri)) is not None:
        if not path.is_file():
            raise DataError(f"no MLflow store at {path} (dataset.tracking_uri={redact_url(uri)}); expected the "
                            "SQLite file your app logged its traces to")
        if problem := store_file_problem(path, empty_ok=False):
            raise DataError(f"dataset.tracking_uri={redact_url(uri)}: {problem}; expected the SQLite file your app "
                            "logged its traces to")
    elif uri.startswith("file:") or "://" not in uri:
        path = Path(uri.removeprefix("file://").removeprefix("file:"))
        if not path.is_dir():
            raise DataError(f"no MLflow store at {path} (dataset.tracking_uri={redact_url(uri)})")
    try:
        return MlflowClient(tracking_uri=uri)
    except Exception as exc:  # noqa: BLE001 - a store MLflow refuses (a retired file store, an unknown scheme)
        raise DataError(f"cannot use the MLflow store {redact_url(uri)}: {' '.join(str(exc).split())[:200]}") from None


def _experiment(client: Any, uri: str, experiment: str) -> Any:
    try:
        found = client.get_experiment_by_name(str(experiment))
        if found is None and str(experiment).isdigit():
            with contextlib.suppress(Exception):
                found = client.get_experiment(str(experiment))
        if found is None:
            names = [e.name for e in client.search_experiments(max_results=20)]
    except Exception as exc:  # noqa: BLE001 - any failure to reach the store is one line
        detail = " ".join(str(exc).split())[:200]
        raise DataError(f"cannot reach the MLflow store {redact_url(uri)}: {type(exc).__name__}: {detail}") from None
    if found is None:
        there = ", ".join(repr(n) for n in names) or "none"
        raise DataError(f"dataset.experiment: no experiment {str(experiment)!r} in {redact_url(uri)} "
                        f"(experiments there: {there})")
    if getattr(found, "lifecycle_stage", "active") != "active":
        raise DataError(f"dataset.experiment: experiment {found.name!r} in {redact_url(uri)} is deleted (its traces "
                        f"are kept until the store is cleaned); restore it first (mlflow experiments restore "
                        f"--experiment-id {found.experiment_id}) to read them")
    return found


def _pages(client: Any, experiment_id: str, where: str | None, run_id: str | None, limit: int | None,
           spans: bool) -> list[Any]:
    traces: list[Any] = []
    token = None
    while limit is None or len(traces) < limit:
        size = PAGE if limit is None else min(PAGE, limit - len(traces))
        page = client.search_traces(locations=[experiment_id], filter_string=where, run_id=run_id, max_results=size,
                                    order_by=["timestamp_ms ASC"], page_token=token, include_spans=spans,
                                    flush=token is None)  # traces this process made are exported first
        traces += page
        token = page.token
        if not token:
            break
    return traces


def _traces(client: Any, experiment_id: str, where: str | None, run_id: str | None,
            limit: int | None) -> list[tuple[Any, Any]]:
    """Every trace the store lists, each with its spans read (a Trace) or why they could not be (a str).

    MLflow's search leaves out a trace whose spans it cannot load (its warning only), and one trace it cannot
    decode can fail the whole batch; so the list comes from a search without spans (metadata only), and a
    trace missing from the batch read is asked for alone (docs/traces.md, "Every trace accounted for")."""
    listed = _pages(client, experiment_id, where, run_id, limit, spans=False)
    try:
        read = {t.info.trace_id: t for t in _pages(client, experiment_id, where, run_id, None if limit is None
                                                    else len(listed), spans=True)}
    except Exception:  # noqa: BLE001 - a trace that fails the batch read: each trace is read alone below
        read = {}
    out: list[tuple[Any, Any]] = []
    for info in listed:
        trace_id = info.info.trace_id
        trace = read.get(trace_id)
        if trace is None:
            try:
                trace = client.get_trace(trace_id, display=False)
            except (Exception, RecursionError) as exc:  # noqa: BLE001 - named in the trace's record instead
                trace = f"MLflow could not load its spans: {type(exc).__name__}: {exc}"
            if trace is None:
                trace = "MLflow returned no trace for its id"
        out.append((info, trace))
    return out


def _started(pair: tuple[Any, Any]) -> tuple[int, int]:
    info, trace = pair
    spans = trace.data.spans if not isinstance(trace, str) and trace.data is not None else []
    try:
        first = min((s.start_time_ns or 0 for s in spans if s.parent_id is None), default=0)
    except Exception:  # noqa: BLE001 - a span MLflow cannot decode: read (and named) later
        first = 0
    return info.info.timestamp_ms or 0, first


def _record(mapped: Any, source: str, row: int, scales: Any) -> Any:
    """:func:`record_of`, a field nested past Python's recursion limit making the trace unreadable."""
    try:
        return record_of(mapped, source=source, row=row, scales=scales)
    except RecursionError:
        bad = unreadable(mapped.raw["trace_id"], "a field nested deeper than Python reads", record_id=mapped.raw["id"])
        mapped.raw, mapped.problems, mapped.detail = bad.raw, bad.problems, bad.detail
        return record_of(mapped, source=source, row=row, scales=scales)


def load_mlflow_traces(experiment: str, *, tracking_uri: str | None = None, run_id: str | None = None,
                       filter: str | None = None, limit: int | None = None, since: Any = None, until: Any = None,
                       query_key: str | None = None, answer_key: str | None = None, context_id: str = "id",
                       name: str = "mlflow_traces", label: bool | None = None, **split) -> Dataset:
    """Read the traces of ``experiment`` (oldest first) into records. ``tracking_uri``: null → the run's store
    (``tracking.uri``, ``$MLFLOW_TRACKING_URI``, ``./mlflow.db``); ``run_id`` / ``filter`` (MLflow's trace
    search syntax) / ``since`` / ``until`` / ``limit`` narrow the search; ``query_key`` / ``answer_key`` /
    ``context_id``: :class:`ragexp.common.spans.SpanReading`."""
    if experiment in (None, "", "???"):
        raise DataError("no experiment given: set dataset.experiment=NAME (the MLflow experiment holding your app's traces)")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DataError(f"dataset.limit must be a positive integer or null, got {limit!r}")
    reading = SpanReading(query_key=query_key, answer_key=answer_key, context_id=context_id)
    where = _filter(filter, since, until)
    uri = store_uri(tracking_uri)
    with env_defaults(_HTTP):
        client = _client(uri)
        found = _experiment(client, uri, experiment)
        try:
            traces = _traces(client, found.experiment_id, where, run_id, limit)
        except Exception as exc:  # noqa: BLE001 - a bad filter, an unknown run, a store that stopped answering
            detail = " ".join(str(exc).split())[:240]
            raise DataError(f"searching the traces of experiment {found.name!r} in {redact_url(uri)} failed: "
                            f"{detail}") from None
    source = f"{redact_url(uri)} experiment {found.name!r}"
    if not traces:
        narrowed = ", ".join(f"{k}={v!r}" for k, v in (("run_id", run_id), ("filter", where)) if v)
        raise DataError(f"no traces in experiment {found.name!r} of {redact_url(uri)}"
                        f"{' matching ' + narrowed if narrowed else ''}: log some with mlflow.<flavor>.autolog() "
                        "or @mlflow.trace first")
    traces.sort(key=_started)  # the store orders by millisecond: ties by the root span's start
    tags = [(info.info.tags or {}).get(RECORD_TAG) for info, _ in traces]
    use_tags = all(tags) and len(set(tags)) == len(tags)  # ragexp's own traces keep their record ids
    with collector_paused():
        mapped = [unreadable(info.info.trace_id, t, record_id=tag if use_tags else None) if isinstance(t, str)
                  else read_trace(t, reading, record_id=tag if use_tags else None)
                  for (info, t), tag in zip(traces, tags)]
        scales = label_scales()
        records = [_record(m, source, row, scales) for row, m in enumerate(mapped, start=1)]
    counts = count_problems(m.problems for m in mapped)
    print(f"[ragexp] {problems_line(counts, len(mapped), f'dataset mlflow_traces ({source})')}", file=sys.stderr,
          flush=True)
    for m in [m for m in mapped if m.detail][:5]:
        print(f"[ragexp] trace {m.raw['trace_id']} unreadable, kept as a record without fields: {m.detail}",
              file=sys.stderr, flush=True)
    if label is not None:
        for r in records:
            if r.label is None:
                r.label = label
    return Dataset(name=name, records=split_records(records, *split_of(split)), source=source,
                   info={"traces": len(mapped), "trace_problems": counts})


__all__ = ["load_mlflow_traces"]
