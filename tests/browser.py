"""A real browser on MLflow's UI, for the browser tests (tests/test_ui_browser.py, tests/test_traces_browser.py).

- :func:`chrome`: Debian's chromium driven by its chromedriver through Selenium, headless, with a profile
  of its own in the test's folder; the test skips, saying why, when either (or selenium) is missing.
- :func:`serve_ui`: ``python -m ragexp.ui`` on a store, on a free port of 127.0.0.1, its whole process
  group stopped after.
- :func:`wait`: wait for what the page should show; on timeout, a screenshot and a failure that says what.
- :func:`screenshot`: the MLflow assistant's side panel closed (and a column scrolled into view), the picture saved in the test's folder
  and, with ``RAGEXP_DOCS_SCREENSHOTS=<folder>``, the docs' pictures copied there too:
  ``RAGEXP_DOCS_SCREENSHOTS=docs python -m pytest -q -m services tests/test_ui_browser.py tests/test_traces_browser.py``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli import free_port
from ragexp.cli.ui import stop_process_group

UI_START_S = 240  # MLflow's server imports its whole app: 10-20 s here, minutes on a loaded host
PAGE_S = 180  # a page of the single-page app, its data fetched from that server
#: Where the docs' screenshots go too, resolved at import: the tests run in a scratch directory.
DOCS = Path(os.environ["RAGEXP_DOCS_SCREENSHOTS"]).resolve() if os.environ.get("RAGEXP_DOCS_SCREENSHOTS") else None
CLOSE_ASSISTANT = """
const close = [...document.querySelectorAll('button[aria-label=Close]')].pop();
if (close) close.click();
"""
#: Scrolls the page's first element whose whole text is arguments[0] into view, at the left.
SCROLL_TO = """
const leaf = [...document.querySelectorAll('body *')].find(e => e.children.length === 0 && (e.innerText || '').trim() === arguments[0]);
if (leaf) leaf.scrollIntoView({block: 'nearest', inline: 'start'});
"""
#: The widest picture the page has loaded from the server (an artifact shown as an image), 0 while none has.
PICTURE_WIDTH = """
return Math.max(0, ...[...document.images].filter(i => i.src.startsWith('blob:'))
                        .map(i => i.complete ? i.naturalWidth : 0));
"""


def browser_paths() -> tuple[str, str]:
    """chromium's and chromedriver's paths; the test skips when either is not installed."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("chromium and chromedriver are not installed (Debian: apt-get install chromium "
                    "chromium-driver; .ci/run does it where apt-get is available)")
    return chromium, driver


@contextlib.contextmanager
def chrome(folder: Path, window: str = "1500,950") -> Iterator:
    """A headless chromium of ``window`` pixels (``"width,height"``), its profile in ``folder``; quit after."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (the dev extra)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    chromium, driver = browser_paths()
    options = Options()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", f"--window-size={window}",
                f"--user-data-dir={folder / 'chromium-profile'}"):
        options.add_argument(arg)
    browser = webdriver.Chrome(service=Service(driver), options=options)
    browser.set_page_load_timeout(PAGE_S)
    try:
        yield browser
    finally:
        browser.quit()


@contextlib.contextmanager
def serve_ui(store: str, folder: Path) -> Iterator[str]:
    """``python -m ragexp.ui`` on ``store``, launched from ``folder`` (its output in ``folder/ui.log``);
    yields the address once ``/health`` answers."""
    port = free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    with open(folder / "ui.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "ragexp.cli.ui", f"tracking.uri={store}", f"port={port}"],
                                cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
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
                pytest.fail(f"the UI did not answer at {base}: {(folder / 'ui.log').read_text()[-3000:]}")
            time.sleep(1)
        try:
            yield base
        finally:
            stop_process_group(proc, term_wait=30)


def text(browser) -> str:
    """What the page says."""
    return browser.find_element("tag name", "body").text


def wait(browser, condition, what: str, shot: Path):
    """Wait for ``condition(browser)`` to be truthy and return it; on timeout save a screenshot at ``shot``
    and fail saying ``what`` was expected, with the start of the page's text."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(browser, PAGE_S, poll_frequency=1).until(condition)
    except TimeoutException:
        browser.save_screenshot(str(shot))
        pytest.fail(f"{what} (screenshot: {shot}; page text: {text(browser)[:800]!r})")


#: The box (left, top, right, bottom, in CSS pixels) of the line holding the page's first leaf element whose text
#: starts with arguments[0] (the leaf's parent: the text and what sits beside it), and the window's width; null when
#: there is none.
LINE_BOX = """
const leaf = [...document.querySelectorAll('body *')].find(e => e.children.length === 0
                                                         && (e.innerText || '').trim().startsWith(arguments[0]));
if (!leaf) return null;
const box = leaf.parentElement.getBoundingClientRect();
return [box.left, box.top, box.right, box.bottom, window.innerWidth];
"""


def screenshot(browser, path: Path, scroll_to: str | None = None, docs: bool = False,
               leave_out: str | None = None) -> None:
    """Close the assistant's panel, bring the text ``scroll_to`` into view, let the page settle, save the picture
    at ``path``; with ``docs`` it is one of the docs' pictures, copied to ``$RAGEXP_DOCS_SCREENSHOTS`` when set.
    ``leave_out``: the line that starts with this text is blanked with the colour beside it (the test's temporary
    folder in an artifact's path, which a reader's store does not have)."""
    browser.execute_script(CLOSE_ASSISTANT)
    if scroll_to is not None:
        browser.execute_script(SCROLL_TO, scroll_to)
    time.sleep(2)  # the panel's closing animation, the scroll
    browser.save_screenshot(str(path))
    box = browser.execute_script(LINE_BOX, leave_out) if leave_out else None
    if box:
        from PIL import Image, ImageDraw

        with Image.open(path) as shot:
            scale = shot.width / box[4]
            left, top, right, bottom = (int(v * scale) for v in box[:4])
            picture = shot.convert("RGB")
        ImageDraw.Draw(picture).rectangle((left, top, right, bottom), fill=picture.getpixel((max(left - 2, 0), top)))
        picture.save(path)
    if docs and DOCS is not None:
        DOCS.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, DOCS / path.name)
