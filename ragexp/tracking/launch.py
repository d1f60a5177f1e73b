"""Which launch this process belongs to, and the sweep's parent run it nests under: the launch id
(one per ``python -m ragexp``, inherited by joblib's workers, part of the sweep folder's name), the
parent run the multirun callback opened (environment, else the sweep folder's file of this same
launch) and the git commit the command runs from. :mod:`ragexp.tracking.log` saves and logs runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

PARENT_ENV = "RAGEXP_PARENT_RUN_ID"
PARENT_URI_ENV = "RAGEXP_PARENT_TRACKING_URI"  # the store the sweep's parent run is in
PARENT_FILE = "mlflow_parent_run.json"
#: A short id unique to one launch of ``python -m ragexp`` (set by ``main``; joblib's workers inherit
#: it): part of the sweep folder's name, and the key the parent lookup checks.
LAUNCH_ENV = "RAGEXP_LAUNCH_ID"
LAUNCH_TAG = "ragexp.launch_id"


def new_launch_id() -> str:
    """A fresh id for one launch: 6 hex digits, so two launches in the same second never share a folder."""
    import uuid

    return uuid.uuid4().hex[:6]


def launch_id() -> str:
    """This launch's id (made once and kept in the environment, so worker processes see the same)."""
    value = os.environ.get(LAUNCH_ENV)
    if not value:
        value = os.environ[LAUNCH_ENV] = new_launch_id()
    return value


def git_commit(path: Path | None = None) -> str | None:
    """The commit of the repository the command runs in, else of the one ragexp itself runs from."""
    for where in (path or Path.cwd(), Path(__file__).resolve().parents[2]):
        try:
            out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    return None


def find_parent_run(sweep_dir: str | None) -> str | None:
    """The parent run this launch's multirun callback opened.

    The environment first: ``on_multirun_start`` sets it in the launching process before any job,
    and joblib's workers inherit it. Then the sweep folder's file, but only when it was written by
    this same launch (its launch id), never another sweep's parent that happens to share the folder.
    A plain run (no sweep folder) has no parent, whatever the environment it inherited says.
    """
    if not sweep_dir:
        return None
    parent = os.environ.get(PARENT_ENV)
    if parent:
        return parent
    try:
        saved = json.loads((Path(sweep_dir) / PARENT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if saved.get("launch_id") and saved.get("launch_id") == os.environ.get(LAUNCH_ENV):
        return saved.get("run_id")
    return None
