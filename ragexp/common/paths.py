"""Where the Hydra configs live (in a source checkout and in an installed wheel), and the folder a
command was started from.

In the repository (and an editable install) they are the top-level ``conf/``; a wheel carries
the same files as ``ragexp/conf/`` (``pyproject.toml`` maps one onto the other), so
``pip install .`` gives a ``python -m ragexp`` that finds its configs from any directory.

    >>> (conf_dir() / "config.yaml").is_file()
    True
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

_PACKAGE = Path(__file__).resolve().parents[1]  # ragexp/


def conf_dir() -> Path:
    """``<repository>/conf`` when it is there, else the copy inside the installed package."""
    source = _PACKAGE.parent / "conf"
    if (source / "config.yaml").is_file():
        return source
    return _PACKAGE / "conf"


def conf_options(group: str) -> list[str]:
    """The options of config group ``group``, sorted: the YAML files of ``conf/<group>/`` (none for no such group).

    >>> conf_options("retriever")
    ['bm25', 'dense', 'hybrid', 'none']
    """
    folder = conf_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml")) if folder.is_dir() else []


def conf_file(name: str) -> dict[str, Any]:
    """``conf/<name>.yaml``'s values (its Hydra defaults list left out): for a default whose one place is a config."""
    import yaml

    return {k: v for k, v in yaml.safe_load((conf_dir() / f"{name}.yaml").read_text(encoding="utf-8")).items()
            if k != "defaults"}


def launch_dir() -> Path:
    """The directory the command was started from (Hydra's runtime.cwd when Hydra runs): relative
    cache folders and the default store ``mlflow.db`` live there, whichever job folder a run writes in."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if HydraConfig.initialized():
            return Path(HydraConfig.get().runtime.cwd)
    except Exception:  # noqa: BLE001 - Hydra absent or not running
        pass
    return Path.cwd()


def store_uri(configured: str | None = None) -> str:
    """The MLflow store a run uses: ``configured`` (``tracking.uri``), else ``$MLFLOW_TRACKING_URI``, else
    ``sqlite:///<launch dir>/mlflow.db``."""
    if configured:
        return str(configured)
    return os.environ.get("MLFLOW_TRACKING_URI") or f"sqlite:///{(launch_dir() / 'mlflow.db').resolve()}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a ``sqlite:///`` URI (its query string left out); None for any other store."""
    if not uri.startswith("sqlite:///"):
        return None
    return Path(uri[len("sqlite:///"):].split("?", 1)[0])


def artifact_root(uri: str) -> str | None:
    """Where a new experiment keeps its artifacts: beside a SQLite store, else the store's own default.

    MLflow would put them in ``./mlruns`` of whatever directory the first run started from; kept
    next to the database, runs and their artifacts stay together (and move together).

    >>> artifact_root("sqlite:////data/runs/mlflow.db")
    'file:///data/runs/mlruns'
    >>> artifact_root("http://127.0.0.1:5000") is None
    True
    """
    db = sqlite_path(uri)
    return None if db is None else (db.resolve().parent / "mlruns").as_uri()


@contextmanager
def env_defaults(values: dict[str, str]) -> Iterator[None]:
    """``values`` in the environment inside the block only, each where the environment has none (a value
    the user set wins): MLflow's HTTP retries and timeouts while ragexp talks to a tracking server."""
    added = {k: v for k, v in values.items() if k not in os.environ}
    os.environ.update(added)
    try:
        yield
    finally:
        for k in added:
            os.environ.pop(k, None)


def plain(node: Any) -> Any:
    """A config node (OmegaConf's DictConfig or ListConfig) as plain dicts and lists, resolved; any
    other value as it is (None stays None)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node


def compose(overrides: list[str] | tuple[str, ...] = (), *, hydra_config: bool = False) -> Any:
    """The root config of ragexp's conf dir with ``overrides``, by Hydra's compose API. A Hydra app that is
    running (a user's ``@hydra.main`` calling ``ragexp.evaluate``) gets its own Hydra back afterwards."""
    from hydra import compose as hydra_compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    outer = GlobalHydra.instance().hydra if GlobalHydra.instance().is_initialized() else None
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
            return hydra_compose(config_name="config", overrides=list(overrides), return_hydra_config=hydra_config)
    finally:
        if outer is not None:
            GlobalHydra.instance().initialize(outer)
