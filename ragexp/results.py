"""What a run leaves for people to read, as tables: the per-sample frame (one row per record, every
metric's value, status and detail), the dataset frame logged as the run's MLflow dataset, and the
digest of the questions that tells two runs over the same evaluation set apart from others.
"""

from __future__ import annotations

from typing import Any

from .metrics.base import Score
from .records import FIELDS
from .scoring import cluster_labels


def per_sample_frame(records, scores: dict[str, list[Score]], cluster_by: str | None = None):
    """One row per sample: id, query, answer (the ``stats.cluster_by`` column when set), then each
    metric's value, status and detail."""
    import pandas as pd

    clusters = cluster_labels(records, cluster_by, dataset="", source="") if cluster_by else None
    rows = []
    for i, r in enumerate(records):
        row: dict[str, Any] = {"id": r.id, "query": r.query, "answer": r.answer}
        if clusters is not None:
            row[cluster_by] = clusters[i]
        if r.label is not None:
            row["label"] = r.label
        if r.latency_s is not None:
            row["latency_s"] = r.latency_s
        if r.extra.get("pipeline_error"):
            row["pipeline_error"] = r.extra["pipeline_error"]  # why a stage left this sample's fields empty
        for key, per in scores.items():
            s = per[i]
            row[key] = s.value
            row[f"{key}.status"] = s.status
            if s.detail is not None:
                row[f"{key}.detail"] = s.detail if isinstance(s.detail, str) else str(s.detail)
        rows.append(row)
    return pd.DataFrame(rows)


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
