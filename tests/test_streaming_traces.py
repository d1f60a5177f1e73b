"""A streamed run (execution.mode=stream) logs the MLflow traces the in-memory run logs for the same records
(docs/traces.md): the same samples chosen, with the same spans, timings, feedback and expectations on each."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import record  # noqa: E402

import ragexp  # noqa: E402


def _records(path: Path, n: int) -> Path:
    """Realistic records, some with stage timings, some lacking what a metric needs (statuses other than ok)."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            r = record(i)
            if i % 3 == 0:
                r["timings"] = {"retrieve": 0.01 * (i % 7), "generate": 0.25 + i / 1000, "total": 0.5 + i / 1000}
            if i % 40 == 7:
                r["reference_answers"] = []
            if i % 50 == 11:
                r["contexts"], r["context_ids"] = [], []
            fh.write(json.dumps(r) + "\n")
    return path


def _logged(uri: str, run_id: str) -> tuple[str, list]:
    """The run's ``ragexp.traces`` tag and its traces as comparable data, in record order."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    run = mlflow.MlflowClient(uri).get_run(run_id)
    out = []
    for trace in mlflow.search_traces(locations=[run.info.experiment_id], run_id=run_id, return_type="list"):
        root = next(s for s in trace.data.spans if s.parent_id is None)
        spans = [(s.name, s.span_type, s.inputs, s.outputs, s.attributes.get("ragexp.seconds"),
                  json.dumps(s.attributes.get("ragexp.scores"), sort_keys=True),
                  s.end_time_ns - s.start_time_ns if s is not root else None)
                 for s in sorted(trace.data.spans, key=lambda s: (s.parent_id is not None, s.start_time_ns, s.name))]
        marks = sorted((a.name, json.dumps(a.value, sort_keys=True), a.error and a.error.error_code,
                        a.source.source_type, a.source.source_id, a.rationale, json.dumps(a.metadata, sort_keys=True))
                       for a in trace.info.assessments)
        tags = {k: v for k, v in trace.info.tags.items() if k.startswith("ragexp.") and k != "ragexp.run_id"}
        out.append((tags["ragexp.record_id"], tags, spans, marks))
    return run.data.tags.get("ragexp.traces"), sorted(out)


@pytest.mark.integration
def test_a_streamed_run_logs_the_traces_of_the_in_memory_run(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _records(tmp_path / "records.jsonl", 600)
    store = f"sqlite:///{tmp_path}/mlflow.db"
    common = dict(log=store, tracking={"traces": 24, "plots": False, "table_rows": 50}, stats={"resamples": 200})
    streamed = ragexp.evaluate(path, execution={"mode": "stream", "chunk_records": 100, "processes": 1}, **common)
    memory = ragexp.evaluate(path, execution={"mode": "memory"}, **common)
    assert streamed.summary["execution"]["mode"] == "stream" and "execution" not in memory.summary
    tag, traces = _logged(store, streamed.run_id)
    assert (tag, traces) == _logged(store, memory.run_id)
    assert tag == "24 of 600" and len(traces) == 24
    assert any(m[2] for _, _, _, marks in traces for m in marks)  # a status other than ok reached a trace
    assert any(s[4] for _, _, spans, _ in traces for s in spans)  # and a stage's timing
