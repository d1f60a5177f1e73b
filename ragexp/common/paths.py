"""Where the Hydra configs live (in a source checkout and in an installed wheel), and the folder a
command was started from.

In the repository (and an editable install) they are the top-level ``conf/``; a wheel carries
the same files as ``ragexp/conf/`` (``pyproject.toml`` maps one onto the other), so
``pip install .`` gives a ``python -m ragexp`` that finds its configs from any directory.

    >>> (conf_dir() / "config.yaml").is_file()
    True
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

_PACKAGE = Path(__file__).resolve().parents[1]  # ragexp/


def conf_dir() -> Path:
    """``<repository>/conf`` when it is there, else the copy inside the installed package."""
    source = _PACKAGE.parent / "conf"
    if (source / "config.yaml").is_file():
        return source
    return _PACKAGE / "conf"


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


def plain(node: Any) -> Any:
    """A config node (OmegaConf's DictConfig or ListConfig) as plain dicts and lists, resolved; any
    other value as it is (None stays None)."""
    from omegaconf import DictConfig, ListConfig, OmegaConf

    return OmegaConf.to_container(node, resolve=True) if isinstance(node, (DictConfig, ListConfig)) else node
