"""Shared test fixtures: where the real data lives, and composing the real Hydra config."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# The Ctrl-C tests send SIGINT to ragexp processes as a terminal does. A test run started in the
# background by a shell without job control (`cmd &` in a script, nohup) inherits SIGINT ignored,
# and every process it starts would too, so Ctrl-C would never reach them: give them the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


# --- Markers (pyproject.toml, docs/testing.md): a test that needs a service or starts ragexp says so ----------

SERVICE_FIXTURES = {"postgres_cluster", "postgres", "pg_mlflow_server", "fresh_pg_mlflow_server"}


def pytest_collection_modifyitems(config, items):
    """A test using a service fixture without the ``services`` marker is a collection error, so the
    default run can never start PostgreSQL by accident."""
    unmarked = [item.nodeid for item in items
                if SERVICE_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("services")]
    if unmarked:
        raise pytest.UsageError("mark these tests @pytest.mark.services (they use PostgreSQL or an MLflow server): "
                                + ", ".join(unmarked))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before the test's fixtures: tests/cli.py refuses to start ragexp or an MLflow server for a test
    without the ``integration`` or ``services`` marker."""
    import cli

    cli.MARKERS = frozenset(mark.name for mark in item.iter_markers())


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


# --- Real services: PostgreSQL and an mlflow server on it (tests/services.py) ---------------------------

@pytest.fixture(scope="session")
def postgres_cluster():
    """The session's PostgreSQL cluster (services.Postgres): ``.uri``, ``.create_database()``, ``.sql()``."""
    from services import MISSING_POSTGRES, Postgres, pg_bin_dir

    if pg_bin_dir() is None:
        pytest.skip(MISSING_POSTGRES)
    with Postgres() as pg:
        yield pg


@pytest.fixture(scope="session")
def postgres(postgres_cluster) -> str:
    """``postgresql://ragexp@127.0.0.1:PORT/ragexp``: a real PostgreSQL on 127.0.0.1, one for the session."""
    return postgres_cluster.uri


@pytest.fixture(scope="session")
def pg_mlflow_server(postgres_cluster, tmp_path_factory):
    """An ``mlflow server`` (``.uri`` = http://127.0.0.1:PORT) on its own database of the session's
    PostgreSQL, artifacts served by it; shared by the session's tests, so never stop it in a test."""
    from services import MlflowServer

    with MlflowServer(postgres_cluster, tmp_path_factory.mktemp("pg_mlflow")) as server:
        yield server


@pytest.fixture
def fresh_pg_mlflow_server(postgres_cluster, tmp_path):
    """Like ``pg_mlflow_server`` but this test's own (new database, new port): it may ``.stop()`` and
    ``.start()`` it."""
    from services import MlflowServer

    with MlflowServer(postgres_cluster, tmp_path / "pg_mlflow") as server:
        yield server
