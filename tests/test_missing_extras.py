"""A configuration that needs an optional dependency which is not installed ends in one line naming the
extra to install, with exit status 2 — not an import traceback. Each dependency is hidden from a real
``python -m ragexp`` process by a ``sitecustomize`` that puts a finder refusing it first on
``sys.meta_path`` (in the test only; ragexp itself hides nothing)."""

from __future__ import annotations

import pytest

from cli import run_cli

HIDE = '''import os, sys
_HIDDEN = [m for m in os.environ.get("RAGEXP_TEST_HIDE", "").split(",") if m]
class _Hide:
    def find_spec(self, name, path=None, target=None):
        if any(name == m or name.startswith(m + ".") for m in _HIDDEN):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, _Hide())
'''

CASES = [  # (hidden module, arguments, extra)
    ("bm25s", ["retriever=bm25"], "pipeline"),
    ("sentence_transformers", ["retriever=dense"], "pipeline"),
    ("torch", ["retriever=hybrid"], "pipeline"),
    ("psycopg", ["metric=answer_similarity", "judge=openai_compatible", "judge.api_base=http://127.0.0.1:9/v1",
                 "judge.cache_backend=postgresql://u@127.0.0.1:9/x"], "cluster"),
    ("ray", ["-m", "hydra/launcher=ray", "dataset.system=strong,weak"], "cluster"),
    ("hydra_plugins.hydra_joblib_launcher", ["-m", "hydra/launcher=joblib", "dataset.system=strong,weak"], "sweep"),
    ("hydra_plugins.hydra_optuna_sweeper", ["-m", "hydra/sweeper=optuna"], "sweep"),
]


@pytest.mark.integration
@pytest.mark.parametrize("module,args,extra", CASES, ids=[c[0].split(".")[-1] for c in CASES])
def test_a_hidden_optional_dependency_is_one_line_naming_its_extra(tmp_path, module, args, extra):
    (tmp_path / "hide").mkdir()
    (tmp_path / "hide" / "sitecustomize.py").write_text(HIDE)
    proc = run_cli(*args, "progress=false", "tracking.enabled=false", cwd=tmp_path, check=False,
                   env={"PYTHONPATH": str(tmp_path / "hide"), "RAGEXP_TEST_HIDE": module})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert lines[0].startswith("ragexp: error: ") and f"pip install 'ragexp[{extra}]'" in lines[0], lines
    assert module.split(".")[-1] in lines[0] and "Traceback" not in proc.stderr


def test_every_extra_named_exists_in_pyproject():
    import tomllib
    from pathlib import Path

    from ragexp.common.extras import EXTRAS

    declared = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())
    assert set(EXTRAS.values()) <= set(declared["project"]["optional-dependencies"])


STORE_CASES = [  # (hidden module, arguments, extra): with tracking on, as a newcomer runs them
    ("psycopg", ["tracking.uri=postgresql+psycopg://u@127.0.0.1:9/x"], "cluster"),
    ("ray", ["-m", "hydra/launcher=ray", "dataset.system=strong,weak"], "cluster"),
]


@pytest.mark.integration
@pytest.mark.parametrize("module,args,extra", STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_a_missing_extra_with_tracking_on_is_one_line_and_leaves_no_run(tmp_path, module, args, extra):
    """The store's driver, or a sweep's launcher, missing: the line names the extra, and nothing is left in a
    store (the Ray sweep used to open its parent run first and close it FAILED and empty, over three lines)."""
    (tmp_path / "hide").mkdir()
    (tmp_path / "hide" / "sitecustomize.py").write_text(HIDE)
    proc = run_cli(*args, "progress=false", cwd=tmp_path, check=False,
                   env={"PYTHONPATH": str(tmp_path / "hide"), "RAGEXP_TEST_HIDE": module})
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
    assert f"pip install 'ragexp[{extra}]'" in lines[0] and module in lines[0] and "Traceback" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not proc.stdout.strip(), proc.stdout
