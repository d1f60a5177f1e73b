"""Where runs go, and how to write to a SQLite store shared by parallel sweep jobs.

The default store is ``sqlite:///<launch dir>/mlflow.db`` — the directory the command was
started from, not Hydra's output folder. ``tracking.uri`` in the config wins, then the
``MLFLOW_TRACKING_URI`` environment variable, then the default.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

T = TypeVar("T")


def launch_dir() -> Path:
    """The directory the command was started from (Hydra's runtime.cwd when Hydra runs)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.cwd)
    except Exception:  # noqa: BLE001 - Hydra absent or not running
        pass
    return Path.cwd()


def resolve_uri(configured: str | None = None) -> str:
    if configured:
        return str(configured)
    env = os.environ.get("MLFLOW_TRACKING_URI")
    if env:
        return env
    return f"sqlite:///{(launch_dir() / 'mlflow.db').resolve()}"


def ui_command(uri: str) -> str:
    """The command that opens these runs in the MLflow UI."""
    if uri.startswith(("http://", "https://")):
        return f"open {uri} in a browser"
    return f"mlflow ui --backend-store-uri {uri}"


def _is_transient(exc: BaseException) -> bool:
    text = str(exc).lower()
    return any(s in text for s in ("database is locked", "database table is locked", "unique constraint failed",
                                    "temporarily unavailable", "connection refused", "503", "502"))


def retrying(fn: Callable[..., T], *args: Any, attempts: int = 12, **kwargs: Any) -> T:
    """Call ``fn``, retrying with jittered backoff while SQLite is locked by a parallel job."""
    delay = 0.05
    for attempt in range(attempts):
        try:
            return fn(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - filtered just below
            if attempt == attempts - 1 or not _is_transient(exc):
                raise
            time.sleep(delay + random.random() * delay)
            delay = min(delay * 2, 2.0)
    raise AssertionError("unreachable")


def artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite store, else the store's own default.

    MLflow would put them in ``./mlruns`` of whatever directory the first run started from; kept
    next to the database, runs and their artifacts stay together (and move together).

    >>> artifact_root("sqlite:////data/runs/mlflow.db")
    'file:///data/runs/mlruns'
    >>> artifact_root("http://127.0.0.1:5000") is None
    True
    """
    if not uri.startswith("sqlite:///"):
        return None
    return (Path(uri[len("sqlite:///"):]).resolve().parent / "mlruns").as_uri()


def get_or_create_experiment(client: Any, name: str, uri: str) -> str:
    """The experiment's id, creating it if needed; safe when parallel jobs race to create it."""

    def attempt() -> str:
        exp = client.get_experiment_by_name(name)
        if exp is not None:
            return exp.experiment_id
        return client.create_experiment(name, artifact_location=artifact_root(uri))

    return retrying(attempt)
