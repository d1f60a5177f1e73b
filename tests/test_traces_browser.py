"""Runs' traces in MLflow's UI, in a real browser (Debian's chromium and chromedriver: tests/browser.py), on
one store served once for the module, made by two small real sweeps:

- the demo's two systems on 10 questions: the run's Traces tab lists the questions with their
  assessments (metric feedback, expectations) and execution times (the records' latency); MLflow's comparison of the two children pairs each
  question's traces: one question's two answers side by side (docs/traces.md);
- docs/traced-apps.md's LangChain app (experiments/langchain_app) run by ``pipeline=traced``: the run's
  Traces tab lists the app's own traces (linked to the run), each question with the app's answer and ragexp's
  scores.

- a run over the first questions of two of LoCoMo's conversations (a memory of their turns, BM25, extractive answers;
  ``stats.cluster_by`` their conversation): MLflow's Sessions view (the experiment's traces grouped by session) lists
  one row per conversation, a conversation's questions under it with the run's answers.

Screenshots are saved in the module's temporary folder; with ``RAGEXP_DOCS_SCREENSHOTS=<folder>`` the
pictures of docs/traces.md (``traces-run.png``, ``traces-compare.png``), docs/traced-apps.md
(``traced-app-run.png``) and docs/memory-layers.md (``memory-sessions.png``) are written there too:
``RAGEXP_DOCS_SCREENSHOTS=docs python -m pytest -q -m services tests/test_traces_browser.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from browser import chrome, screenshot, serve_ui, text, wait
from cli import ROOT, parent_and_children, run_cli, runs

METRIC = "answer_token_f1"
APP_EXPERIMENT = "rag-app"


@pytest.fixture
def browser(tmp_path):
    with chrome(tmp_path, window="2200,1000") as b:
        yield b


@pytest.fixture(scope="module")
def launch(tmp_path_factory) -> Path:
    """The launch folder of both sweeps; their store is its mlflow.db."""
    return tmp_path_factory.mktemp("launch")


@pytest.fixture(scope="module")
def demo_sweep(launch, data_dir):
    """The demo's two systems on 10 questions: the strong and the weak child; the metric leads (stats.primary), so
    it is each trace's first assessment (docs/traces.md)."""
    run_cli("-m", "dataset.system=strong,weak", "dataset.limit=10", f"metric=[hit_rate,{METRIC}]",
            f"stats.primary={METRIC}", f"data_dir={data_dir}", "progress=false", "tracking.plots=false", cwd=launch)
    _, _, children = parent_and_children(f"sqlite:///{launch / 'mlflow.db'}")
    return sorted(children, key=lambda r: r.info.run_name)


@pytest.fixture(scope="module")
def app_run(launch):
    """docs/traced-apps.md's LangChain app (experiments/langchain_app) run by ``pipeline=traced`` with k=3 on the
    page's 10 demo questions, in an experiment of its own: the run."""
    shutil.copy(ROOT / "experiments" / "langchain_app" / "rag_app.py", launch / "rag_app.py")
    run_cli("dataset=demo", "dataset.system=null", "dataset.limit=10", "pipeline=traced",
            "pipeline.factory=rag_app:build", "pipeline.context_id=metadata.source", "+pipeline.kwargs.k=3",
            "metric=[recall_at_k,answer_token_f1,avg_latency]", "stats.primary=answer_token_f1",
            f"tracking.experiment={APP_EXPERIMENT}",
            "progress=false", "tracking.plots=false", cwd=launch)
    _, (run,) = runs(f"sqlite:///{launch / 'mlflow.db'}", APP_EXPERIMENT)
    return run


@pytest.fixture(scope="module")
def ui(launch):
    """``python -m ragexp.ui`` on the module's store, started once (MLflow's server takes 10-20 s to start)."""
    with serve_ui(f"sqlite:///{launch / 'mlflow.db'}", launch) as base:
        yield base


def _answers(store: str, *children) -> dict[str, list[str]]:
    """Each question's answers in the runs' traces (ragexp's own, or the app's linked to the run), in their order."""
    import mlflow

    from ragexp.common.spans import read_trace

    client = mlflow.MlflowClient(store)
    answers: dict[str, list[str]] = {}
    for run in children:
        for t in client.search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id, max_results=100):
            raw = read_trace(t).raw
            answers.setdefault(raw["query"], []).append(raw["answer"])
    return answers


def _milliseconds(store: str, run, question: str) -> int:
    """The execution time MLflow keeps for the trace of ``question`` in ``run`` (the record's latency)."""
    import mlflow

    from ragexp.common.spans import read_trace

    traces = mlflow.MlflowClient(store).search_traces(locations=[run.info.experiment_id], run_id=run.info.run_id)
    return next(t.info.execution_duration for t in traces if read_trace(t).raw["query"] == question)


def _search(browser, words: str, shot: Path) -> None:
    """Type ``words`` into the traces table's search box, as a user looking for one question does."""
    from selenium.webdriver.common.keys import Keys

    box = wait(browser, lambda b: next(iter(b.find_elements("css selector", "input[placeholder^='Search traces']")),
                                       None), "the traces table's search box", shot)
    box.send_keys(words)
    box.send_keys(Keys.ENTER)


@pytest.mark.integration
@pytest.mark.services
def test_the_runs_traces_list_questions_with_assessments_and_two_children_compare_side_by_side(
        launch, demo_sweep, ui, browser):
    strong, weak = demo_sweep
    exp = strong.info.experiment_id
    answers = _answers(f"sqlite:///{launch / 'mlflow.db'}", strong, weak)
    question = "How many eggs can a honeybee queen lay in a day?"
    assert len(answers[question]) == 2 and answers[question][0] != answers[question][1]

    base = ui
    browser.get(f"{base}/#/experiments/{exp}/runs/{strong.info.run_id}/traces")
    run_shot = launch / "traces-run.png"
    wait(browser, lambda b: "10 of 10" in text(b) and "Expectations" in text(b) and "Assessments" in text(b),
         "the run's Traces tab lists its 10 questions with their assessments", run_shot)
    _search(browser, "honeybee queen", run_shot)
    wait(browser, lambda b: question in text(b) and METRIC in text(b) and "1 of 10" in text(b),
         "searching the run's traces finds the question, with its metric", run_shot)
    page = text(browser)
    assert answers[question][0][:20] in page  # the question's answer beside it
    ms = _milliseconds(f"sqlite:///{launch / 'mlflow.db'}", strong, question)
    assert ms > 1000 and f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s" in page  # its execution time: the latency
    screenshot(browser, run_shot, docs=True)

    browser.get(f"{base}/#/experiments/{exp}/evaluation-runs?selectedRunUuid={strong.info.run_id}"
                f"&compareToRunUuid={weak.info.run_id}")
    compare_shot = launch / "traces-compare.png"
    wait(browser, lambda b: "Comparing" in text(b), "the comparison of the two children opens", compare_shot)
    # both children traced the same 10 questions: every row in view pairs them, each question with its two answers
    # (the picture is taken before any search: MLflow's search box narrows the first run's traces only, and the
    # other run's then show beside 'null')
    paired = lambda b: sum(q in text(b) and all(a[:20] in text(b) for a in two)  # noqa: E731
                           for q, two in answers.items())
    wait(browser, lambda b: paired(b) >= 4, "the comparison pairs the questions in view", compare_shot)
    assert "null" not in text(browser), text(browser)[:3000]
    screenshot(browser, compare_shot, docs=True)
    _search(browser, "honeybee queen", compare_shot)
    wait(browser, lambda b: question in text(b)
         and all(a[:20] in text(b) for a in answers[question]),
         "the comparison of the two children shows one question's two answers", compare_shot)
    page = text(browser)
    assert page.count(question) == 1  # one row for the question, both runs' traces in it


@pytest.mark.integration
@pytest.mark.services
def test_a_traced_langchain_apps_run_lists_each_question_with_the_apps_answer_and_its_scores(launch, app_run, ui,
                                                                                               browser):
    answers = {q: a for q, (a,) in _answers(f"sqlite:///{launch / 'mlflow.db'}", app_run).items()}
    assert len(answers) == 10
    import mlflow

    linked = mlflow.MlflowClient(f"sqlite:///{launch / 'mlflow.db'}").search_traces(
        locations=[app_run.info.experiment_id], run_id=app_run.info.run_id)
    assert not any("ragexp.run_id" in t.info.tags for t in linked)  # the app's own traces, linked, no copies

    browser.get(f"{ui}/#/experiments/{app_run.info.experiment_id}/runs/{app_run.info.run_id}/traces")
    shot = launch / "traced-app-run.png"
    wait(browser, lambda b: "10 of 10" in text(b) and "Expectations" in text(b) and "Assessments" in text(b),
         "the app's run lists its 10 questions with their assessments", shot)
    # the table renders the rows in view (8 of 10 at this window's height), each question with the app's answer
    wait(browser, lambda b: sum(q in text(b) and a[:20] in text(b) for q, a in answers.items()) >= 6,
         "the questions are listed with the app's answers", shot)
    page = text(browser)
    assert "answer_token_f1" in page, page[:2000]  # ragexp's headline metric as an assessment
    screenshot(browser, shot, docs=True)


#: how many questions of each conversation the Sessions run keeps (LoCoMo's first ones)
CONVERSATIONS = {"conv-26": 3, "conv-30": 2}


@pytest.fixture(scope="module")
def memory_run(launch, data_dir):
    """docs/memory-layers.md's run on two of LoCoMo's conversations (the real file's first questions of each): a memory
    of their turns searched by BM25, answered by the extractive generator (real answers, each a turn of the
    conversation); each trace's session is its conversation (stats.cluster_by, LoCoMo's default). Returns the run
    and each conversation's questions."""
    import json

    import mlflow

    kept = [dict(c, qa=c["qa"][:CONVERSATIONS[c["sample_id"]]])
            for c in json.loads((data_dir / "locomo" / "locomo10.json").read_text(encoding="utf-8"))
            if c["sample_id"] in CONVERSATIONS]
    (launch / "two_conversations.json").write_text(json.dumps(kept), encoding="utf-8")
    run_cli("dataset=locomo", f"dataset.path={launch / 'two_conversations.json'}", "memory_layer=turns",
            "retriever=bm25", "generator=extractive", "metric=answer_token_f1", "stats.resamples=200",
            "tracking.plots=false", "tracking.experiment=memory", "progress=false", f"data_dir={data_dir}", cwd=launch)
    _, (run,) = runs(f"sqlite:///{launch / 'mlflow.db'}", "memory")
    return run, {c["sample_id"]: [q["question"] for q in c["qa"]] for c in kept}


#: Clicks the expand button of the row whose text holds arguments[0] (a session of the grouped traces table).
EXPAND_ROW = """
const row = [...document.querySelectorAll('[role=row], tr')].find(r => (r.innerText || '').includes(arguments[0]));
const button = row && row.querySelector('button');
if (button) button.click();
return Boolean(button);
"""


@pytest.mark.integration
@pytest.mark.services
def test_mlflows_sessions_view_groups_a_conversations_questions(launch, memory_run, ui, browser):
    run, questions = memory_run
    shot = launch / "memory-sessions.png"
    answers = {q: a for q, (a,) in _answers(f"sqlite:///{launch / 'mlflow.db'}", run).items()}
    assert len(answers) == 5 and all(answers.values())  # the extractive generator's answers, none empty
    browser.get(f"{ui}/#/experiments/{run.info.experiment_id}/traces?groupBy=session")
    wait(browser, lambda b: all(conv in text(b) for conv in CONVERSATIONS),
         "the Sessions view lists one row per conversation", shot)
    for got_it in browser.find_elements("xpath", "//button[normalize-space(.)='Got it']"):
        got_it.click()  # MLflow's one-time hint over the table
    wait(browser, lambda b: b.execute_script(EXPAND_ROW, "conv-26"), "conv-26's row can be unfolded", shot)
    wait(browser, lambda b: all(q in text(b) for q in questions["conv-26"]),
         "conv-26's row unfolds to its three questions", shot)
    page = text(browser)
    assert all(answers[q][:20] in page for q in questions["conv-26"]), page[:2000]  # each with the run's answer
    assert page.count("conv-30") == 1  # the other conversation: one row, its two questions folded in it
    screenshot(browser, shot, docs=True)
