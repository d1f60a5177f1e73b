"""A run's traces in MLflow's UI, in a real browser (Debian's chromium and chromedriver, as in
tests/test_ui_browser.py), on a store made by a small real sweep of the demo (two systems, 10 questions):

- the run's Traces tab lists the questions with their assessments (metric feedback, expectations);
- MLflow's comparison of the two children pairs each question's traces: one question's two answers
  side by side.

Screenshots are saved in the test's temporary folder; with ``RAGEXP_DOCS_SCREENSHOTS=<folder>`` the two
pictures of docs/traces.md (``traces-run.png``, ``traces-compare.png``) are written there too (tests/browser.py):
``RAGEXP_DOCS_SCREENSHOTS=docs python -m pytest -q -m services tests/test_traces_browser.py``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from browser import chrome, screenshot, serve_ui, text, wait
from cli import parent_and_children, run_cli

METRIC = "answer_token_f1"


@pytest.fixture
def browser(tmp_path):
    with chrome(tmp_path, window="2200,1000") as b:
        yield b


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
        browser, tmp_path, data_dir):
    import mlflow

    launch = tmp_path / "launch"
    launch.mkdir()
    run_cli("-m", "dataset.system=strong,weak", "dataset.limit=10", f"metric=[hit_rate,{METRIC}]",
            f"data_dir={data_dir}", "progress=false", "tracking.plots=false", cwd=launch)
    store = f"sqlite:///{launch / 'mlflow.db'}"
    _, _, children = parent_and_children(store)
    strong, weak = sorted(children, key=lambda r: r.info.run_name)
    exp = strong.info.experiment_id
    mlflow.set_tracking_uri(store)
    answers = {}
    for run in (strong, weak):
        for t in mlflow.search_traces(locations=[exp], run_id=run.info.run_id, return_type="list"):
            root = next(s for s in t.data.spans if s.parent_id is None)
            answers.setdefault(root.inputs["query"], []).append(root.outputs["answer"])
    question = "How many eggs can a honeybee queen lay in a day?"
    assert len(answers[question]) == 2 and answers[question][0] != answers[question][1]

    with serve_ui(store, tmp_path) as base:
        browser.get(f"{base}/#/experiments/{exp}/runs/{strong.info.run_id}/traces")
        run_shot = tmp_path / "traces-run.png"
        wait(browser, lambda b: "10 of 10" in text(b) and "Expectations" in text(b) and "Assessments" in text(b),
              "the run's Traces tab lists its 10 questions with their assessments", run_shot)
        _search(browser, "honeybee queen", run_shot)
        wait(browser, lambda b: question in text(b) and METRIC in text(b) and "1 of 10" in text(b),
              "searching the run's traces finds the question, with its metric", run_shot)
        page = text(browser)
        assert answers[question][0][:20] in page  # the question's answer beside it
        screenshot(browser, run_shot, docs=True)

        browser.get(f"{base}/#/experiments/{exp}/evaluation-runs?selectedRunUuid={strong.info.run_id}"
                    f"&compareToRunUuid={weak.info.run_id}")
        compare_shot = tmp_path / "traces-compare.png"
        wait(browser, lambda b: "Comparing" in text(b), "the comparison of the two children opens", compare_shot)
        _search(browser, "honeybee queen", compare_shot)
        wait(browser, lambda b: question in text(b)
              and all(a[:20] in text(b) for a in answers[question]),
              "the comparison of the two children shows one question's two answers", compare_shot)
        page = text(browser)
        assert page.count(question) == 1  # one row for the question, both runs' traces in it
        screenshot(browser, compare_shot, docs=True)
