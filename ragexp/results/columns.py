"""What a run leaves for people to read, as tables: the per-sample table (one row per record: its
fields, then every metric's value, status and detail) as plain columns (:func:`per_sample_columns`;
:func:`table_columns` trims it for MLflow's table view; :func:`split_json_parts` writes either as pandas'
split JSON, so the CLI never imports pandas), the column names every reader uses
(:func:`status_column`, :func:`detail_column`), the dataset columns logged as the run's MLflow
dataset, and the digest of the questions that tells two runs over the same evaluation set apart.
"""

from __future__ import annotations

import json
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any, Iterator

from orjson import dumps as _dumps

from ragexp.metrics.base import Score
from ragexp.common.records import cluster_labels


#: The record fields of the per-sample table, in the order a reader wants them: the question, the
#: answer and its references, what was retrieved and what should have been (ids, then texts).
RECORD_COLUMNS = ("id", "query", "answer", "reference_answers", "context_ids", "gt_context_ids", "contexts",
                  "gt_contexts", "category", "context_sources")
#: Column names carry no dot: MLflow's table view reads ``a.b`` as a nested field and shows it blank
#: (checked in the MLflow 3.17 UI, where ``a/b``, ``a b``, ``a_b`` and ``a:b`` all render).
STATUS_SUFFIX, DETAIL_SUFFIX, SAMPLES_SUFFIX = "/status", "/detail", "/samples"
#: The files of a results folder: the trimmed table MLflow shows (its first ``tracking.table_rows``
#: rows), and every record whole, as Parquet.
TABLE_FILE, FULL_TABLE_FILE = "per_sample.json", "per_sample.parquet"
#: Characters of a text cell in the MLflow table (``per_sample.json``); the full text is in
#: ``per_sample.parquet``.
TRIM_CHARS = 300
ELLIPSIS = "…"


def status_column(key: str) -> str:
    """The per-sample column of metric ``key``'s status (``ok``, ``undefined``, ``missing_field``…)."""
    return f"{key}{STATUS_SUFFIX}"


def detail_column(key: str) -> str:
    """The per-sample column of metric ``key``'s detail: why it has no value, or the verdicts behind it."""
    return f"{key}{DETAIL_SUFFIX}"


def samples_column(key: str) -> str:
    """The per-sample column of metric ``key``'s k judge verdicts (``judge.samples`` > 1; docs/judge-trust.md)."""
    return f"{key}{SAMPLES_SUFFIX}"


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


def per_sample_columns(records, scores: dict[str, list[Score]], cluster_by: str | None = None) -> dict[str, list]:
    """The FULL per-sample table as plain columns (name → one value per sample, in record order): the
    record's fields in :data:`RECORD_COLUMNS` order (lists kept as lists; a field no record has is left
    out), the ``stats.cluster_by`` column when set, label, latency, a pipeline error, then each metric's
    value, status and detail. No pandas: the CLI writes it as JSON with :func:`split_json_parts`.

    :func:`frame_of` makes it a DataFrame; :func:`table_columns` trims it for MLflow's table view."""
    clusters = cluster_labels(records, cluster_by, dataset="", source="") if cluster_by else None
    # a column some rows lack is still in its place for all (blank there), so the order holds; list cells are
    # the records' own lists, not copies (100k copies cost 3 full garbage collections)
    # (a truthy value is held, so record.has is asked only of a column with none)
    columns: dict[str, list] = {}
    for f in RECORD_COLUMNS:
        values = list(map(attrgetter(f), records))
        if f in RECORD_COLUMNS[:3] or any(values) or any(r.has(f) for r in records):
            columns[f] = values
    if clusters is not None:
        columns[cluster_by] = list(clusters)
    labels, humans, latencies = (list(map(attrgetter(f), records)) for f in ("label", "human", "latency_s"))
    if labels.count(None) < len(labels):
        columns["label"] = labels
    if any(humans):  # people's labels: docs/judge-trust.md
        for key in dict.fromkeys(k for marks in humans for k in (marks or {})):
            columns[f"human/{key}"] = [(marks or {}).get(key) for marks in humans]
    if latencies.count(None) < len(latencies):
        columns["latency_s"] = latencies
    if any(map(attrgetter("extra"), records)):  # a record with keys beyond the fields
        # why a stage left a sample's fields empty; a traced app's trace, what of it was read, its retriever's scores
        for name in ("pipeline_error", "trace_id", "trace_status", "context_scores"):
            if any(r.extra.get(name) for r in records):
                columns[name] = [r.extra.get(name) or None for r in records]
        columns.update(_extra_columns(records, set(columns)))
    for key, per in scores.items():
        columns[key] = [s.value for s in per]
        columns[status_column(key)] = [s.status for s in per]
        if any(s.detail is not None for s in per):
            columns[detail_column(key)] = [None if s.detail is None else s.detail if isinstance(s.detail, str)
                                           else str(s.detail) for s in per]
        if any(s.samples and len(s.samples) > 1 for s in per):  # the k verdicts a paired comparison redraws
            columns[samples_column(key)] = [None if s.samples is None else list(s.samples) for s in per]
    return columns


def _extra_columns(records, taken: set[str]) -> dict[str, list]:
    """The records' other input keys (docs/records.md: kept, not scored), one column each in first-seen order:
    a dot in a key becomes ``_`` (see :data:`STATUS_SUFFIX`); a column whose values are not all of one plain type
    (text, number, boolean) holds each value as JSON text, so the Parquet table takes it."""
    out: dict[str, list] = {}
    keys = dict.fromkeys(k for r in records for k in r.extra if not str(k).startswith("_"))
    for key in keys:
        name = str(key).replace(".", "_")
        if name in taken or name in out or key in ("pipeline_error", "trace_id", "trace_status", "context_scores"):
            continue
        values = [r.extra.get(key) for r in records]
        kinds = {type(v) for v in values if v is not None}
        if len(kinds) > 1 or not kinds <= {str, int, float, bool}:
            values = [None if v is None else v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
                      for v in values]
        out[name] = values
    return out


def frame_of(columns: dict[str, list]):
    """A pandas DataFrame of plain columns, one row per sample, in column order (``ragexp.evaluate``'s
    ``per_sample`` is the frame of :func:`per_sample_columns`)."""
    import pandas as pd

    return pd.DataFrame(columns, columns=list(columns))


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


#: The list columns whose cells are passages: numbered in the trimmed table (``[1] … [2] …``)
TEXT_LIST_COLUMNS = ("contexts", "gt_contexts", "reference_answers")


def table_columns(full: dict[str, list]) -> dict[str, list]:
    """The per-sample columns as MLflow's table view shows them: every text cut to :data:`TRIM_CHARS`
    with an ellipsis, list cells as one string (``p1, p4``; ``[1] first passage [2] …``). Numbers,
    statuses and ids are never cut."""
    return {name: values if name == "id" or name.endswith(SAMPLES_SUFFIX)
            else [_cell(v, name in TEXT_LIST_COLUMNS) for v in values]
            for name, values in full.items()}


def split_json_parts(columns: dict[str, list], rows_per_part: int = 1000) -> Iterator[str]:
    """Plain columns as the JSON of pandas' ``to_json(orient="split", index=False)`` — the layout of an
    MLflow table (``{"columns": [...], "data": [[row], ...]}``): a missing or non-finite number is
    ``null``, text ASCII with ``\\u`` escapes, floats to their shortest exact digits; in pieces of
    ``rows_per_part`` rows, to write one after the other."""
    yield '{"columns":' + json.dumps(list(columns), separators=(",", ":")) + ',"data":['
    rows = zip(*columns.values())
    first = True
    while part := list(islice(rows, rows_per_part)):
        text = json.dumps([[_json_cell(v) for v in row] for row in part], separators=(",", ":"), allow_nan=False,
                          default=str)[1:-1]
        yield text if first else "," + text
        first = False
    yield "]}"


def table_note(n: int, rows: int | None) -> str | None:
    """What the description says when ``per_sample.json`` shows only part of the run (None: all of it)."""
    if rows is None or n <= rows:
        return None
    return (f"`{TABLE_FILE}` (the table view) shows the first {rows:,} of {n:,} samples "
            f"(`tracking.table_rows`); `{FULL_TABLE_FILE}` holds every sample whole.")


def _json_cell(value: Any) -> Any:
    """A cell JSON can hold: NaN and infinities are ``null`` (as pandas writes them), numpy scalars plain."""
    if isinstance(value, float):
        return value if value - value == 0 else None  # nan - nan and inf - inf are nan
    if isinstance(value, (list, tuple)):
        return [_json_cell(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_cell(v) for k, v in value.items()}
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy's int64, bool_, float32
        return _json_cell(value.item())
    return value


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


#: The fields of :func:`answers_digest`
ANSWER_FIELDS = ("id", "answer")


def answers_digest(records) -> str:
    """A digest of the answers alone, per sample in order: jobs of a sweep with equal digests gave the same
    answers, so no metric of the answer can tell them apart (the leaderboard then ranks on the retrieval)."""
    return _fields_digest(records, ANSWER_FIELDS)


def _fields_digest(records, fields) -> str:
    digest = FieldsDigest(fields)
    digest.update(records)
    return digest.hexdigest()


class FieldsDigest:
    """:func:`questions_digest` (``QUESTION_FIELDS``) or :func:`outputs_digest` (``("id", *OUTPUT_FIELDS)``)
    taken chunk by chunk: ``update`` with the records in order, then ``hexdigest`` — the same value as over
    the whole list at once (a streamed run never holds it). It hashes one line a record: the record's
    ``fields`` as ``json.dumps([...], ensure_ascii=False, default=str)``, then a newline (SHA-256, 16 hex digits)."""

    def __init__(self, fields) -> None:
        import hashlib

        self.fields = tuple(fields)
        self._hash = hashlib.sha256()

    def update(self, records) -> None:
        update_digests(records, self)

    def hexdigest(self) -> str:
        return self._hash.hexdigest()[:16]


def update_digests(records, *digests: FieldsDigest) -> None:
    """``digest.update(records)`` for each of ``digests`` in one pass over the records: a field several
    digests hash (``id``, ``answer``) is encoded once, and each digest's line is joined from those bytes
    (``json.dumps([a, b])`` is ``"[" + json.dumps(a) + ", " + json.dumps(b) + "]"``)."""
    fields = tuple(dict.fromkeys(f for d in digests for f in d.fields))
    get = attrgetter(*fields) if len(fields) > 1 else (lambda r, g=attrgetter(*fields): (g(r),))
    lines = [(d._hash.update, _line_format(len(d.fields)), _picker([fields.index(f) for f in d.fields]))
             for d in digests]
    encode = json.JSONEncoder(ensure_ascii=False, default=str).encode  # json.dumps with these options
    for r in records:
        values = get(r)
        try:  # None and a text straight to orjson (b"null", the quoted text), the rest by _json_value
            parts = [_dumps(v) if v is None or type(v) is str else _json_value(v, encode) for v in values]
        except TypeError:  # a text orjson refuses (a lone surrogate): json's own error, as before
            parts = [encode(v).encode() for v in values]
        for update, line, pick in lines:
            update(line % pick(parts))


def _line_format(n: int) -> bytes:
    """A digest's line of ``n`` encoded values: ``[v1, v2]`` and a newline."""
    return b"[" + b", ".join([b"%b"] * n) + b"]\n"


def _picker(indices: list[int]):
    """A function of a record's encoded values to the tuple of those at ``indices``, in order."""
    return itemgetter(*indices) if len(indices) > 1 else (lambda parts, i=indices[0]: (parts[i],))


def _json_value(value: Any, encode: Any) -> bytes:
    """``encode(value).encode()``: ``json.dumps(value, ensure_ascii=False, default=str)`` as UTF-8. None, a
    text and a list of texts are written by orjson, whose escapes of a text are ``json.dumps``'s byte for byte
    (every code point: tests/test_per_sample_table.py), the items of a list joined by ``", "`` as ``json.dumps``
    does (orjson writes ``","``); anything else by ``encode``. A text orjson refuses (a lone surrogate, not
    valid UTF-8) raises TypeError. orjson keeps a non-ASCII text's UTF-8 inside the str, as pyarrow does when a
    run saves its table: a run in memory that saves nothing holds that much more (docs/performance.md)."""
    if value is None or type(value) is str:
        return _dumps(value)
    if type(value) is list:
        items = [_dumps(x) for x in value if type(x) is str]
        if len(items) == len(value):
            return b"[" + b", ".join(items) + b"]"
    return encode(value).encode()
