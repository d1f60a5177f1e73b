"""What the MLflow UI shows of ragexp's runs, read back with MlflowClient from a store the real CLI
made: an experiment that opens on its runs, a few params under stable keys, names that say what a
run is, descriptions with n and intervals, one dataset per evaluation set with its real source, and
a tag fingerprinting each system's outputs (issue 12, items 1, 2 and 4)."""

from __future__ import annotations

import json
import math
import re

import pytest

from cli import run_cli, runs
from ragexp.metrics.base import load_all
from judge_server import JudgeServer

KIND_TAG, MODEL_DEVELOPMENT = "mlflow.experimentKind", "custom_model_development"
DEMO_SOURCE = "ragexp:demo/questions.jsonl"
#: the demo with every default: each group's option, nothing else
DEMO_PARAMS = {"dataset": "demo", "metric": "default", "matcher": "rouge_sentence", "pipeline": "default",
               "chunker": "none", "retriever": "none", "compressor": "none", "generator": "precomputed", "memory_layer": "none",
               "stats": "default", "gate": "none", "judge": "null"}
RECORDS = [
    {"id": "a", "query": "What is the capital of France?", "answer": "Paris", "reference_answers": ["Paris"]},
    {"id": "b", "query": "Who wrote Hamlet?", "answer": "Marlowe", "reference_answers": ["William Shakespeare"]},
    {"id": "c", "query": "How many legs has a spider?", "answer": "eight legs", "reference_answers": ["eight"]},
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """One store, as a user would fill it: the experiment made earlier by plain MLflow (no kind),
    then a demo run, a BM25 run, a run over a records file, a judge run (against the scripted
    local judge) with its own name, and a 4-job sweep over retrievers × top_k."""
    from mlflow.tracking import MlflowClient

    work = tmp_path_factory.mktemp("view")
    uri = f"sqlite:///{work / 'mlflow.db'}"
    MlflowClient(uri).create_experiment("ragexp", artifact_location=(work / "mlruns").as_uri())
    records = work / "my_records.jsonl"
    records.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    made: dict[str, list] = {}

    def launch(label: str, *args: str) -> None:
        seen = {r.info.run_id for r in runs(uri)[1]}
        run_cli(*args, "progress=false", "tracking.traces=0", cwd=work)  # runs and their params are read, not traces
        made[label] = [r for r in runs(uri)[1] if r.info.run_id not in seen]

    launch("demo")
    launch("bm25", "retriever=bm25", "retriever.top_k=5")
    launch("records", "dataset=records", f"dataset.path={records}", "metric=answer_token_f1")
    with JudgeServer() as judge:
        launch("judge", "dataset.limit=6", "metric=answer_similarity", "judge=openai_compatible",
               f"judge.api_base={judge.url}", "run_name=judged")
    launch("sweep", "-m", "retriever=none,bm25", "retriever.top_k=3,5")  # none: the dataset's contexts, cut
    client, _ = runs(uri)
    return client, made, work


def one(made, label):
    [run] = made[label]
    return run


def children(made):
    return [r for r in made["sweep"] if "mlflow.parentRunId" in r.data.tags]


def parent(made):
    [p] = [r for r in made["sweep"] if r.data.tags.get("ragexp.role") == "parent"]
    return p


def summary_of(client, run, work):
    return json.loads(open(client.download_artifacts(run.info.run_id, "summary.json", str(work))).read())


@pytest.mark.integration
def test_the_experiment_opens_on_its_runs_table(store):
    """An experiment made before ragexp used it, without a kind, is marked model development
    (MLflow 3 shows such an experiment's runs first, not the GenAI Traces page)."""
    client, _, _ = store
    assert client.get_experiment_by_name("ragexp").tags.get(KIND_TAG) == MODEL_DEVELOPMENT


def test_an_experiment_kind_the_user_chose_stays(tmp_path):
    from mlflow.tracking import MlflowClient

    from ragexp.tracking.store import get_or_create_experiment

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(uri)
    exp = client.create_experiment("mine", tags={KIND_TAG: "genai_development"})
    assert get_or_create_experiment(client, "mine", uri) == exp
    assert client.get_experiment(exp).tags[KIND_TAG] == "genai_development"
    fresh = get_or_create_experiment(client, "fresh", uri)
    assert client.get_experiment(fresh).tags[KIND_TAG] == MODEL_DEVELOPMENT


@pytest.mark.integration
def test_the_demo_run_logs_each_groups_option_and_nothing_else(store):
    client, made, _ = store
    params = one(made, "demo").data.params
    assert params == DEMO_PARAMS
    assert len(params) <= 25


@pytest.mark.integration
def test_params_are_the_choices_and_what_differs_never_a_target(store):
    _, made, _ = store
    for label in ("bm25", "records", "judge"):
        params = one(made, label).data.params
        assert len(params) <= 25, (label, params)
        assert not any("_target_" in k or k.startswith(("tracking", "progress", "run_name", "data_dir"))
                       for k in params), params
    assert one(made, "bm25").data.params == {**DEMO_PARAMS, "retriever": "bm25", "retriever.top_k": "5"}
    judge = one(made, "judge").data.params
    assert judge["judge"] == "openai_compatible" and judge["metric"] == "answer_similarity"
    assert judge["dataset.limit"] == "6" and judge["judge.api_base"].startswith("http://127.0.0.1:")
    assert one(made, "records").data.params["dataset.path"].endswith("my_records.jsonl")


def test_bm25_settings_have_one_key_alone_and_inside_hybrid(compose):
    """``retriever.k1`` is BM25's k1 under retriever=bm25 and retriever=hybrid, in the config, in
    the retriever that runs, and as the MLflow param."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf, open_dict

    from ragexp.results.params import run_params

    keys = {}
    for option in ("bm25", "hybrid"):
        overrides = [f"retriever={option}", "retriever.k1=1.2", "retriever.b=0.5"]
        cfg = compose(*overrides, return_hydra_config=True)
        choices = OmegaConf.to_container(cfg.hydra.runtime.choices)
        with open_dict(cfg):
            del cfg["hydra"]
        plain = OmegaConf.to_container(cfg, resolve=True)
        params = run_params(plain, choices, overrides)
        assert params["retriever.k1"] == "1.2" and params["retriever.b"] == "0.5"
        retriever = instantiate(cfg.retriever)
        bm25 = retriever.bm25 if option == "hybrid" else retriever
        assert (bm25.k1, bm25.b) == (1.2, 0.5)
        keys[option] = set(plain["retriever"]) - {"_target_", "name"}
    dense_keys = set(OmegaConf.to_container(compose("retriever=dense").retriever)) - {"_target_", "name"}
    assert keys["bm25"] <= keys["hybrid"] and dense_keys <= keys["hybrid"]  # hybrid names them as they do


@pytest.mark.integration
def test_single_runs_are_named_from_the_dataset_and_what_they_change(store):
    _, made, _ = store
    assert one(made, "demo").info.run_name == "demo"
    assert one(made, "bm25").info.run_name == "demo · retriever=bm25 · top_k=5"
    assert one(made, "judge").info.run_name == "judged"  # run_name= wins
    assert one(made, "records").info.run_name.startswith("records · metric=answer_token_f1 · path=")


@pytest.mark.integration
def test_a_sweeps_parent_is_named_from_what_it_sweeps_and_when(store):
    _, made, _ = store
    name = parent(made).info.run_name
    assert re.fullmatch(r"sweep retriever=none,bm25 × top_k=3,5 · \d{4}-\d\d-\d\d \d\d:\d\d", name), name
    note = parent(made).data.tags["mlflow.note.content"]  # its description: the command, where the comparison is
    assert "`python -m ragexp -m retriever=none,bm25 retriever.top_k=3,5 progress=false tracking.traces=0`" in note
    assert "leaderboard.png" in note


@pytest.mark.integration
def test_a_sweeps_children_differ_exactly_in_the_swept_values(store):
    _, made, _ = store
    kids = children(made)
    assert len(kids) == 4
    keys = {frozenset(k.data.params) for k in kids}
    assert len(keys) == 1, "every child carries the same keys"
    differing = {key for key in next(iter(keys)) if len({k.data.params[key] for k in kids}) > 1}
    assert differing == {"retriever", "retriever.top_k"}
    assert {(k.data.params["retriever"], k.data.params["retriever.top_k"]) for k in kids} == {
        ("bm25", "3"), ("bm25", "5"), ("none", "3"), ("none", "5")}


def _table(note: str) -> dict[str, list[str]]:
    rows = {}
    for line in note.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and len(cells) == 4 and cells[0] != "metric":
            rows[cells[0]] = cells[1:]
    return rows


def _num(value: float) -> str:
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3f}"


@pytest.mark.integration
def test_descriptions_give_the_dataset_n_and_each_headline_mean_with_its_interval_and_n(store):
    client, made, work = store
    labelled = [one(made, label) for label in ("demo", "bm25", "records", "judge")] + children(made)
    for run in labelled:
        note = run.data.tags["mlflow.note.content"]
        if run in children(made):  # a sweep's child starts with where it stands in the sweep (its first paragraph)
            assert note.startswith("Sweep: **") and " best" in note.split("\n\n", 1)[0], note
            note = note.split("\n\n", 1)[1]
        summary = summary_of(client, run, work)
        head = f"**{summary['dataset']}** · {summary['n_samples']} samples · source `"
        if summary.get("agreement"):  # a run with people's labels leads with how far its judge agrees
            assert note.startswith("**") and " agrees with " in note.splitlines()[0], note
            assert f"\n\n{head}" in note, note
        else:
            assert note.startswith(head), note
        rows = _table(note)
        assert rows, note
        m = run.data.metrics
        for key, (mean, ci, n) in rows.items():
            assert mean == _num(m[key]) and n == str(int(m[f"{key}/n"])), (key, note)
            assert ci == f"{_num(m[f'{key}/ci_low'])} – {_num(m[f'{key}/ci_high'])}", (key, note)
    demo = _table(one(made, "demo").data.tags["mlflow.note.content"])
    assert demo["hit_rate/hit_rate_at_1"][2] == "50" and "token_precision" in demo


@pytest.mark.integration
def test_the_description_says_what_the_judge_did(store):
    client, made, work = store
    run = one(made, "judge")
    note = run.data.tags["mlflow.note.content"]
    calls = int(run.data.metrics["judge/calls"])
    assert calls > 0 and f"Judge: {calls} calls, " in note and "$0.0000" in note  # a self-hosted judge: no price
    assert "Judge:" not in one(made, "records").data.tags["mlflow.note.content"]  # no judge, no judge line


@pytest.mark.integration
def test_every_mean_says_how_many_samples_it_is_over(store):
    client, made, work = store
    for run in [one(made, "demo"), one(made, "judge"), *children(made)]:
        summary = summary_of(client, run, work)
        means = {k: v for k, v in summary["metrics"].items() if v is not None and not math.isnan(v)}
        assert means
        for key in means:
            assert f"{key}/n" in run.data.metrics, key
        for key, counts in summary["status_counts"].items():
            if key in means and not getattr(load_all().get(key), "ratio", None):  # ratios: their denominators
                assert run.data.metrics[f"{key}/n"] == counts.get("ok", 0), key


@pytest.mark.integration
def test_one_dataset_for_every_job_over_the_same_questions_with_its_real_source(store):
    client, made, work = store
    over_demo = [one(made, "demo"), one(made, "bm25"), *children(made)]
    digests = set()
    for run in over_demo:
        [entry] = run.inputs.dataset_inputs
        dataset = entry.dataset
        summary = summary_of(client, run, work)
        assert dataset.digest == summary["dataset_digest"] == summary["questions_digest"]
        assert dataset.name == "demo" and dataset.source_type == "local"
        assert json.loads(dataset.source) == {"uri": DEMO_SOURCE}
        columns = {c["name"] for c in json.loads(dataset.schema)["mlflow_colspec"]}
        assert "query" in columns and not columns & {"answer", "contexts", "context_ids"}  # inputs only
        digests.add(dataset.digest)
        assert run.data.tags["ragexp.dataset_digest"] == dataset.digest
    assert len(digests) == 1, "the demo's questions are one dataset, whatever the system answered"
    [entry] = one(made, "records").inputs.dataset_inputs
    assert json.loads(entry.dataset.source) == {"uri": str((work / "my_records.jsonl").resolve())}
    assert entry.dataset.digest != digests.pop()


@pytest.mark.integration
def test_the_outputs_tag_tells_systems_apart_and_recognises_the_same_one(store):
    _, made, _ = store
    kids = {(k.data.params["retriever"], k.data.params["retriever.top_k"]): k.data.tags["ragexp.outputs_digest"]
            for k in children(made)}
    assert len(set(kids.values())) == 4, "four systems, four fingerprints"
    assert one(made, "bm25").data.tags["ragexp.outputs_digest"] == kids[("bm25", "5")]  # the same system, run again
    # every demo record brings 4 contexts: top_k=5 keeps them all (the plain demo's outputs), top_k=3 does not
    assert one(made, "demo").data.tags["ragexp.outputs_digest"] == kids[("none", "5")]


@pytest.mark.integration
def test_the_sweeps_saved_view_leads_with_each_headline_mean_and_its_interval(store):
    """Issue 42 item 5: MLflow's runs table shows a metric's float unrounded, without its interval, and its chart
    view opens on the alphabetically first section (agreement/…): the saved view's first columns are each headline
    metric's mean with its interval (a tag per child), its chart view's first section those means and the ends of
    their intervals."""
    from ragexp.tracking.leaderboard import HEADLINE_SECTION, VIEW_TAG, interval_tag

    client, made, work = store
    exp = parent(made).info.experiment_id
    view = json.loads(client.get_experiment(exp).tags[VIEW_TAG])
    board = json.loads(open(client.download_artifacts(parent(made).info.run_id, "leaderboard.json", str(work))).read())
    keys = board["headline"]
    assert len(keys) >= 2
    tags = [f"tags.`{interval_tag(k)}`" for k in keys]
    assert view["columnOrder"] == view["selectedColumns"] == ["attributes.`Run Name`", *tags,
                                                              *(f"metrics.`{k}`" for k in keys)]
    assert view["isAccordionReordered"] and view["compareRunSections"][0]["name"] == HEADLINE_SECTION
    assert [c["metricKey"] for c in view["compareRunCharts"]] == [
        k + part for k in keys for part in ("", "/ci_low", "/ci_high")]
    for child in children(made):
        run = client.get_run(child.info.run_id)
        m = run.data.metrics
        for k in keys:
            expected = f"{m[k]:.4f} [{m[k + '/ci_low']:.4f}, {m[k + '/ci_high']:.4f}] n {int(m[k + '/n'])}"
            assert run.data.tags[interval_tag(k)] == expected
