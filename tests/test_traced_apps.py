"""Traced apps as ragexp's input (docs/traced-apps.md): a real LangChain chain and a real LlamaIndex query
engine, traced by ``mlflow.langchain.autolog()`` / ``mlflow.llama_index.autolog()``, read back through
``dataset=mlflow_traces`` and run by ``pipeline=traced``; the contexts, ids and answers in ragexp's
per-sample table equal what the apps' retrievers and the apps returned. Then traces ragexp cannot read
whole (hand-built with ``mlflow.start_span``): each keeps its record and says why; a store or an
experiment that is not there is one line."""

from __future__ import annotations

from types import SimpleNamespace

import mlflow
import pytest
import traced_apps
from cli import free_port, run_cli

import ragexp
from ragexp.common.spans import problems_line
from ragexp.datasets.mlflow_traces import load_mlflow_traces
from ragexp.errors import ConfigError, DataError

QUESTIONS = ["How many queens does a honeybee colony hold?", "What does the waggle dance tell the other bees?",
             "Why is sourdough bread sour?", "How far away is the Moon?", "Who invented the safety bicycle?"]


@pytest.fixture(scope="module")
def store_uri(tmp_path_factory):
    """One SQLite MLflow store for the module (creating one costs seconds); each test its own experiment."""
    return f"sqlite:///{tmp_path_factory.mktemp('store') / 'mlflow.db'}"


@pytest.fixture
def store(store_uri, request):
    """The module's store as the active one, with an experiment of the test's own (``store.experiment``); the
    caller's store restored after (a test turning autologging on turns it off)."""
    before = mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(store_uri)
    experiment = f"my-app {request.node.name}"
    mlflow.set_experiment(experiment)
    yield SimpleNamespace(uri=store_uri, experiment=experiment)
    mlflow.set_tracking_uri(before)


def _texts_and_ids(docs):
    return [d.page_content for d in docs], [d.id for d in docs]


@pytest.mark.slow
def test_a_langchain_apps_traces_become_records_with_what_its_retriever_returned(store):
    chain = traced_apps.langchain_app(k=3)
    mlflow.langchain.autolog()
    try:
        answers = [chain.invoke(q) for q in QUESTIONS]
    finally:
        mlflow.langchain.autolog(disable=True)
    retriever = traced_apps.langchain_retriever(k=3)  # the same retriever, asked directly
    expected = [_texts_and_ids(retriever.invoke(q)) for q in QUESTIONS]

    ds = load_mlflow_traces(store.experiment, tracking_uri=store.uri)
    assert [r.query for r in ds.records] == QUESTIONS  # oldest first
    assert [r.answer for r in ds.records] == answers == traced_apps.ANSWERS  # "" too: an empty answer is an answer
    assert [(r.contexts, r.context_ids) for r in ds.records] == expected
    assert all(len(r.contexts) == 3 for r in ds.records)
    for r in ds.records:
        assert r.extra["trace_status"] == "ok" and r.id == r.extra["trace_id"]
        assert set(r.timings) >= {"retrieve", "generate", "total"} and r.latency_s == r.timings["total"]
        assert r.timings["retrieve"] < r.timings["total"]


@pytest.mark.slow
def test_a_llama_index_engines_traces_become_records_with_its_source_nodes(store):
    engine = traced_apps.llama_index_app(k=2)  # built before autologging: its index's embedding calls are no question
    mlflow.llama_index.autolog()
    try:
        responses = [engine.query(q) for q in QUESTIONS]
    finally:
        mlflow.llama_index.autolog(disable=True)

    ds = load_mlflow_traces(store.experiment, tracking_uri=store.uri, limit=4)
    assert len(ds.records) == 4
    for r, response in zip(ds.records, responses):
        assert r.answer == str(response) and r.answer
        assert r.contexts == [n.node.get_content() for n in response.source_nodes]
        assert r.context_ids == [n.node.node_id for n in response.source_nodes]
        assert r.extra["context_scores"] == pytest.approx([n.score for n in response.source_nodes])
        assert r.extra["trace_status"] == "ok"
        assert {"retrieve", "generate", "total"} <= set(r.timings)


def _run_traced(store_uri, factory, kwargs, **options):
    options.setdefault("experiment", f"app_{factory.replace(':', '_')}")
    overrides = [f"pipeline.factory={factory}", f"tracking.uri={store_uri}",
                 *(f"+pipeline.kwargs.{k}={v}" for k, v in kwargs.items()),
                 *(f"pipeline.{k}={v}" for k, v in options.items())]
    return ragexp.evaluate([{"id": f"q{i}", "query": q, "gt_context_ids": ["bee-01"]} for i, q in enumerate(QUESTIONS)],
                           metric="[recall_at_k,avg_latency]", pipeline="traced", overrides=overrides, log=False,
                           progress=False)


@pytest.mark.slow
def test_pipeline_traced_sweeps_a_langchain_chain_as_it_is(store_uri):
    result = _run_traced(store_uri, "traced_apps:langchain_app", {"k": 2}, experiment="chain")
    table = result.per_sample
    retriever = traced_apps.langchain_retriever(k=2)
    for q, contexts, ids in zip(QUESTIONS, table["contexts"], table["context_ids"]):
        assert (list(contexts), list(ids)) == _texts_and_ids(retriever.invoke(q))
    chain = traced_apps.langchain_app(k=2)
    assert list(table["answer"]) == [chain.invoke(q) for q in QUESTIONS]
    assert list(table["recall_at_k/recall_at_1/status"]) == ["ok"] * 5
    # the app's traces are in the run's store, one per question, tagged with the record id
    client = mlflow.MlflowClient(store_uri)
    exp = client.get_experiment_by_name("chain")
    traces = client.search_traces(locations=[exp.experiment_id], max_results=50)
    assert sorted(t.info.tags["ragexp.record_id"] for t in traces) == [f"q{i}" for i in range(5)]
    assert mlflow.get_tracking_uri() != store_uri  # the caller's store is left as it was


@pytest.mark.slow
def test_pipeline_traced_runs_a_llama_index_engine_as_it_is(store_uri):
    result = _run_traced(store_uri, "traced_apps:llama_index_app", {"k": 3})
    table = result.per_sample
    engine = traced_apps.llama_index_app(k=3)
    for i, q in enumerate(QUESTIONS):
        response = engine.query(q)
        assert list(table["context_ids"][i]) == [n.node.node_id for n in response.source_nodes]
        assert list(table["contexts"][i]) == [n.node.get_content() for n in response.source_nodes]
        assert table["answer"][i] == str(response)
    assert result.summary["latency"]["latency/retrieve"] > 0


@pytest.mark.slow
def test_pipeline_traced_refuses_what_it_cannot_build_in_one_line(store_uri):
    with pytest.raises(ConfigError, match=r"pipeline=traced needs your app's factory: pipeline.factory=my_app:build"):
        ragexp.evaluate([{"query": "q"}], pipeline="traced", log=False)
    with pytest.raises(ConfigError, match=r"pipeline.factory: cannot import module 'no_such_app'"):
        _run_traced(store_uri, "no_such_app:build", {})
    with pytest.raises(ConfigError, match=r"pipeline.factory traced_apps:langchain_app: got an unexpected keyword "
                                          r"argument 'top_k' \(it is called with pipeline.kwargs: \{'top_k': 2\}\)"):
        _run_traced(store_uri, "traced_apps:langchain_app", {"top_k": 2})
    with pytest.raises(ConfigError, match=r"langchain_app\(k=0\) failed: ValueError"):
        _run_traced(store_uri, "traced_apps:langchain_app", {"k": 0})


def test_pipeline_traced_a_question_the_app_raises_on_keeps_its_record(store_uri, capsys):
    result = _run_traced(store_uri, "traced_apps:plain_app", {}, autolog="none")
    table = result.per_sample
    moon = [i for i, q in enumerate(QUESTIONS) if "Moon" in q]
    assert [table["pipeline_error"][i] for i in moon] == ["RuntimeError: the model is down for 'Moon'"]
    assert not isinstance(table["answer"][moon[0]], str) and table["contexts"][moon[0]] is None  # absent, not ""
    assert "trace_error" in table["trace_status"][moon[0]]
    others = [i for i in range(len(QUESTIONS)) if i not in moon]
    assert all(not isinstance(table["pipeline_error"][i], str) and isinstance(table["answer"][i], str) for i in others)
    assert "1 question(s) failed in the app" in capsys.readouterr().err


# --- traces ragexp cannot read whole: each keeps its record, with its reason ---------------------------------

def _trace(inputs=None, outputs=None, documents=None, attributes=None, retriever=True):
    with mlflow.start_span(name="app", span_type="CHAIN") as root:
        if inputs is not None:
            root.set_inputs(inputs)
        if retriever:
            with mlflow.start_span(name="search", span_type="RETRIEVER") as span:
                if documents is not None:
                    span.set_outputs(documents)
                if attributes:
                    span.set_attributes(attributes)
        if outputs is not None:
            root.set_outputs(outputs)
    return root.trace_id


def test_traces_it_cannot_read_whole_keep_their_records_with_a_stated_status(store, capsys):
    docs = [{"page_content": "Bees make honey.", "id": "d1", "metadata": {}}]
    made = {
        "ok": _trace({"question": "q1"}, {"answer": "a1"}, docs),
        "no_root_input": _trace(None, "a2", docs),
        "no_retriever_span": _trace("q3", "a3", retriever=False),
        "documents_without_ids": _trace("q4", "a4", [{"page_content": "x", "metadata": {}}, {"page_content": "y"}]),
        "non_text_output": _trace("q5", {"scores": [0.1, 0.2]}, docs),
        "non_text_document": _trace("q6", "a6", [{"page_content": {"table": [1, 2]}}]),
        "no_output": _trace("q7", None, docs),
    }
    ds = load_mlflow_traces(store.experiment, tracking_uri=store.uri)
    by_trace = {r.extra["trace_id"]: r for r in ds.records}
    assert len(ds.records) == len(made)
    status = {name: by_trace[tid].extra["trace_status"] for name, tid in made.items()}
    assert status == {name: name for name in made}
    ok, no_input, no_retriever, no_ids, non_text, bad_doc, no_output = (by_trace[t] for t in made.values())
    assert (ok.query, ok.answer, ok.contexts, ok.context_ids) == ("q1", "a1", ["Bees make honey."], ["d1"])
    assert no_input.query.startswith("(no question: trace ") and no_input.answer == "a2"
    assert no_retriever.contexts is None and no_retriever.answer == "a3"
    assert no_ids.contexts == ["x", "y"] and no_ids.context_ids is None
    assert non_text.answer is None and non_text.contexts == ["Bees make honey."]
    assert bad_doc.contexts is None and no_output.answer is None
    err = capsys.readouterr().err
    assert "7 trace(s), 1 no_root_input" in err and "1 no_retriever_span — no RETRIEVER span" in err
    assert err.count("\n") == 1


def test_a_retrieval_metric_on_traces_without_a_retriever_span_gives_missing_field_not_a_zero(store):
    made = [_trace("q1", "a1", [{"page_content": "p", "id": "d1"}]), _trace("q2", "a2", retriever=False)]
    mlflow.flush_trace_async_logging()  # the traces are in the store before assessments are logged on them
    for trace_id in made:
        mlflow.log_expectation(trace_id=trace_id, name="gt_context_ids", value=["d1"])
    result = ragexp.evaluate("mlflow_traces", metric="hit_rate", log=False, progress=False,
                             overrides=[f"dataset.experiment={store.experiment}", f"dataset.tracking_uri={store.uri}",
                                        "+dataset.label=true"])
    assert list(result.per_sample["hit_rate/hit_rate_at_1/status"]) == ["ok", "missing_field"]
    assert list(result.per_sample["hit_rate/hit_rate_at_1"])[0] == 1.0
    assert list(result.per_sample["trace_status"]) == ["ok", "no_retriever_span"]


def test_openinference_retrieval_attributes_and_expectations_and_human_feedback(store):
    from mlflow.entities import AssessmentSource, AssessmentSourceType

    attributes = {"openinference.span.kind": "RETRIEVER",
                  "retrieval.documents.0.document.content": "first", "retrieval.documents.0.document.id": "a",
                  "retrieval.documents.0.document.score": 0.9,
                  "retrieval.documents.1.document.content": "second", "retrieval.documents.1.document.id": "b",
                  "retrieval.documents.1.document.score": 0.4}
    with mlflow.start_span(name="app", span_type="UNKNOWN") as root:
        root.set_attributes({"input.value": '{"query": "what is first?"}', "output.value": "first"})
        with mlflow.start_span(name="retrieve", span_type="UNKNOWN") as span:
            span.set_attributes(attributes)
    tid = root.trace_id
    mlflow.flush_trace_async_logging()
    mlflow.log_expectation(trace_id=tid, name="expected_response", value="the first one")
    mlflow.log_expectation(trace_id=tid, name="expected_retrieved_context", value=[{"content": "first", "doc_uri": "a"}])
    people = AssessmentSource(source_type=AssessmentSourceType.HUMAN, source_id="reviewer")
    mlflow.log_feedback(trace_id=tid, name="human/answer_similarity", value=4, source=people)
    mlflow.log_feedback(trace_id=tid, name="label", value=True, source=people)
    mlflow.log_feedback(trace_id=tid, name="tone", value="friendly", source=people)  # no number: left out, said
    [r] = load_mlflow_traces(store.experiment, tracking_uri=store.uri).records
    assert (r.query, r.answer, r.contexts, r.context_ids) == ("what is first?", "first", ["first", "second"], ["a", "b"])
    assert r.extra["context_scores"] == [0.9, 0.4]
    assert (r.reference_answers, r.gt_contexts, r.gt_context_ids) == (["the first one"], ["first"], ["a"])
    assert r.human == {"answer_similarity": 4.0} and r.label is True
    assert r.extra["trace_status"] == "unread_human_feedback"


def test_a_missing_experiment_or_store_is_one_line(store, tmp_path):
    _trace("q", "a", [{"page_content": "p", "id": "d"}])
    with pytest.raises(DataError, match=r"^dataset.experiment: no experiment 'nope' in sqlite:///.*experiments there: "
                                         r".*'my-app test_a_missing_experiment_or_store_is_one_line'"):
        load_mlflow_traces("nope", tracking_uri=store.uri)
    with pytest.raises(DataError, match=r"^no MLflow store at .*elsewhere.db \(dataset.tracking_uri="):
        load_mlflow_traces(store.experiment, tracking_uri=f"sqlite:///{tmp_path / 'elsewhere.db'}")
    assert not (tmp_path / "elsewhere.db").exists()  # not created for nothing
    with pytest.raises(DataError, match=r"^cannot reach the MLflow store http://127.0.0.1:\d+: "):
        load_mlflow_traces(store.experiment, tracking_uri=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(DataError, match=r"^no traces in experiment 'my-app test_a_missing.*' .* matching filter="):
        load_mlflow_traces(store.experiment, tracking_uri=store.uri, since="2999-01-01")
    with pytest.raises(DataError, match=r"dataset.since: expected an ISO date"):
        load_mlflow_traces(store.experiment, tracking_uri=store.uri, since="yesterday")


def test_problems_line_says_how_many_and_why():
    assert problems_line({}, 3, "x") == "x: 3 trace(s), every field read"
    assert problems_line({"no_output": 2}, 3, "x") == ("x: 3 trace(s), 2 no_output — the root span has no outputs "
                                                        "(no answer) (per record: the trace_status column)")


@pytest.mark.integration
def test_the_cli_exits_2_with_one_line_when_the_experiment_is_not_there(tmp_path):
    proc = run_cli("dataset=mlflow_traces", "dataset.experiment=my-app", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith(f"ragexp: error: no MLflow store at {tmp_path}/mlflow.db")
    assert "Traceback" not in proc.stderr and not (tmp_path / "mlflow.db").exists()


@pytest.mark.integration
@pytest.mark.slow
def test_the_traced_apps_page_commands_run_as_written(tmp_path):
    """Every ``bash`` block of docs/traced-apps.md, in a copy of experiments/langchain_app (the ``cd`` into it
    done by the copy), with ``python`` the test's interpreter; offline."""
    import os
    import re
    import shutil
    import subprocess
    import sys

    from cli import ROOT

    page = (ROOT / "docs" / "traced-apps.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)```", page, re.S)
    assert len(blocks) == 2
    for name in ("rag_app.py", "log_traces.py"):
        shutil.copy(ROOT / "experiments" / "langchain_app" / name, tmp_path / name)
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env.pop("MLFLOW_TRACKING_URI", None)
    outputs = []
    for block in blocks:
        lines = [line for line in block.splitlines() if line.strip() and line.strip() != "cd experiments/langchain_app"]
        proc = subprocess.run(["bash", "-ec", "\n".join(lines)], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=900)
        assert proc.returncode == 0, f"{block}\nSTDOUT:\n{proc.stdout[-3000:]}\nSTDERR:\n{proc.stderr[-3000:]}"
        outputs.append(proc.stdout + proc.stderr)
    assert "10 traces in experiment 'langchain-app'" in outputs[0]
    assert "experiment 'langchain-app'): 10 trace(s), every field read" in outputs[0]
    assert outputs[1].count("pipeline=traced (rag_app:build): 10 trace(s), every field read") == 2
    import pandas as pd

    jobs = sorted(tmp_path.glob("multirun/*/*/[01]/per_sample.parquet"))
    assert [sorted({len(c) for c in pd.read_parquet(p)["contexts"]}) for p in jobs] == [[1], [3]]  # k=1, k=3
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    app_traces = client.search_traces(locations=[client.get_experiment_by_name("ragexp").experiment_id],
                                      max_results=100)
    assert len(app_traces) == 20  # the app's own traces of both jobs, in the runs' experiment, ragexp's scores on them


@pytest.mark.slow
def test_a_ragexp_runs_own_traces_read_back_are_its_records(tmp_path):
    """The traces a logged run writes (docs/traces.md) read back with dataset=mlflow_traces dataset.run_id=...:
    every record the run scored, its fields, references, label and people's labels as they were."""
    from ragexp.datasets.demo import load_demo

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = ragexp.evaluate("demo", metric="[hit_rate,answer_token_f1]", log=uri, progress=False,
                          overrides=["dataset.limit=8"])
    ds = load_mlflow_traces("ragexp", tracking_uri=uri, run_id=run.run_id)
    fields = ("id", "query", "answer", "contexts", "context_ids", "reference_answers", "gt_context_ids", "label",
              "human")
    assert [[getattr(r, f) for f in fields] for r in ds.records] == \
        [[getattr(r, f) for f in fields] for r in load_demo(limit=8).records]
    assert {r.extra["trace_status"] for r in ds.records} == {"ok"}
