"""A run's traces in MLflow's UI, in a real browser (Debian's chromium and chromedriver, as in
tests/test_ui_browser.py), on a store made by a small real sweep of the demo (two systems, 10 questions):

- the run's Traces tab lists the questions with their assessments (metric feedback, expectations);
- MLflow's comparison of the two children pairs each question's traces: one question's two answers
  side by side.

Screenshots are saved in the test's temporary folder; with ``RAGEXP_DOCS_SCREENSHOTS=<folder>`` the two
pictures of docs/traces.md (``traces-run.png``, ``traces-compare.png``) are written there too:
``RAGEXP_DOCS_SCREENSHOTS=docs python -m pytest -q -m services tests/test_traces_browser.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cli import free_port, parent_and_children, run_cli
from ragexp.cli.ui import stop_process_group

UI_START_S = 240  # MLflow's server imports its whole app: 10-20 s here, minutes on a loaded host
PAGE_S = 180
METRIC = "answer_token_f1"
DOCS = Path(os.environ["RAGEXP_DOCS_SCREENSHOTS"]).resolve() if os.environ.get("RAGEXP_DOCS_SCREENSHOTS") else None
CLOSE_ASSISTANT = """
const close = [...document.querySelectorAll('button[aria-label=Close]')].pop();
if (close) close.click();
"""


def _browser_paths() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromedriver are not installed (Debian: apt-get install chromium "
                    "chromium-driver; .ci/run does it where apt-get is available)")
    return chromium, driver


@pytest.fixture
def browser(tmp_path):
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver = _browser_paths()
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=2200,1000",
                f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    b = webdriver.Chrome(service=Service(driver), options=options)
    b.set_page_load_timeout(PAGE_S)
    yield b
    b.quit()


@contextlib.contextmanager
def _serve_ui(store: str, tmp_path: Path):
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    log = open(tmp_path / "ui.log", "w")
    proc = subprocess.Popen([sys.executable, "-m", "ragexp.cli.ui", f"tracking.uri={store}", f"port={port}"],
                            cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + UI_START_S
    while True:
        try:
            with urllib.request.urlopen(f"{base}/health", timeout=3) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            stop_process_group(proc, term_wait=5)
            pytest.fail(f"the UI did not answer at {base}: {(tmp_path / 'ui.log').read_text()[-3000:]}")
        time.sleep(1)
    try:
        yield base
    finally:
        stop_process_group(proc, term_wait=30)
        log.close()


def _wait(browser, condition, what: str, shot: Path):
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, PAGE_S, poll_frequency=1).until(condition)
    except TimeoutException:
        browser.save_screenshot(str(shot))
        pytest.fail(f"{what} (screenshot: {shot}; page text: {browser.find_element('tag name', 'body').text[:800]!r})")


def _search(browser, words: str, shot: Path) -> None:
    """Type ``words`` into the traces table's search box, as a user looking for one question does."""
    from selenium.webdriver.common.keys import Keys

    box = _wait(browser, lambda b: next(iter(b.find_elements("css selector", "input[placeholder^='Search traces']")),
                                        None), "the traces table's search box", shot)
    box.send_keys(words)
    box.send_keys(Keys.ENTER)


def _text(browser) -> str:
    return browser.find_element("tag name", "body").text


def _shot(browser, path: Path) -> None:
    browser.execute_script(CLOSE_ASSISTANT)
    time.sleep(2)  # the panel's closing animation
    browser.save_screenshot(str(path))
    if DOCS is not None:
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS / path.name)


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

    with _serve_ui(store, tmp_path) as base:
        browser.get(f"{base}/#/experiments/{exp}/runs/{strong.info.run_id}/traces")
        run_shot = tmp_path / "traces-run.png"
        _wait(browser, lambda b: "10 of 10" in _text(b) and "Expectations" in _text(b) and "Assessments" in _text(b),
              "the run's Traces tab lists its 10 questions with their assessments", run_shot)
        _search(browser, "honeybee queen", run_shot)
        _wait(browser, lambda b: question in _text(b) and METRIC in _text(b) and "1 of 10" in _text(b),
              "searching the run's traces finds the question, with its metric", run_shot)
        page = _text(browser)
        assert answers[question][0][:20] in page  # the question's answer beside it
        _shot(browser, run_shot)

        browser.get(f"{base}/#/experiments/{exp}/evaluation-runs?selectedRunUuid={strong.info.run_id}"
                    f"&compareToRunUuid={weak.info.run_id}")
        compare_shot = tmp_path / "traces-compare.png"
        _wait(browser, lambda b: "Comparing" in _text(b), "the comparison of the two children opens", compare_shot)
        _search(browser, "honeybee queen", compare_shot)
        _wait(browser, lambda b: question in _text(b)
              and all(a[:20] in _text(b) for a in answers[question]),
              "the comparison of the two children shows one question's two answers", compare_shot)
        page = _text(browser)
        assert page.count(question) == 1  # one row for the question, both runs' traces in it
        _shot(browser, compare_shot)
