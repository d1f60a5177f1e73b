"""Every sample of a run as an MLflow trace linked to the run (docs/traces.md), and ragexp's metrics as
``mlflow.genai`` scorers.

- unit: which samples become traces under ``tracking.traces`` (every one up to the cap; above it a seeded
  sample stratified by status), the documents of a RETRIEVER span, the judge's reasons as rationale;
- a real sweep ``python -m ragexp -m dataset.system=strong,weak`` on the demo with a judge metric (the
  scripted judge of tests/judge_server.py): each child has 50 traces linked to it, each trace the run's headline
  metrics as feedback first, then each metric whose status is not ok (an error, never a value), every metric's
  value on the root span (ragexp.scores) equal to the child's per-sample table, the judge's reasons as
  rationale from an LLM_JUDGE source, the references as expectations, and the two children's root inputs
  byte-identical per record;
- ``tracking.traces=N`` below the number of samples: N traces, said in the run's description;
- ``ragexp.mlflow_scorers`` in ``mlflow.genai.evaluate``: the values ragexp gives the same records.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from ragexp.results.columns import detail_column, metric_keys, status_column
from ragexp.tracking.traces import RECORD_TAG, check_cap, choose, documents, rationale, sample_status

from cli import parent_and_children, run_cli
from judge_server import JudgeServer

JUDGED = "answer_similarity"
#: the references of q01 and q11: the scripted judge refuses the questions holding them (HTTP 400)
REFUSED = ("More than a thousand eggs", "Augustin Fresnel")


# --- which samples become traces ---------------------------------------------------------------------------

def test_every_sample_up_to_the_cap_and_none_at_zero():
    assert choose(["ok"] * 7, None) == list(range(7))
    assert choose(["ok"] * 7, 7) == list(range(7))
    assert choose(["ok"] * 7, 0) == []


def test_above_the_cap_a_seeded_sample_stratified_by_status():
    strata = ["ok"] * 900 + ["error"] * 90 + ["missing_field"] * 10
    picked = choose(strata, 100, seed=3)
    assert len(picked) == len(set(picked)) == 100 and picked == sorted(picked)
    counts = Counter(strata[i] for i in picked)
    assert counts == {"ok": 90, "error": 9, "missing_field": 1}  # 100 x 900/1000, 100 x 90/1000, 100 x 10/1000
    assert choose(strata, 100, seed=3) == picked  # the same seed, the same samples
    assert choose(strata, 100, seed=4) != picked
    # a stratum too small for its share still has one sample while the cap allows one per stratum
    rare = ["ok"] * 995 + ["timeout"] * 5
    assert Counter(rare[i] for i in choose(rare, 10, seed=0)) == {"ok": 9, "timeout": 1}


def test_a_samples_stratum_is_its_first_status_other_than_ok():
    columns = {"id": ["a", "b", "c"], "m": [1.0, None, None], status_column("m"): ["ok", "error", "ok"],
               "n": [1.0, 1.0, None], status_column("n"): ["ok", "ok", "undefined"]}
    assert sample_status(columns, ["m", "n"]) == ["ok", "error", "undefined"]


def test_a_bad_cap_is_one_line():
    from ragexp.errors import ConfigError

    for bad in (-1, 2.5, "all", True):
        with pytest.raises(ConfigError, match="tracking.traces: expected a whole number >= 0"):
            check_cap(bad)


def test_retriever_documents_carry_text_id_rank_and_score_where_known():
    docs = documents(["first", "second"], ["d1", "d2"], [0.9, 0.4], ["d1#0", "d2#3"])
    assert docs == [
        {"page_content": "first", "id": "d1", "metadata": {"rank": 1, "doc_uri": "d1", "chunk_id": "d1#0", "score": 0.9}},
        {"page_content": "second", "id": "d2", "metadata": {"rank": 2, "doc_uri": "d2", "chunk_id": "d2#3", "score": 0.4}},
    ]
    # ids or scores that do not line up with the passages are left out rather than misattributed
    assert documents(["only"], ["a", "b"], [1.0, 2.0]) == [{"page_content": "only", "metadata": {"rank": 1}}]


def test_the_judges_reasons_are_the_rationale():
    assert rationale(json.dumps({"scores": [4.0], "reasons": ["0.80 of the reference's terms"]})) == \
        "0.80 of the reference's terms"
    assert rationale(json.dumps({"verdicts": [1, 0], "reasons": ["supported", "not in the passage"]})) == \
        "supported\nnot in the passage"
    assert rationale("a plain detail") == "a plain detail"
    assert rationale(None) is None


# --- a real sweep on the demo ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def sweep(tmp_path_factory, data_dir):
    """``python -m ragexp -m dataset.system=strong,weak`` with the default suite and one judge metric (the
    scripted judge refuses two questions, so their samples carry an error); the store and the children."""
    launch = tmp_path_factory.mktemp("traces_sweep")
    with JudgeServer() as server:
        server.script = _fail_some
        run_cli("-m", "dataset.system=strong,weak", f"metric=[default,{JUDGED}]", "judge=openai_compatible",
                f"judge.api_base={server.url}", "judge.max_retries=0", f"data_dir={data_dir}", "progress=false",
                "tracking.plots=false", "tracking.sweep_traces=null", cwd=launch)  # every sample of each job
    uri = f"sqlite:///{launch / 'mlflow.db'}"
    client, _, children = parent_and_children(uri)
    return uri, client, sorted(children, key=lambda r: r.info.run_name)


def _fail_some(request):
    from judge_server import Reply

    if any(ref in json.dumps(request.messages, ensure_ascii=False) for ref in REFUSED):
        return Reply(status=400, text="the judge refuses this one")
    return None


def _traces(uri, run):
    import mlflow

    mlflow.set_tracking_uri(uri)
    return mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, return_type="list")


def _table(client, run):
    import pandas as pd

    path = client.download_artifacts(run.info.run_id, "per_sample.parquet")
    return pd.read_parquet(path)


@pytest.mark.integration
def test_each_child_has_one_trace_per_sample_with_its_headline_and_failed_metrics_as_feedback(sweep):
    from mlflow.entities import AssessmentSourceType

    uri, client, children = sweep
    assert [c.info.run_name.split(",")[0] for c in children] == ["dataset.system=strong", "dataset.system=weak"]
    roots = {}
    errors = 0
    for child in children:
        traces = _traces(uri, child)
        table = _table(client, child).set_index("id")
        assert len(traces) == len(table) == 50
        assert child.data.tags["ragexp.traces"] == "50 of 50"  # was "being logged: 50 of 50 ..." while they were
        keys = metric_keys(table.columns)
        assert JUDGED in keys and "answer_token_f1" in keys
        headline = json.loads(Path(client.download_artifacts(child.info.run_id, "summary.json")).read_text())["headline"]
        assert headline[:2] == ["answer_token_f1", "context_recall"]
        for trace in traces:
            rid = trace.info.tags[RECORD_TAG]
            row = table.loc[rid]
            assert trace.info.tags["ragexp.dataset_digest"] == child.data.tags["ragexp.dataset_digest"]
            root = next(s for s in trace.data.spans if s.parent_id is None)
            assert root.inputs == {"query": row["query"]}
            # MLflow's execution time is the record's latency; each stage span lasts the seconds measured for it
            assert root.end_time_ns - root.start_time_ns == round(row["latency_s"] * 1e9)
            assert trace.info.execution_duration == round(row["latency_s"] * 1e9) // 1_000_000 > 0
            stages = [s for s in trace.data.spans if s.attributes.get("ragexp.seconds") is not None]
            assert stages and all(s.end_time_ns - s.start_time_ns == round(s.attributes["ragexp.seconds"] * 1e9)
                                            for s in stages)
            assert root.outputs == {"answer": row["answer"]}
            roots.setdefault(rid, []).append(json.dumps(root.inputs, ensure_ascii=False))
            retriever = [s for s in trace.data.spans if s.span_type == "RETRIEVER"]
            assert len(retriever) == 1
            assert [d["page_content"] for d in retriever[0].outputs] == list(row["contexts"])
            assert [d["id"] for d in retriever[0].outputs] == list(row["context_ids"])
            feedback = {}
            for a in trace.info.assessments:
                if a.feedback is not None and a.source.source_type != AssessmentSourceType.HUMAN:
                    assert a.name not in feedback, f"two feedback named {a.name}"
                    feedback[a.name] = a
            # the headline metrics first (MLflow's Traces tab shows the first), then each metric not ok on this row
            failed = {k for k in keys if row[status_column(k)] != "ok"}
            assert set(feedback) == set(headline) | failed
            named = [a.name for a in trace.info.assessments]
            assert named[:len(headline)] == headline, named
            # every metric's value on the root span, None where its status is not ok
            scores = root.attributes["ragexp.scores"]
            assert set(scores) == set(keys)
            for key in keys:
                assert scores[key] == (None if key in failed else pytest.approx(row[key], rel=0, abs=0)), key
            for key in feedback:
                a = feedback[key]
                if row[status_column(key)] == "ok":
                    assert a.error is None
                    assert a.value == pytest.approx(row[key], rel=0, abs=0), key
                else:
                    errors += 1
                    assert a.value is None, f"{key}: a status {row[status_column(key)]} logged as a value"
                    assert a.error.error_code == row[status_column(key)].upper()
                if key == JUDGED:
                    assert a.source.source_type == AssessmentSourceType.LLM_JUDGE
                    assert a.source.source_id == "hosted_vllm/judge"
                    if row[status_column(key)] == "ok":
                        assert a.rationale == "\n".join(json.loads(row[detail_column(key)])["reasons"])
                else:
                    assert a.source.source_type == AssessmentSourceType.CODE and a.source.source_id == key
            expected = {a.name: a.value for a in trace.info.assessments if a.expectation is not None}
            refs = list(row["reference_answers"])
            assert expected["expected_response"] == (refs[0] if len(refs) == 1 else refs)
            assert expected["gt_context_ids"] == list(row["gt_context_ids"])
            assert [e["content"] for e in expected["expected_retrieved_context"]] == list(row["gt_contexts"])
            human = {a.name: a.value for a in trace.info.assessments
                     if a.feedback is not None and a.source.source_type == AssessmentSourceType.HUMAN}
            assert human == {"label": bool(row["label"])}
    assert errors > 0  # the judge's refusals reached the traces as errors
    # the same record's root inputs, byte for byte, in both children: MLflow's comparison pairs them
    assert len(roots) == 50 and all(len(v) == 2 and v[0] == v[1] for v in roots.values())


@pytest.mark.integration
def test_a_cap_below_the_samples_logs_that_many_and_says_so(tmp_path, data_dir):
    run_cli("metric=answer", "tracking.traces=7", f"data_dir={data_dir}", "progress=false", "tracking.plots=false",
            cwd=tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, parents, _ = parent_and_children(uri)
    run = parents[0]
    assert len(_traces(uri, run)) == 7
    assert run.data.tags["ragexp.traces"] == "7 of 50"
    assert "Traces: 7 of 50 samples (tracking.traces=7), a seeded sample stratified by status" in \
        run.data.tags["mlflow.note.content"]


def test_a_sweeps_jobs_trace_the_same_questions_whatever_their_statuses():
    from ragexp.tracking.traces import job_cap

    # a sweep's job draws its seeded sample with every status alike: two jobs whose errors differ pick the same rows
    one, two = ["ok"] * 95 + ["error"] * 5, ["error"] * 30 + ["ok"] * 70
    assert choose(one, 10, seed=3) != choose(two, 10, seed=3)  # stratified, as a single run's
    assert choose(["ok"] * 100, job_cap(50, 10), seed=3) == choose(["ok"] * 100, job_cap(None, 10), seed=3)
    assert len(choose(["ok"] * 100, job_cap(50, 10), seed=3)) == 10


def test_the_printed_traces_line_names_the_key_that_set_the_cap_and_one_that_lifts_it():
    from ragexp.tracking.traces import TraceReport, job_cap

    # a sweep's job is capped by tracking.sweep_traces: the line said 'tracking.traces=10; tracking.traces=null
    # logs every one', yet tracking.traces=null left every job at 10 (H8's walkthrough)
    sweep = TraceReport(samples=50, chosen=10, logged=10, stratified=False).console(job_cap(50, 10))
    assert sweep.startswith("Traces: 10 of 50 samples (tracking.sweep_traces=10,") and "tracking.traces=10" not in sweep
    assert "tracking.sweep_traces=null tracking.traces=null logs every one" in sweep
    assert job_cap(None, 10) == 10 and job_cap(None, None) is None  # traces=null alone keeps 10; the pair lifts it
    assert len(choose(["ok"] * 50, job_cap(None, None), seed=0)) == 50
    single = TraceReport(samples=50, chosen=7, logged=7).console(7)
    assert single == "Traces: 7 of 50 samples (tracking.traces=7; tracking.traces=null logs every one)"


@pytest.mark.slow
def test_an_apps_own_traces_get_ragexps_scores_and_are_linked_to_the_run(tmp_path):
    """dataset=mlflow_traces on a LangChain app's autologged traces, the run logged to the app's store and
    experiment: the run's traces are the app's own (no copies), each with every metric's feedback naming the run
    (tracking.trace_assessments=all),
    the person's reference not repeated; a run whose records have no timing says so on its traces."""
    import mlflow
    import traced_apps
    from mlflow.entities import AssessmentSourceType

    import ragexp
    from ragexp.tracking.traces import DURATION_TAG, NOT_MEASURED

    uri, before = f"sqlite:///{tmp_path / 'mlflow.db'}", mlflow.get_tracking_uri()
    mlflow.set_tracking_uri(uri)
    try:
        exp = mlflow.set_experiment("my-app").experiment_id
        chain = traced_apps.langchain_app(k=3)
        mlflow.langchain.autolog()
        try:
            for q in ("How many queens does a honeybee colony hold?", "How far away is the Moon?", "Why is sourdough sour?"):
                chain.invoke(q)
        finally:
            mlflow.langchain.autolog(disable=True)
        mlflow.flush_trace_async_logging()
        app = {t.info.trace_id: t for t in mlflow.search_traces(locations=[exp], return_type="list")}
        for n, trace_id in enumerate(app):  # a person's reference answer on each of the app's traces, ids on one
            mlflow.log_expectation(trace_id=trace_id, name="expected_response", value="The queen.")
            if n == 0:
                mlflow.log_expectation(trace_id=trace_id, name="gt_context_ids", value=["bee-01"])
        result = ragexp.evaluate("mlflow_traces", metric="[answer_token_f1,avg_latency,recall_at_k]", log=uri,
                                 progress=False, overrides=["dataset.experiment=my-app", f"dataset.tracking_uri={uri}",
                                                            "tracking.experiment=my-app", "tracking.plots=false",
                                                            "tracking.trace_assessments=all"])
        table = result.per_sample.set_index("trace_id")
        keys = metric_keys(table.columns)
        linked = mlflow.search_traces(locations=[exp], run_id=result.run_id, return_type="list")
        assert sorted(t.info.trace_id for t in linked) == sorted(app) and len(app) == 3
        assert len(mlflow.search_traces(locations=[exp], return_type="list")) == 3  # no trace of ragexp's own
        for trace in linked:
            row = table.loc[trace.info.trace_id]
            feedback = {a.name: a for a in trace.info.assessments if a.feedback is not None}
            assert set(feedback) == set(keys)
            for key in keys:
                a = feedback[key]
                assert a.metadata["mlflow.assessment.sourceRunId"] == result.run_id
                assert a.source.source_type == AssessmentSourceType.CODE
                if row[status_column(key)] == "ok":
                    assert a.value == row[key]
                else:  # recall_at_k where the trace holds no ground-truth ids
                    assert a.value is None and a.error.error_code == row[status_column(key)].upper()
            expected = Counter(a.name for a in trace.info.assessments if a.expectation is not None)
            assert expected["expected_response"] == 1 and set(expected.values()) == {1}  # the person's, not twice
            assert trace.info.execution_duration == app[trace.info.trace_id].info.execution_duration  # the app's
        assert (table["answer_token_f1/status"] == "ok").all() and list(table["recall_at_k/recall_at_1/status"]).count("ok") == 1
        run = mlflow.MlflowClient(uri).get_run(result.run_id)
        assert run.data.tags["ragexp.traces"] == "3 of 3"
        assert "3 of them are the app's own traces, linked to this run" in run.data.tags["mlflow.note.content"]

        plain = ragexp.evaluate([{"id": "a", "query": "q?", "answer": "x", "reference_answers": ["x"]}],
                                metric="[answer_token_f1]", log=uri, progress=False, overrides=["tracking.plots=false"])
        where = mlflow.MlflowClient(uri).get_run(plain.run_id).info.experiment_id
        (trace,) = mlflow.search_traces(locations=[where], run_id=plain.run_id, return_type="list")
        assert trace.info.tags[DURATION_TAG] == NOT_MEASURED and trace.info.execution_duration == 0
    finally:
        mlflow.set_tracking_uri(before)


# --- ragexp's metrics as mlflow.genai scorers ---------------------------------------------------------------

@pytest.mark.slow
def test_scorers_give_ragexps_own_values_in_mlflow_genai_evaluate(tmp_path, data_dir):
    import mlflow

    import ragexp

    rows = [r for r in ragexp.evaluate("demo", metric="answer", log=False, data_dir=str(data_dir),
                                       overrides=["dataset.limit=4"]).per_sample.to_dict("records")]
    keys = ["answer_token_f1", "rougeL", "context_recall", "mrr/mrr_at_3", JUDGED]
    with JudgeServer() as server:
        server.script = _fail_some
        settings = dict(judge="openai_compatible", overrides=[f"judge.api_base={server.url}", "judge.max_retries=0"])
        own = ragexp.evaluate("demo", metric=f"[default,{JUDGED}]", log=False, data_dir=str(data_dir),
                              **{k: v for k, v in settings.items() if k == "judge"},
                              overrides=[*settings["overrides"], "dataset.limit=4"]).per_sample
        scorers = ragexp.mlflow_scorers(f"[default,{JUDGED}]", keys, **settings)
        data = [{"inputs": {"query": r["query"]},
                 "outputs": {"answer": r["answer"], "contexts": list(o["contexts"]), "context_ids": list(o["context_ids"])},
                 "expectations": {"expected_response": list(r["reference_answers"]),
                                  "expected_retrieved_context": [{"content": c, "doc_uri": i} for c, i in
                                                                 zip(o["gt_contexts"], o["gt_context_ids"])]}}
                for r, o in zip(rows, own.to_dict("records"))]
        mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
        mlflow.set_experiment("scorers")
        result = mlflow.genai.evaluate(data=data, scorers=scorers)
    got = result.result_df
    order = [json.loads(r)["query"] if isinstance(r, str) else r["query"] for r in got["request"]]
    for key in keys:
        for i, r in enumerate(own.to_dict("records")):
            j = order.index(r["query"])
            if r[status_column(key)] == "ok":
                assert got[f"{key}/value"].iloc[j] == r[key], key
            else:  # the judge refused: an error, never a value
                assert got[f"{key}/value"].iloc[j] is None or math.isnan(got[f"{key}/value"].iloc[j])
                assert "refuses" in str(got[f"{key}/error_message"].iloc[j]) or got[f"{key}/error_code"].iloc[j]
    assert (own[status_column(JUDGED)] != "ok").any() and (own[status_column(JUDGED)] == "ok").any()


def test_each_questions_trace_carries_its_conversation_as_the_mlflow_session(tmp_path):
    """Issue 38 item 5: with stats.cluster_by naming the conversation, each trace's mlflow.trace.session is its
    record's conversation (MLflow's Sessions view groups them), read back from the store; the memory search is
    the trace's RETRIEVER span, its documents the passages retrieved."""
    import mlflow
    from mlflow.entities import SpanType

    import ragexp

    rows = [{"id": f"{conv}/{i}", "query": f"what did {conv} say {i}?", "answer": f"answer {i}",
             "reference_answers": [f"answer {i}"], "contexts": [f"turn {i} of {conv}", "another turn"],
             "context_ids": [f"D1:{i}", "D1:9"], "conversation": conv}
            for conv in ("conv-26", "conv-30") for i in range(3)]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = ragexp.evaluate(rows, metric="answer_token_f1", log=uri, progress=False,
                             overrides=["stats.cluster_by=conversation", "stats.resamples=200", "tracking.plots=false"])
    mlflow.set_tracking_uri(uri)
    run = mlflow.get_run(result.run_id)
    traces = mlflow.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, return_type="list")
    assert len(traces) == 6
    for trace in traces:
        record_id = trace.info.tags[RECORD_TAG]
        assert trace.info.trace_metadata["mlflow.trace.session"] == record_id.split("/")[0]
        retriever = [s for s in trace.data.spans if s.span_type == SpanType.RETRIEVER]
        assert len(retriever) == 1 and [d["id"] for d in retriever[0].outputs] == [f"D1:{record_id[-1]}", "D1:9"]
    # MLflow's own session filter finds a conversation's questions and no other
    one = mlflow.search_traces(locations=[run.info.experiment_id], return_type="list",
                               filter_string="metadata.`mlflow.trace.session` = 'conv-30'")
    assert sorted(t.info.tags[RECORD_TAG] for t in one) == ["conv-30/0", "conv-30/1", "conv-30/2"]


@pytest.mark.integration
def test_a_run_killed_while_logging_its_traces_keeps_saying_they_are_being_logged(tmp_path):
    """The run's ``ragexp.traces`` tag says ``being logged`` before the first trace: a process killed (SIGKILL)
    while its traces are written leaves a run that says its traces are not all there."""
    import signal
    import subprocess
    import sys
    import time

    import mlflow

    from ragexp.tracking.traces import BEING_LOGGED

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    script = ("import ragexp\n"
              "records = [{'id': f'q{i}', 'query': f'question {i}?', 'answer': f'answer {i}', "
              "'reference_answers': [f'answer {i % 7}']} for i in range(400)]\n"
              f"ragexp.evaluate(records, metric='[answer_token_f1]', log={uri!r}, progress=False, "
              "overrides=['tracking.traces=null', 'tracking.plots=false'])\n")
    proc = subprocess.Popen([sys.executable, "-c", script], cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    tag, deadline = None, time.time() + 300
    try:
        while time.time() < deadline and proc.poll() is None:
            time.sleep(0.5)
            try:
                exp = mlflow.MlflowClient(uri).get_experiment_by_name("ragexp")
                runs = mlflow.MlflowClient(uri).search_runs([exp.experiment_id]) if exp else []
            except Exception:  # noqa: BLE001 - the store is being created
                continue
            tag = runs[0].data.tags.get("ragexp.traces") if runs else None
            if tag:
                break
        assert proc.poll() is None, "the run ended before its traces were being logged"
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert tag == BEING_LOGGED.format(chosen=400, samples=400)
    exp = mlflow.MlflowClient(uri).get_experiment_by_name("ragexp").experiment_id
    (run,) = mlflow.MlflowClient(uri).search_runs([exp])
    assert run.data.tags["ragexp.traces"] == tag  # no count replaced it: the run says they did not all land
    mlflow.set_tracking_uri(uri)
    assert len(mlflow.search_traces(locations=[exp], run_id=run.info.run_id, return_type="list")) < 400


def test_the_run_waits_for_its_traces_at_most_its_bound():
    import time

    from ragexp.tracking.traces import _drain

    class Export:  # MLflow's flush, taking as long as a store that is slow to write
        def __init__(self, seconds):
            self.seconds = seconds

        def flush_trace_async_logging(self):
            time.sleep(self.seconds)

    started = time.perf_counter()
    assert _drain(Export(5.0), 0.3) is False  # not drained: the run says which traces did not land
    assert time.perf_counter() - started < 2.0
    assert _drain(Export(0.05), 5.0) is True
