"""experiments/notebook/evaluate_dataframe.ipynb runs top to bottom in a real Jupyter kernel (nbclient,
the venv's own python through ipykernel), offline, in a scratch directory, so it cannot rot."""

from __future__ import annotations

import os

import pytest

from cli import ROOT

NOTEBOOK = ROOT / "experiments" / "notebook" / "evaluate_dataframe.ipynb"


def _text(output) -> str:
    return output.get("text") or output.get("data", {}).get("text/plain", "")


@pytest.mark.services
def test_the_notebook_runs_and_shows_the_evaluation_the_comparison_and_the_table(tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    from jupyter_client.kernelspec import NATIVE_KERNEL_NAME

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # the kernel is this interpreter (the native kernel spec maps "python" to sys.executable), with ragexp importable
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name=NATIVE_KERNEL_NAME, timeout=300,
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(o.output_type != "error" for c in code for o in c.outputs)
    shown = ["\n".join(_text(o) for o in c.outputs) for c in code]
    outputs = [_text(o) for c in code for o in c.outputs]  # a cell's stderr line comes before its result
    evaluation = next(s for s in outputs if s.startswith("ragexp · dataframe · 50 samples · not logged"))
    # the demo's 'lang' column is no record field: said in the Python API's terms (columns=, not dataset.columns=)
    unread = [s for s in outputs if "'lang' is no record field" in s]
    assert unread and all("columns={<field>: <column>}" in s and "dataset.columns" not in s for s in unread)
    assert "answer_token_f1" in evaluation and "95% CI" in evaluation
    comparison = next(s for s in outputs if s.startswith("ragexp.compare · baseline weak → candidate strong"))
    assert "50 paired samples" in comparison and "▲ better" in comparison
    html = [o for c in code for o in c.outputs if "text/html" in o.get("data", {})]
    assert any("answer_token_f1" in o["data"]["text/html"] for o in html)  # the per-sample table, as HTML
    run_id = shown[-1].strip().splitlines()[-1]
    assert len(run_id) == 32 and (tmp_path / "mlflow.db").is_file()
