"""Issue 41, groups 1-5: traces and stores a hostile user hands to ``dataset=mlflow_traces`` and the UI.

Span parents that loop or nest past any bound end the walk (``span_loop``); a trace MLflow's batch read
leaves out or cannot decode keeps its record (``unreadable_trace``, its reason and id said); a foreign,
empty or non-database SQLite file is refused before MLflow opens it, left byte for byte as it was; a
deleted experiment is refused in one line. The quick ones read real MLflow entities in-process; one
process run each for the CLI and the UI."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sqlite3
import subprocess
import sys
import time

import pytest
from mlflow.entities import Trace

from ragexp.common.spans import MAX_DEPTH, read_trace
from ragexp.errors import RagexpError

from cli import run_cli


def _sid(i: int) -> str:
    return base64.b64encode(i.to_bytes(8, "big")).decode()


def _span(i: int, parent: int | None, kind: str = "CHAIN", **attributes) -> dict:
    attrs = {"mlflow.traceRequestId": json.dumps("tr-1"), "mlflow.spanType": json.dumps(kind)}
    attrs.update({k: v if isinstance(v, str) and k.startswith("mlflow.") else json.dumps(v)
                  for k, v in attributes.items()})
    return {"trace_id": base64.b64encode(b"\x01" * 16).decode(), "span_id": _sid(i),
            "parent_span_id": None if parent is None else _sid(parent), "name": f"s{i}",
            "start_time_unix_nano": 1_000 + i, "end_time_unix_nano": 2_000_000_000 + i, "events": [],
            "status": {"code": "STATUS_CODE_OK", "message": ""}, "attributes": attrs, "links": []}


def _trace(spans: list[dict]) -> Trace:
    return Trace.from_dict({"info": {"trace_id": "tr-1", "trace_location": {"type": "MLFLOW_EXPERIMENT",
                                     "mlflow_experiment": {"experiment_id": "1"}},
                                     "request_time": "2026-12-06T17:00:00.000Z", "state": "OK"},
                            "data": {"spans": spans}})


def _retriever(i: int, parent: int) -> dict:
    return _span(i, parent, "RETRIEVER", **{"mlflow.spanOutputs": json.dumps([{"page_content": "doc", "id": "d1"}])})


def _root(i: int = 1, **attributes) -> dict:
    attributes.setdefault("mlflow.spanInputs", json.dumps({"query": "q"}))
    attributes.setdefault("mlflow.spanOutputs", json.dumps("a"))
    return _span(i, None, **attributes)


@pytest.mark.parametrize("loop", [1, 2, 3, 17])
def test_a_parent_loop_above_a_retriever_ends_the_walk(loop):
    """Spans 10..10+loop-1 point at each other in a ring (1: a span its own parent); a retriever and an
    embedding span hang under the ring; a root stands apart. Read in finite time, the loop said."""
    ring = [_span(10 + k, 10 + (k + 1) % loop) for k in range(loop)]
    spans = [_root(), *ring, _retriever(50, 10), _span(51, 10 + loop - 1, "EMBEDDING")]
    mapped = read_trace(_trace(spans))
    assert "span_loop" in mapped.problems and mapped.raw["context_ids"] == ["d1"]
    assert mapped.raw["query"] == "q" and "embed" in mapped.raw["timings"]


def test_no_root_and_a_chain_deeper_than_the_bound():
    ring = [_span(10, 11), _span(11, 10), _retriever(12, 11)]
    mapped = read_trace(_trace(ring))
    assert mapped.problems == ["no_root_span"]  # nothing is read without a root: the record says why
    depth = MAX_DEPTH + 20  # a retriever under a chain deeper than the bound, a retriever at its top
    chain = [_root(0), _retriever(1, 0)] + [_span(i, i - 1) for i in range(2, depth)] + [_retriever(depth, depth - 1)]
    mapped = read_trace(_trace(chain))  # the walk up from the deep one stops at the bound: read as outermost
    assert mapped.problems == ["span_loop"] and mapped.raw["context_ids"] == ["d1", "d1"]


@pytest.mark.parametrize("depth", [1_100, 100_000])
def test_a_deep_json_input_keeps_the_record(depth):
    """OpenInference's ``input.value`` holding JSON nested past Python's parser: read as text, not a crash."""
    deep = "[" * depth + '"q"' + "]" * depth
    spans = [_span(1, None, **{"input.value": deep, "output.value": "[" * depth + "]" * depth}), _retriever(2, 1)]
    mapped = read_trace(_trace(spans))
    assert mapped.raw["query"] == deep and mapped.raw["context_ids"] == ["d1"]


def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture()
def not_stores(tmp_path):
    """A customers database, an empty file, a text file and a half-created store (alembic's table only)."""
    foreign = tmp_path / "customers.db"
    con = sqlite3.connect(foreign)
    con.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO customers (name) VALUES ('Ada'), ('Grace')")
    con.commit(), con.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    text = tmp_path / "notes.db"
    text.write_text("not a database\n" * 40)
    half = tmp_path / "half.db"
    con = sqlite3.connect(half)
    con.execute("CREATE TABLE alembic_version (version_num VARCHAR(32))")
    con.commit(), con.close()
    return [foreign, empty, text, half]


def test_files_that_are_no_store_are_refused_untouched(not_stores):
    from ragexp.datasets.mlflow_traces import load_mlflow_traces
    from ragexp.tracking.store import require_existing_store

    for path in not_stores:
        before = _sha(path)
        for opener in (lambda: load_mlflow_traces("app", tracking_uri=f"sqlite:///{path}"),
                       lambda: require_existing_store(f"sqlite:///{path}")):
            with pytest.raises(RagexpError) as err:
                opener()
            assert str(path) in str(err.value) and "\n" not in str(err.value)
        assert _sha(path) == before, path
        assert not list(path.parent.glob("mlruns")) and not list(path.parent.glob("*-journal"))


def _store(tmp_path):
    """An app's store: a good trace, one whose spans loop, one MLflow's batch read drops (its spans said to
    be in the artifact store, where there are none), one whose root holds a 100k-deep JSON input; and a
    deleted experiment."""
    import mlflow

    db = tmp_path / "app.db"
    uri = f"sqlite:///{db}"
    client = mlflow.MlflowClient(uri)
    from mlflow.entities.trace_location import MlflowExperimentLocation

    where = MlflowExperimentLocation(client.create_experiment("app"))
    gone = MlflowExperimentLocation(client.create_experiment("gone"))
    before = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
    mlflow.set_tracking_uri(uri)
    ids = {}
    try:
        for kind, dest in (("ok", where), ("loop", where), ("dropped", where), ("deep", where), ("old", gone)):
            with mlflow.start_span("root", span_type="CHAIN", trace_destination=dest) as root:
                root.set_inputs({"query": f"question {kind}"})
                with mlflow.start_span("a") as a, mlflow.start_span("b") as b:
                    with mlflow.start_span("ret", span_type="RETRIEVER") as r:
                        r.set_outputs([{"page_content": "doc", "id": "d1"}])
                if kind == "deep":
                    root.set_attribute("input.value", "[" * 100_000 + "]" * 100_000)
                root.set_outputs("answer")
            ids[kind] = (root.trace_id, a.span_id, b.span_id)
        mlflow.flush_trace_async_logging()
    finally:
        mlflow.set_tracking_uri(before)
    client.delete_experiment(gone.experiment_id)
    con = sqlite3.connect(db)
    tid, a, b = ids["loop"]
    row = con.execute("SELECT content FROM spans WHERE trace_id=? AND span_id=?", (tid, a)).fetchone()
    content, b_id = json.loads(row[0]), base64.b64encode(bytes.fromhex(b)).decode()
    content["parent_span_id"] = b_id
    con.execute("UPDATE spans SET parent_span_id=?, content=? WHERE trace_id=? AND span_id=?",
                (b, json.dumps(content), tid, a))
    for _ in range(100):  # the exporter's last write may still be on its way
        moved = con.execute("UPDATE trace_tags SET value='ARTIFACT_REPO' WHERE key='mlflow.trace.spansLocation' "
                            "AND request_id=?", (ids["dropped"][0],)).rowcount
        con.commit()
        if moved:
            break
        time.sleep(0.1)
    con.close()
    assert moved == 1
    return uri, {k: v[0] for k, v in ids.items()}


@pytest.mark.integration
def test_every_trace_accounted_for_and_stores_refused(tmp_path, not_stores):
    uri, ids = _store(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    proc = run_cli("dataset=mlflow_traces", "dataset.experiment=app", f"dataset.tracking_uri={uri}",
                   "metric=avg_latency", "tracking.enabled=false", cwd=out,
                   timeout=300)
    said = proc.stdout + proc.stderr
    assert "Traceback" not in said and "4 trace(s)" in said and "span_loop" in said and "unreadable_trace" in said
    assert ids["dropped"] in said and ids["deep"] in said  # named, with MLflow's reason
    import pandas as pd

    table = pd.read_parquet(next(out.rglob("per_sample.parquet")))
    assert set(table["trace_id"]) == {ids[k] for k in ("ok", "loop", "dropped", "deep")}
    status = dict(zip(table["trace_id"], table["trace_status"]))
    assert status[ids["ok"]] == "ok" and status[ids["loop"]].startswith("span_loop")
    assert status[ids["dropped"]].startswith("unreadable_trace (")
    # the deleted experiment, the foreign / empty files: one line, exit 2, files unchanged
    proc = run_cli("dataset=mlflow_traces", "dataset.experiment=gone", f"dataset.tracking_uri={uri}",
                   "tracking.enabled=false", cwd=out, check=False)
    assert proc.returncode == 2 and "is deleted" in proc.stderr and "Traceback" not in proc.stderr
    shas = {p: _sha(p) for p in not_stores}
    proc = run_cli("dataset=mlflow_traces", "dataset.experiment=app", f"dataset.tracking_uri=sqlite:///{not_stores[0]}",
                   "tracking.enabled=false", cwd=out, check=False)
    assert proc.returncode == 2 and "another program" in proc.stderr and "Traceback" not in proc.stderr
    # the UI, directly and through a results folder's mlflow_run.json
    folder = tmp_path / "results"
    folder.mkdir()
    (folder / "mlflow_run.json").write_text(json.dumps({"tracking_uri": f"sqlite:///{not_stores[1]}"}))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    garbled = tmp_path / "garbled"
    garbled.mkdir()
    (garbled / "mlflow_run.json").write_bytes(b"\xff\x00 not json")
    for arg in (f"tracking.uri=sqlite:///{not_stores[2]}", f"folder={folder}", f"folder={garbled}"):
        proc = subprocess.run([sys.executable, "-m", "ragexp.ui", arg, "port=0"], cwd=out, env=env, text=True,
                              capture_output=True, timeout=120)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.count("\n") == 1 and any(w in proc.stderr for w in ("not an SQLite", "empty", "cannot be read"))
    assert {p: _sha(p) for p in not_stores} == shas
