"""A streamed run (execution.mode=stream: records read, scored and written in chunks, docs/performance.md
"Scale") gives what the in-memory run gives, value for value: every per-sample cell, aggregate, status
count, interval, the agreement with the labels, the results folder's tables and what is logged."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import record, write_records  # noqa: E402

import ragexp  # noqa: E402
from ragexp.results.tables import read_parquet_columns  # noqa: E402

#: what differs between two runs of the same numbers: the time taken, how the run was carried out, where
VARYING = ("seconds", "execution", "results_folder", "run_id", "tracking_uri")


def _same_summary(a: dict, b: dict) -> None:
    a = {k: v for k, v in a.items() if k not in VARYING}
    b = {k: v for k, v in b.items() if k not in VARYING}
    assert json.dumps(a, sort_keys=True, default=str) == json.dumps(b, sort_keys=True, default=str)


@pytest.mark.slow
def test_streamed_evaluate_equals_in_memory_on_20k_records(tmp_path):
    path = write_records(tmp_path / "records.jsonl", 20_000)
    streamed = ragexp.evaluate(path, log=False, execution={"mode": "stream"})
    memory = ragexp.evaluate(path, log=False, execution={"mode": "memory"})
    assert streamed.summary["execution"]["mode"] == "stream" and "execution" not in memory.summary
    _same_summary(streamed.summary, memory.summary)
    assert streamed.summary["agreement"]["keyword_verdict"]["n"] > 10_000  # the labels were compared
    assert streamed.metrics.equals(memory.metrics)  # values, intervals (one shared draw), stderr, n
    assert list(streamed.per_sample.columns) == list(memory.per_sample.columns)
    assert streamed.per_sample.equals(memory.per_sample)


def _uneven(path: Path, n: int) -> Path:
    """Realistic records where later chunks bring what the first lack: no latency in the first quarter, a
    whole-number latency (an int among floats), a record without a label, no references in one."""
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            r = record(i)
            if i < n // 4:
                del r["latency_s"]
            if i == n * 7 // 12:
                r["latency_s"] = 2
            if i == n * 3 // 4:
                del r["label"]
            if i == n * 19 // 24:
                r["reference_answers"] = []
            fh.write(json.dumps(r) + "\n")
    return path


def test_streamed_results_folder_equals_in_memory(tmp_path, monkeypatch):
    """In the default selection (issue 39: one path, and the tests that say so run every time): 480 records
    in chunks of 100 on two processes against the same records in memory, logged to one store."""
    monkeypatch.chdir(tmp_path)
    path = _uneven(tmp_path / "records.jsonl", 480)
    store = f"sqlite:///{tmp_path}/mlflow.db"
    common = dict(log=store, tracking={"table_rows": 200, "plots": False, "traces": 0}, stats={"resamples": 1000})
    streamed = ragexp.evaluate(path, execution={"mode": "stream", "chunk_records": 100, "processes": 2}, **common)
    memory = ragexp.evaluate(path, execution={"mode": "memory"}, **common)
    assert streamed.summary["execution"] == {"mode": "stream", "chunk_records": 100, "processes": 2}
    _same_summary(streamed.summary, memory.summary)
    a, b = Path(streamed.summary["results_folder"]), Path(memory.summary["results_folder"])
    assert (a / "per_sample.json").read_text() == (b / "per_sample.json").read_text()
    assert read_parquet_columns(a / "per_sample.parquet") == read_parquet_columns(b / "per_sample.parquet")
    assert (a / "agreement.json").read_text() == (b / "agreement.json").read_text()
    ma, mb = (json.loads((f / "mlflow_run.json").read_text()) for f in (a, b))
    for key in ("params", "metrics", "dataset", "experiment"):
        assert ma[key] == mb[key], key
    assert not list(a.glob(".*part*"))  # no part file left behind
    assert streamed.per_sample.equals(memory.per_sample)
    assert streamed.run_id and memory.run_id and streamed.run_id != memory.run_id


def test_a_bad_row_stops_a_streamed_run_before_any_scoring(tmp_path):
    path = write_records(tmp_path / "records.jsonl", 600, broken=True)
    with pytest.raises(ragexp.errors.DataError) as err:
        ragexp.evaluate(path, log=False, execution={"mode": "stream", "chunk_records": 100})
    assert "row 301" in str(err.value) or ":301" in str(err.value)


@pytest.mark.parametrize("override, said", [
    ("execution=ray", "execution.mode=ray: the dataset is not read from a file (dataset.path); this run is scored "
                      "in memory"),
    ("execution.mode=stream", "execution.mode=stream: the dataset is not read from a file (dataset.path); this run "
                              "is scored in memory"),
    ("execution=local", None)])
def test_a_run_that_asked_for_chunks_says_when_it_is_scored_in_memory(compose, capsys, override, said):
    # python -m ragexp execution=ray on the demo (no file: the package's copy) ran in memory without a word
    from ragexp.workflow.runner import execute

    execute(compose(override, "metric=answer_token_f1", "tracking.enabled=false"), save=False, show=False)
    err = capsys.readouterr().err
    assert (said in err) if said else "scored in memory" not in err
