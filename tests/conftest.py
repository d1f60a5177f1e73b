"""Shared test fixtures: where the real data lives, and composing the real Hydra config."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session", autouse=True)
def _run_in_a_scratch_directory(tmp_path_factory):
    """Tests run where a user would launch ragexp from, never the checkout: what ragexp leaves in the
    launch directory (``.ragexp_cache/`` indexes and judge answers, ``mlflow.db``) lands in one scratch
    folder for the session, so the dense index is still built once and shared by every test."""
    before = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("launch"))
    yield
    os.chdir(before)


@pytest.fixture(scope="session")
def data_dir() -> Path:
    if not DATA.is_dir():
        pytest.fail(f"the shared evaluation data is missing at {DATA} (set RAGEXP_DATA_DIR)")
    return DATA


@pytest.fixture
def compose(data_dir, tmp_path):
    """compose(*overrides) → the real composed config, tracking to a SQLite file in tmp_path."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    def _compose(*overrides: str, return_hydra_config: bool = False):
        with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
            return hydra_compose(
                config_name="config",
                overrides=[f"data_dir={data_dir}", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}",
                           "progress=false", *overrides],
                return_hydra_config=return_hydra_config,
            )

    return _compose


@pytest.fixture
def server():
    """A scripted OpenAI-compatible judge on 127.0.0.1 (tests/judge_server.py), stopped after the test."""
    from judge_server import JudgeServer

    with JudgeServer() as s:
        yield s
