"""The MLflow UI as a user sees it, in a real browser: Debian's chromium and chromedriver (``.ci/run``
installs them where missing) drive ``python -m ragexp.ui`` on a store made by a small real sweep.

- the experiment opens on its runs, not on MLflow's GenAI "Traces" page (the experiment-kind tag
  ``mlflow.experimentKind`` that ragexp sets on its experiments);
- a child's per-sample table shows its status values (a dotted column name shows blank);
- the sweep parent's pictures load (an ``<img>`` with a natural width above 0);
- a judged run with people's labels (``dataset=expertqa``, the scripted judge) shows its agreement
  keys, its confusion picture and its disagreements table (docs/judge-trust.md).

Screenshots are saved in the test's temporary folder. With ``RAGEXP_DOCS_SCREENSHOTS=<folder>`` the
two README screenshots (``mlflow-runs.png``, ``mlflow-per-sample.png``) are written there too:
``RAGEXP_DOCS_SCREENSHOTS=docs python -m pytest -q tests/test_ui_browser.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from cli import free_port, parent_and_children, run_cli
from ragexp.cli.ui import stop_process_group

from ragexp.core.results import status_column

UI_START_S = 240  # MLflow's server imports its whole app: 10-20 s here, minutes on a loaded host
PAGE_S = 180  # a page of the single-page app, its data fetched from that server
METRIC = "hit_rate/k1"


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
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,950",
                f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(arg)
    b = webdriver.Chrome(service=Service(driver), options=options)
    b.set_page_load_timeout(PAGE_S)
    yield b
    b.quit()


@pytest.fixture
def sweep_store(tmp_path, data_dir):
    """The README's sweep (the demo's two systems, the default suite) logged to a SQLite store."""
    launch = tmp_path / "launch"
    launch.mkdir()
    run_cli("-m", "dataset.system=strong,weak", f"data_dir={data_dir}", "progress=false", cwd=launch)
    return f"sqlite:///{launch / 'mlflow.db'}"


@pytest.fixture
def ui(sweep_store, tmp_path):
    """``python -m ragexp.ui`` on the sweep's store, on a free port; stopped (the whole group) after."""
    with _serve_ui(sweep_store, tmp_path) as base:
        yield base, sweep_store


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
            os.killpg(proc.pid, signal.SIGKILL) if proc.poll() is None else None
            pytest.fail(f"the UI did not answer at {base}: {(tmp_path / 'ui.log').read_text()[-3000:]}")
        time.sleep(1)
    try:
        yield base
    finally:
        stop_process_group(proc, term_wait=30)
        log.close()


def _reloaded_if_empty(browser) -> bool:
    """MLflow's artifact tab shows "No Artifacts Recorded" when its listing request failed (a loaded host) and
    never asks again: load the page again (returns False, the wait goes on)."""
    if "No Artifacts Recorded" in browser.find_element("tag name", "body").text:
        browser.refresh()
    return False


def _wait(browser, condition, what: str, shot: Path):
    """Wait for ``condition(browser)`` to be truthy; on timeout save a screenshot and fail saying what."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, PAGE_S, poll_frequency=1).until(condition)
    except TimeoutException:
        browser.save_screenshot(str(shot))
        pytest.fail(f"{what} (screenshot: {shot}; page text: {browser.find_element('tag name', 'body').text[:800]!r})")


#: The cells under a column heading: leaf elements whose left edge is the heading's, below it.
COLUMN_CELLS = """
const name = arguments[0];
const leaves = [...document.querySelectorAll('body *')].filter(e => e.children.length === 0 && e.offsetParent);
const head = leaves.find(e => (e.innerText || '').trim() === name);
if (!head) return null;
const box = head.closest('[role=columnheader], th, div') .getBoundingClientRect();
return leaves.filter(e => {
  const b = e.getBoundingClientRect();
  return e !== head && b.top > box.bottom - 1 && Math.abs(b.left - box.left) < 24;
}).map(e => (e.innerText || '').trim());
"""


CLOSE_ASSISTANT = """
const close = [...document.querySelectorAll('button[aria-label=Close]')].pop();
if (close) close.click();
"""
SCROLL_TO = """
const leaf = [...document.querySelectorAll('body *')].find(e => e.children.length === 0 && (e.innerText || '').trim() === arguments[0]);
if (leaf) leaf.scrollIntoView({block: 'nearest', inline: 'start'});
"""


#: Where the README's screenshots go too, resolved now: the tests run in a scratch directory.
DOCS = Path(os.environ["RAGEXP_DOCS_SCREENSHOTS"]).resolve() if os.environ.get("RAGEXP_DOCS_SCREENSHOTS") else None


def _docs_copy(shot: Path) -> None:
    if DOCS is not None:
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, DOCS / shot.name)


@pytest.mark.integration
@pytest.mark.services
def test_runs_first_statuses_shown_and_the_parents_pictures_load(browser, ui, tmp_path):  # skips before the sweep
    base, store = ui
    client, (parent,), children = parent_and_children(store)
    assert len(children) == 2
    exp = parent.info.experiment_id
    # the weak system's child: its values vary (the strong one scores 1 nearly everywhere)
    child = next((c for c in children if c.data.params.get("dataset.system") == "weak"), children[0])

    # 1. the experiment opens on its runs. ragexp marks its experiments for model development (engineer
    # C's tag); MLflow 3.17's UI decides by its "GenAI | Model training" switch instead (remembered by
    # the browser, or ?workflowType= in the address), which is what a user sets once
    assert client.get_experiment(exp).tags.get("mlflow.experimentKind") == "custom_model_development"
    # the address `python -m ragexp.ui` prints opens the sweep's saved view, without a click: its children
    # unfolded, best first, the headline metrics (answer_token_f1, context_recall) as columns
    (page,) = [line.split(": ", 1)[1] for line in (tmp_path / "ui.log").read_text().splitlines()
               if line.startswith("The 'ragexp' runs table")]
    assert "viewStateShareKey=" in page, page
    browser.get(page)
    _wait(browser, lambda b: "dataset.system=weak" in b.find_element("tag name", "body").text,
          "the saved view never listed the sweep's children", tmp_path / "runs-timeout.png")
    assert "/runs" in browser.current_url and "traces" not in browser.current_url.lower(), browser.current_url
    time.sleep(3)  # the table's remaining rows and columns
    browser.execute_script(CLOSE_ASSISTANT)
    time.sleep(1)
    text = browser.find_element("tag name", "body").text
    assert "answer_token_f1" in text and "context_recall" in text, text[:2000]
    assert "0.4939" in text and "0.2220" in text, text[:2000]  # strong's and weak's means, side by side
    assert text.index("dataset.system=strong") < text.index("dataset.system=weak")  # best first
    shot = tmp_path / "mlflow-runs.png"
    browser.save_screenshot(str(shot))
    _docs_copy(shot)

    # the weak child's page: its description leads with where it stands in the sweep
    browser.get(f"{base}/#/experiments/{exp}/runs/{child.info.run_id}?workflowType=machine_learning")
    _wait(browser, lambda b: "below the best run" in b.find_element("tag name", "body").text,
          "the child's description never said where it stands", tmp_path / "child-timeout.png")
    browser.execute_script(CLOSE_ASSISTANT)
    time.sleep(1)
    shot = tmp_path / "mlflow-child.png"
    browser.save_screenshot(str(shot))
    _docs_copy(shot)

    # 2. a child's per-sample table shows the status of each sample
    browser.get(f"{base}/#/experiments/{exp}/runs/{child.info.run_id}/artifacts/per_sample.json"
                "?workflowType=machine_learning")
    column = status_column(METRIC)
    cells = _wait(browser, lambda b: b.execute_script(COLUMN_CELLS, column),
                  f"the per-sample table never showed a '{column}' column with cells", tmp_path / "table-timeout.png")
    browser.execute_script(CLOSE_ASSISTANT)
    browser.execute_script(SCROLL_TO, METRIC)  # the metric's value, status and detail in view
    time.sleep(1)
    shot = tmp_path / "mlflow-per-sample.png"
    browser.save_screenshot(str(shot))
    _docs_copy(shot)
    assert cells and set(cells) <= {"ok", "undefined", "missing_field", "error", "parse_error"}, cells
    assert "ok" in cells

    # 3. the parent's pictures load: the leaderboard's forest plot and the heat map
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"leaderboard.png", "heatmap.png"} <= names
    for picture in ("heatmap.png", "leaderboard.png"):
        browser.get(f"{base}/#/experiments/{exp}/runs/{parent.info.run_id}/artifacts/{picture}?workflowType=machine_learning")
        width = _wait(browser, lambda b: _reloaded_if_empty(b) or b.execute_script(
            "return Math.max(0, ...[...document.images].filter(i => i.src.startsWith('blob:'))"
            ".map(i => i.complete ? i.naturalWidth : 0))"), f"{picture} never loaded as an image",
            tmp_path / f"{picture}-timeout.png")
        assert width > 300
        browser.save_screenshot(str(tmp_path / f"mlflow-{picture}"))


@pytest.mark.integration
@pytest.mark.services
def test_judged_run_shows_agreement_keys_confusion_picture_and_disagreements(browser, tmp_path, data_dir):
    _browser_paths()  # skip before any run when there is no browser
    from judge_server import JudgeServer
    from mlflow.tracking import MlflowClient

    launch = tmp_path / "launch"
    launch.mkdir()
    with JudgeServer() as server:
        run_cli("dataset=expertqa", "dataset.limit=30", "metric=answer_consistency_binary", "judge=openai_compatible",
                f"judge.api_base={server.url}", "stats.resamples=1000", f"data_dir={data_dir}", "progress=false",
                cwd=launch)
    store = f"sqlite:///{launch / 'mlflow.db'}"
    client = MlflowClient(store)
    (run,) = client.search_runs([e.experiment_id for e in client.search_experiments()])
    exp, rid = run.info.experiment_id, run.info.run_id
    key = "agreement/answer_consistency_binary/kappa"
    assert key in run.data.metrics
    with _serve_ui(store, tmp_path) as base:
        # 1. the run's metrics list the agreement keys
        browser.get(f"{base}/#/experiments/{exp}/runs/{rid}?workflowType=machine_learning")
        _wait(browser, lambda b: key in b.find_element("tag name", "body").text,
              f"the run page never listed {key}", tmp_path / "agreement-keys-timeout.png")
        browser.save_screenshot(str(tmp_path / "mlflow-agreement-keys.png"))
        # 2. the disagreements table shows people's and the judge's values
        browser.get("about:blank")
        browser.get(f"{base}/#/experiments/{exp}/runs/{rid}/artifacts/agreement_disagreements.json"
                    "?workflowType=machine_learning")
        cells = _wait(browser, lambda b: b.execute_script(COLUMN_CELLS, "human"),
                      "the disagreements table never showed a 'human' column with cells",
                      tmp_path / "disagreements-timeout.png")
        browser.save_screenshot(str(tmp_path / "mlflow-agreement-disagreements.png"))
        assert cells and set(cells) <= {"0", "1"}, cells
        # 3. the confusion picture loads (a fresh page: the app does not re-render on a changed hash)
        browser.get("about:blank")
        browser.get(f"{base}/#/experiments/{exp}/runs/{rid}/artifacts/agreement_confusion.png")
        width = _wait(browser, lambda b: b.execute_script(
            "return Math.max(0, ...[...document.images].filter(i => i.src.startsWith('blob:'))"
            ".map(i => i.complete ? i.naturalWidth : 0))"), "agreement_confusion.png never loaded as an image",
            tmp_path / "confusion-timeout.png")
        assert width >= 400  # the picture as drawn (4.5 in at 100 dpi at least), not a broken-image icon
        browser.save_screenshot(str(tmp_path / "mlflow-agreement-confusion.png"))
