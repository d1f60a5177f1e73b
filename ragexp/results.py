"""What a run leaves for people to read, as tables: the per-sample frame (one row per record: its
fields, then every metric's value, status and detail; :func:`table_frame` trims it for MLflow's
table view), the column names every reader uses (:func:`status_column`, :func:`detail_column`), the
dataset frame logged as the run's MLflow dataset, and the
digest of the questions that tells two runs over the same evaluation set apart from others.
"""

from __future__ import annotations

from typing import Any

from .metrics.base import Score
from .records import FIELDS
from .scoring import cluster_labels


#: The record fields of the per-sample table, in the order a reader wants them: the question, the
#: answer and its references, what was retrieved and what should have been (ids, then texts).
RECORD_COLUMNS = ("id", "query", "answer", "reference_answers", "context_ids", "gt_context_ids", "contexts",
                  "gt_contexts")
#: Column names carry no dot: MLflow's table view reads ``a.b`` as a nested field and shows it blank
#: (checked in the MLflow 3.17 UI, where ``a/b``, ``a b``, ``a_b`` and ``a:b`` all render).
STATUS_SUFFIX, DETAIL_SUFFIX = "/status", "/detail"
#: The files of a results folder: the trimmed table MLflow shows, and every record whole.
TABLE_FILE, FULL_TABLE_FILE = "per_sample.json", "per_sample_full.json"
#: Characters of a text cell in the MLflow table (``per_sample.json``); the full text is in
#: ``per_sample_full.json``.
TRIM_CHARS = 300
ELLIPSIS = "…"


def status_column(key: str) -> str:
    """The per-sample column of metric ``key``'s status (``ok``, ``undefined``, ``missing_field``…)."""
    return f"{key}{STATUS_SUFFIX}"


def detail_column(key: str) -> str:
    """The per-sample column of metric ``key``'s detail: why it has no value, or the verdicts behind it."""
    return f"{key}{DETAIL_SUFFIX}"


def metric_keys(columns) -> list[str]:
    """The metric keys of a per-sample table, in column order: every ``K`` with a status column."""
    have = set(columns)
    return [c for c in columns if status_column(c) in have]


def current_columns(columns) -> list[str]:
    """Column names of a table logged before the slash scheme (``K.status``, ``K.detail``) in today's
    names, so older runs stay comparable; other names are unchanged."""
    have = set(columns)
    out = []
    for c in columns:
        for old, new in ((".status", status_column), (".detail", detail_column)):
            if c.endswith(old) and c[: -len(old)] in have:
                c = new(c[: -len(old)])
                break
        out.append(c)
    return out


def per_sample_frame(records, scores: dict[str, list[Score]], cluster_by: str | None = None):
    """The FULL per-sample table, one row per sample: the record's fields in :data:`RECORD_COLUMNS`
    order (lists kept as lists; a field no record has is left out), the ``stats.cluster_by`` column
    when set, label, latency, a pipeline error, then each metric's value, status and detail.

    :func:`table_frame` makes the trimmed copy logged as the MLflow table."""
    import pandas as pd

    clusters = cluster_labels(records, cluster_by, dataset="", source="") if cluster_by else None
    present = [f for f in RECORD_COLUMNS[3:] if any(r.has(f) for r in records)]
    # a column some rows lack is still in its place for all (blank there), so the order holds
    label = any(r.label is not None for r in records)
    latency = any(r.latency_s is not None for r in records)
    failed = any(r.extra.get("pipeline_error") for r in records)
    details = [key for key, per in scores.items() if any(s.detail is not None for s in per)]
    rows = []
    for i, r in enumerate(records):
        row: dict[str, Any] = {"id": r.id, "query": r.query, "answer": r.answer}
        for f in present:
            value = getattr(r, f)
            row[f] = list(value) if value is not None else None
        if clusters is not None:
            row[cluster_by] = clusters[i]
        if label:
            row["label"] = r.label
        if latency:
            row["latency_s"] = r.latency_s
        if failed:  # why a stage left this sample's fields empty
            row["pipeline_error"] = r.extra.get("pipeline_error") or None
        for key, per in scores.items():
            s = per[i]
            row[key] = s.value
            row[status_column(key)] = s.status
            if key in details:
                row[detail_column(key)] = None if s.detail is None else s.detail if isinstance(s.detail, str) \
                    else str(s.detail)
        rows.append(row)
    return pd.DataFrame(rows)


def trim(text: Any, width: int = TRIM_CHARS) -> Any:
    """``text`` cut to ``width`` characters, the cut said with an ellipsis; other values unchanged."""
    if not isinstance(text, str) or len(text) <= width:
        return text
    return text[: width - 1].rstrip() + ELLIPSIS


def _cell(value: Any, texts: bool) -> Any:
    """A list cell as one string for the table: ids joined by commas, passages numbered."""
    if not isinstance(value, (list, tuple)):
        return trim(value)
    if texts:
        return trim(" ".join(f"[{i}] {v}" for i, v in enumerate(value, 1)))
    return trim(", ".join(str(v) for v in value))


def table_frame(full):
    """The per-sample table as MLflow's table view shows it: the columns of :func:`per_sample_frame`,
    every text cut to :data:`TRIM_CHARS` with an ellipsis, list cells as one string (``p1, p4``;
    ``[1] first passage [2] …``). Numbers, statuses and ids are never cut."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    out = full.copy()
    for col in out.columns:
        if col == "id" or is_numeric_dtype(out[col]) or is_bool_dtype(out[col]):
            continue
        texts = col in ("contexts", "gt_contexts", "reference_answers")
        out[col] = [_cell(v, texts) for v in out[col]]
    return out


def dataset_frame(records):
    import pandas as pd

    return pd.DataFrame([{f: getattr(r, f) for f in FIELDS if r.has(f)} for r in records])


#: The fields a system under test does not write: runs that agree on them asked the same questions.
QUESTION_FIELDS = ("id", "query", "reference_answers", "gt_contexts", "gt_context_ids")


#: The fields the system under test writes: runs that agree on them gave the same outputs.
OUTPUT_FIELDS = ("contexts", "context_ids", "answer")


def questions_digest(records) -> str:
    """A digest of the evaluation set's inputs: ids, questions, references and ground truths, not
    the system's outputs. It is the run's MLflow dataset digest (``dataset_digest`` in
    ``summary.json`` holds the same value), so every job of a sweep over one dataset shows one
    dataset; ``python -m ragexp.compare`` refuses runs where it differs."""
    return _fields_digest(records, QUESTION_FIELDS)


def outputs_digest(records) -> str:
    """A digest of what the system under test produced (retrieved contexts and their ids, answers),
    per sample in order: two runs with equal digests gave the same outputs on the same samples.
    Latencies are left out (they change on every run of the same system). Tag ``ragexp.outputs_digest``."""
    return _fields_digest(records, ("id", *OUTPUT_FIELDS))


def _fields_digest(records, fields) -> str:
    import hashlib
    import json

    h = hashlib.sha256()
    for r in records:
        h.update(json.dumps([getattr(r, f) for f in fields], ensure_ascii=False, default=str).encode())
        h.update(b"\n")
    return h.hexdigest()[:16]
