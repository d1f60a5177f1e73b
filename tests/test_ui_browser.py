"""The MLflow UI as a user sees it, in a real browser: Debian's chromium and chromedriver (``.ci/run``
installs them where missing) drive ``python -m ragexp.ui`` on a store made by a small real sweep.

- the experiment opens on its runs, not on MLflow's GenAI "Traces" page (the experiment-kind tag
  ``mlflow.experimentKind`` that ragexp sets on its experiments);
- a child's per-sample table shows its status values (a dotted column name shows blank);
- the sweep parent's pictures load (an ``<img>`` with a natural width above 0);
- a judged run with people's labels (``dataset=expertqa``, the scripted judge) shows its agreement
  keys, its confusion picture and its disagreements table (docs/judge-trust.md).

Screenshots are saved in the test's temporary folder. With ``RAGEXP_DOCS_SCREENSHOTS=<folder>`` the
four screenshots of docs/tracking.md (``mlflow-runs.png``, ``mlflow-charts.png``, ``mlflow-child.png``,
``mlflow-per-sample.png``)
are written there too (tests/browser.py):
``RAGEXP_DOCS_SCREENSHOTS=docs python -m pytest -q -m services tests/test_ui_browser.py``.
"""

from __future__ import annotations

import time

import pytest

from browser import PICTURE_WIDTH, chrome, screenshot, serve_ui, text, wait
from cli import parent_and_children, run_cli
from ragexp.results.columns import status_column

METRIC = "hit_rate/hit_rate_at_1"


@pytest.fixture
def browser(tmp_path):
    with chrome(tmp_path, window="1500,950") as b:
        yield b


#: the name of a run made before the sweep, in the same experiment: the sweep's saved view leaves it out
EARLIER_RUN = "demo · limit=5"


@pytest.fixture
def sweep_store(tmp_path, data_dir):
    """A single run on 5 questions (:data:`EARLIER_RUN`), then the README's sweep (the demo's two systems, the
    default suite), logged to one SQLite store."""
    launch = tmp_path / "launch"
    launch.mkdir()
    run_cli("dataset.limit=5", "tracking.plots=false", f"data_dir={data_dir}", "progress=false", cwd=launch)
    run_cli("-m", "dataset.system=strong,weak", f"data_dir={data_dir}", "progress=false", cwd=launch)
    return f"sqlite:///{launch / 'mlflow.db'}"


@pytest.fixture
def ui(sweep_store, tmp_path):
    """``python -m ragexp.ui`` on the sweep's store, on a free port; stopped (the whole group) after."""
    with serve_ui(sweep_store, tmp_path) as base:
        yield base, sweep_store


def _reloaded_if_empty(browser) -> bool:
    """MLflow's artifact tab shows "No Artifacts Recorded" when its listing request failed (a loaded host) and
    never asks again: load the page again (returns False, the wait goes on)."""
    if "No Artifacts Recorded" in text(browser):
        browser.refresh()
    return False


#: The headings of the page's table, left to right.
HEADINGS = "return [...document.querySelectorAll('[role=columnheader], th')].map(e => (e.innerText || '').trim());"

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


@pytest.mark.integration
@pytest.mark.services
def test_runs_first_statuses_shown_and_the_parents_pictures_load(browser, ui, tmp_path):  # skips before the sweep
    base, store = ui
    client, parents, children = parent_and_children(store)
    (parent,) = [p for p in parents if p.data.tags.get("ragexp.role") == "parent"]
    assert len(children) == 2 and EARLIER_RUN in [p.info.run_name for p in parents]
    exp = parent.info.experiment_id
    # the weak system's child: its values vary (the strong one scores 1 nearly everywhere)
    child = next((c for c in children if c.data.params.get("dataset.system") == "weak"), children[0])

    # 1. the experiment opens on its runs. ragexp marks its experiments for model development (engineer
    # C's tag); MLflow 3.17's UI decides by its "GenAI | Model training" switch instead (remembered by
    # the browser, or ?workflowType= in the address), which is what a user sets once
    assert client.get_experiment(exp).tags.get("mlflow.experimentKind") == "custom_model_development"
    # the address `python -m ragexp.ui` prints opens the sweep's saved view, without a click: its children
    # unfolded, best first, the headline metrics (answer_token_f1, context_recall) as columns
    # the line comes after the server answers (ragexp.ui asks it for the sweep's view first): wait for it
    lines = lambda: [line.split(": ", 1)[1] for line in (tmp_path / "ui.log").read_text().splitlines()  # noqa: E731
                     if line.startswith("The 'ragexp' runs table")]
    deadline = time.monotonic() + 60
    while not lines() and time.monotonic() < deadline:
        time.sleep(0.5)
    (page,) = lines()
    assert "viewStateShareKey=" in page, page
    browser.get(page)
    wait(browser, lambda b: "dataset.system=weak" in text(b),
         "the saved view never listed the sweep's children", tmp_path / "runs-timeout.png")
    assert "/runs" in browser.current_url and "traces" not in browser.current_url.lower(), browser.current_url
    time.sleep(1)  # the table's remaining rows and columns (and 2 s more in screenshot)
    screenshot(browser, tmp_path / "mlflow-runs.png", docs=True)
    page = text(browser)
    assert "answer_token_f1" in page and "context_recall" in page, page[:2000]
    # the first columns: each headline mean rounded, with its interval and n (MLflow shows a metric's float whole)
    from ragexp.tracking.leaderboard import interval_tag

    for c in children:  # strong's and weak's means with their intervals, side by side
        assert f"{c.data.metrics['answer_token_f1']:.4f} [" in page, page[:2000]
        assert client.get_run(c.info.run_id).data.tags[interval_tag("answer_token_f1")] in page, page[:2000]
    assert page.index("dataset.system=strong") < page.index("dataset.system=weak")  # best first
    # each child its own colour, the best's first (MLflow's own, picked from the run id, can be two near-identical
    # greys, and its charts tell runs apart by colour alone)
    from ragexp.tracking.leaderboard import COLOR_TAG, run_color

    colors = {c.data.params.get("dataset.system"): c.data.tags.get(COLOR_TAG) for c in children}
    assert colors == {"strong": run_color(0), "weak": run_color(1)}, colors
    # the last sweep's runs only: the run made before it is in the experiment, not in the view
    assert EARLIER_RUN not in page and "2 matching runs" in page, page[:2000]
    # the GenAI "Evaluation runs" table: its metric columns lead with the headline metrics and their intervals (the
    # order they were logged in), not with the suite's first key (token_precision)
    browser.get(f"{base}/#/experiments/{exp}/evaluation-runs?workflowType=genai")
    heads = wait(browser, lambda b: "token_precision" in text(b) and b.execute_script(HEADINGS),
                 "the Evaluation runs table never showed its metric columns", tmp_path / "eval-runs-timeout.png")
    metrics = heads[heads.index("Dataset") + 1:]
    assert metrics[:6] == [f"{k}{part}" for k in ("answer_token_f1", "context_recall")
                           for part in ("", "/ci_low", "/ci_high")], heads
    screenshot(browser, tmp_path / "mlflow-evaluation-runs.png")
    browser.get(f"{base}/#/experiments/{exp}/runs?workflowType=machine_learning&viewStateShareKey=ragexp-last-sweep")
    wait(browser, lambda b: "dataset.system=weak" in text(b), "the saved view, again", tmp_path / "runs-timeout.png")
    assert page.index(interval_tag("answer_token_f1")) < page.index(interval_tag("context_recall"))

    # the chart view opens on the headline metrics and the ends of their intervals, not on agreement/...
    browser.get(browser.current_url + "&compareRunsMode=CHART")
    wait(browser, lambda b: "Headline metrics" in text(b) and "answer_token_f1/ci_low" in text(b),
         "the chart view never showed the headline section", tmp_path / "charts-timeout.png")
    page = text(browser)
    assert page.index("Headline metrics") < min(page.index(k) for k in ("agreement", "bleu") if k in page)
    screenshot(browser, tmp_path / "mlflow-charts.png", docs=True)

    # the weak child's page: its description leads with where it stands in the sweep
    browser.get(f"{base}/#/experiments/{exp}/runs/{child.info.run_id}?workflowType=machine_learning")
    wait(browser, lambda b: "below the best run" in text(b),
         "the child's description never said where it stands", tmp_path / "child-timeout.png")
    screenshot(browser, tmp_path / "mlflow-child.png", docs=True)

    # 2. a child's per-sample table shows the status of each sample
    browser.get(f"{base}/#/experiments/{exp}/runs/{child.info.run_id}/artifacts/per_sample.json"
                "?workflowType=machine_learning")
    column = status_column(METRIC)
    cells = wait(browser, lambda b: b.execute_script(COLUMN_CELLS, column),
                 f"the per-sample table never showed a '{column}' column with cells", tmp_path / "table-timeout.png")
    # the metric's value, status and detail in view
    screenshot(browser, tmp_path / "mlflow-per-sample.png", scroll_to=METRIC, docs=True, leave_out="Path:")
    assert cells and set(cells) <= {"ok", "undefined", "missing_field", "error", "parse_error"}, cells
    assert "ok" in cells

    # 3. the parent's pictures load: the leaderboard's forest plot and the heat map
    names = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"leaderboard.png", "heatmap.png"} <= names
    for picture in ("heatmap.png", "leaderboard.png"):
        browser.get(f"{base}/#/experiments/{exp}/runs/{parent.info.run_id}/artifacts/{picture}?workflowType=machine_learning")
        width = wait(browser, lambda b: _reloaded_if_empty(b) or b.execute_script(PICTURE_WIDTH),
                     f"{picture} never loaded as an image", tmp_path / f"{picture}-timeout.png")
        assert width > 300
        browser.save_screenshot(str(tmp_path / f"mlflow-{picture}"))


@pytest.mark.integration
@pytest.mark.services
def test_judged_run_shows_agreement_keys_confusion_picture_and_disagreements(browser, tmp_path, data_dir):
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
    with serve_ui(store, tmp_path) as base:
        # 1. the run's metrics list the agreement keys
        browser.get(f"{base}/#/experiments/{exp}/runs/{rid}?workflowType=machine_learning")
        wait(browser, lambda b: key in text(b),
             f"the run page never listed {key}", tmp_path / "agreement-keys-timeout.png")
        browser.save_screenshot(str(tmp_path / "mlflow-agreement-keys.png"))
        # 2. the disagreements table shows people's and the judge's values
        browser.get("about:blank")
        browser.get(f"{base}/#/experiments/{exp}/runs/{rid}/artifacts/agreement_disagreements.json"
                    "?workflowType=machine_learning")
        cells = wait(browser, lambda b: b.execute_script(COLUMN_CELLS, "human"),
                     "the disagreements table never showed a 'human' column with cells",
                     tmp_path / "disagreements-timeout.png")
        browser.save_screenshot(str(tmp_path / "mlflow-agreement-disagreements.png"))
        assert cells and set(cells) <= {"0", "1"}, cells
        # 3. the confusion picture loads (a fresh page: the app does not re-render on a changed hash)
        browser.get("about:blank")
        browser.get(f"{base}/#/experiments/{exp}/runs/{rid}/artifacts/agreement_confusion.png")
        width = wait(browser, lambda b: b.execute_script(PICTURE_WIDTH), "agreement_confusion.png never loaded as an image",
                     tmp_path / "confusion-timeout.png")
        assert width >= 400  # the picture as drawn (4.5 in at 100 dpi at least), not a broken-image icon
        browser.save_screenshot(str(tmp_path / "mlflow-agreement-confusion.png"))
