"""The wheel carries every package and every config: pyproject's explicit lists match the tree."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setuptools_cfg() -> dict:
    if sys.version_info < (3, 11):
        pytest.skip("tomllib is Python 3.11+")
    import tomllib

    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_is_listed(setuptools_cfg):
    inits = [*(ROOT / "ragexp").rglob("__init__.py"), *(ROOT / "hydra_plugins").rglob("__init__.py")]
    on_disk = {".".join(p.parent.relative_to(ROOT).parts) for p in inits}
    assert set(setuptools_cfg["packages"]) == on_disk | {"ragexp.conf"}


def test_every_config_file_goes_into_the_wheel(setuptools_cfg):
    assert setuptools_cfg["package-dir"] == {"ragexp.conf": "conf"}
    patterns = setuptools_cfg["package-data"]["ragexp.conf"]
    conf = ROOT / "conf"
    shipped = {f for p in patterns for f in conf.glob(p)}  # what setuptools' globs pick up
    assert sorted(f for f in conf.rglob("*") if f.is_file() and f not in shipped) == []
