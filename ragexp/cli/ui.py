"""``python -m ragexp.ui``: the MLflow UI on ragexp's runs, on a machine without internet access.

``mlflow ui`` hangs at start on an offline machine: MLflow's server imports litellm, whose
price-map download waits for a network that is not there. This command starts MLflow's own
server with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` (litellm's bundled price map) and MLflow's
telemetry off, bound to 127.0.0.1, waits until it answers and prints its address.

Which store, as ``python -m ragexp`` and ``python -m ragexp.compare`` choose it (Hydra-style
overrides): ``tracking.uri=...``, else ``$MLFLOW_TRACKING_URI``, else ``./mlflow.db``;
``folder=<sweep or results folder>`` opens the store that sweep's or run's results went to.
``port=5001`` (``port=0``: any free port). Ctrl-C stops the server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig

from ragexp.common.paths import conf_dir, plain
from ragexp.errors import ConfigError, RagexpError
from ragexp.tracking.store import artifact_root, require_existing_store, resolve_uri, ui_command

HOST = "127.0.0.1"


def store_of_folder(folder: str | Path) -> str:
    """The store a sweep folder's parent run or a results folder's run was logged to."""
    from ragexp.tracking.launch import PARENT_FILE
    from ragexp.tracking.log import MANIFEST_FILE

    where = Path(folder)
    for name in (PARENT_FILE, MANIFEST_FILE):
        f = where / name
        if f.is_file():
            try:
                saved = json.loads(f.read_text(encoding="utf-8"))
            except (ValueError, OSError) as exc:  # not JSON, not text, unreadable: one line naming it
                raise ConfigError(f"folder={folder}: {f} cannot be read as the run's JSON ({exc})") from None
            if not isinstance(saved, dict):
                raise ConfigError(f"folder={folder}: {f} holds no JSON object")
            uri = (saved.get("logged") or {}).get("tracking_uri") or saved.get("tracking_uri")
            if uri:
                from ragexp.common.secrets import restore_url

                return restore_url(str(uri))  # saved without credentials (docs/guarantees.md)
    raise ConfigError(f"folder={folder}: neither a sweep folder ({PARENT_FILE}) nor a run's results folder "
                      f"({MANIFEST_FILE}); pass the folder a run or sweep printed, or tracking.uri=...")


def choose_store(tracking_uri: str | None, folder: str | None) -> str:
    """``folder=`` first, then ``tracking.uri`` / ``$MLFLOW_TRACKING_URI`` / ``./mlflow.db``; checked to exist."""
    uri = store_of_folder(folder) if folder else resolve_uri(tracking_uri)
    if uri.startswith(("http://", "https://")):
        raise ConfigError(f"{uri} is a tracking server already: {ui_command(uri)}")
    require_existing_store(uri)
    return uri


def _port(port: int) -> int:
    """``port`` (0: any free one) once nothing listens on it (an earlier UI's connections left in TIME_WAIT
    do not count)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            raise ConfigError(f"port {port} on {HOST} is in use (another UI?); pick another with port={port + 1}, "
                              "or port=0 for any free one") from None
        return s.getsockname()[1]


def server_command(uri: str, port: int, workers: int = 1) -> list[str]:
    """MLflow's server on ``uri`` at 127.0.0.1:``port``; new experiments keep artifacts beside a SQLite store."""
    cmd = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri, "--host", HOST,
           "--port", str(port), "--workers", str(workers)]
    root = artifact_root(uri)
    if root:
        cmd += ["--artifacts-destination", root]
    return cmd


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def stop_process_group(proc: subprocess.Popen, *, term_wait: float = 10, kill_wait: float = 5) -> None:
    """A server started with ``start_new_session=True`` and the workers it started (one process
    group): SIGTERM, then after ``term_wait`` seconds SIGKILL. Nothing happens if it already ended."""
    for sig, wait in ((signal.SIGTERM, term_wait), (signal.SIGKILL, kill_wait)):
        if proc.poll() is not None:
            break
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue


def _on_sigterm(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def runs_page(url: str, experiment: str) -> str | None:
    """The address of ``experiment``'s runs table on the UI at ``url``, or None when it has no such experiment.

    MLflow 3's UI opens an experiment on its GenAI pages until its *Model training* switch is set;
    ``workflowType=machine_learning`` in the address sets it, so the link lands on the runs. When a sweep
    saved its view (:func:`ragexp.tracking.leaderboard.share_view`), the link opens it: the last sweep's
    children unfolded, best first, with their headline metrics as columns.
    """
    query = urllib.parse.urlencode({"experiment_name": experiment})
    try:
        with urllib.request.urlopen(f"{url}/api/2.0/mlflow/experiments/get-by-name?{query}", timeout=5) as r:
            found = json.load(r)["experiment"]
            exp_id = found["experiment_id"]
    except (urllib.error.URLError, OSError, ValueError, KeyError):
        return None
    from ragexp.tracking.leaderboard import VIEW_KEY, VIEW_TAG

    saved = any(t.get("key") == VIEW_TAG for t in found.get("tags") or [])
    # the runs tab itself: opening the experiment redirects there and drops the view's key on the way
    return f"{url}/#/experiments/{exp_id}/runs?workflowType=machine_learning" + (f"&viewStateShareKey={VIEW_KEY}"
                                                                                  if saved else "")


def serve(uri: str, *, port: int = 5000, workers: int = 1, wait_s: float = 120, experiment: str = "ragexp") -> int:
    """Run the UI until Ctrl-C (or SIGTERM); returns the exit status."""
    port = _port(int(port))
    url = f"http://{HOST}:{port}"
    print(f"Starting the MLflow UI on {uri} (takes 10-20 s) ...", flush=True)
    # litellm's bundled price map (no download at import; always), no MLflow telemetry (unless the user set it)
    env = {"MLFLOW_DISABLE_TELEMETRY": "true", **os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.Popen(server_command(uri, port, workers), env=env, start_new_session=True)
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        deadline = time.monotonic() + wait_s
        while not _answers(url):
            if proc.poll() is not None:
                raise ConfigError(f"MLflow's server on {uri} exited with status {proc.returncode} before answering "
                                  "(its messages are above)")
            if time.monotonic() > deadline:
                raise ConfigError(f"MLflow's server on {uri} did not answer at {url} within {wait_s:g} s "
                                  "(raise wait_s=... on a slow machine)")
            time.sleep(0.5)
        print(f"MLflow UI: {url}   (runs of {uri}; Ctrl-C stops it)", flush=True)
        page = runs_page(url, experiment)
        if page:
            said = " (the last sweep, best first, its headline metrics as columns)" if "viewStateShareKey" in page else ""
            print(f"The '{experiment}' runs table{said}: {page}", flush=True)
        status = proc.wait()
        return 0 if status == 0 else 1
    except KeyboardInterrupt:
        print("Stopping the MLflow UI.", flush=True)
        return 0
    finally:
        stop_process_group(proc)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="ui")
def _app(cfg: DictConfig) -> None:
    tracking = plain(cfg.get("tracking")) or {}
    try:
        uri = choose_store(tracking.get("uri"), cfg.get("folder"))
        if not isinstance(cfg.port, int) or isinstance(cfg.port, bool) or not 0 <= cfg.port <= 65535:
            raise ConfigError(f"port: expected an integer in 0..65535 (0: any free port), got {cfg.port!r}")
        status = serve(uri, port=cfg.port, workers=int(cfg.get("workers") or 1), wait_s=float(cfg.get("wait_s") or 120),
                       experiment=str(tracking.get("experiment") or "ragexp"))
    except RagexpError as exc:
        print(f"ragexp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(status)


def main() -> None:
    _app()


if __name__ == "__main__":
    main()
