"""A results folder is uploadable from its first file: ``mlflow_run.json`` is written first, then the
tables, then the pictures. A disk that fills while saving stops with one line saying what was saved
where (no traceback, no ``.tmp`` left), and a process killed mid-save leaves a folder
``python -m ragexp.tracking.upload`` logs.

The full disk is a file-size limit (``RLIMIT_FSIZE``): past it a write fails with EFBIG when SIGXFSZ
is ignored (the in-process test), and the process is killed by SIGXFSZ when it is not — a kill in the
middle of writing the per-sample table (the integration test).
"""

from __future__ import annotations

import contextlib
import json
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from ragexp.errors import SaveError

RECORD = {"query": "Which city is the capital of France?", "answer": "Paris", "reference_answers": ["Paris"],
          "contexts": ["Paris is the capital of France. " * 20], "gt_contexts": ["Paris is the capital of France."]}


def _records(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"q{i}", **RECORD}) + "\n" for i in range(n)))
    return path


@pytest.fixture
def file_size_limit():
    """``with file_size_limit(n):`` files of this process stop growing at n bytes (EFBIG) inside the
    block only: pytest writes its own report (perhaps into a log file larger than n) after it."""

    @contextlib.contextmanager
    def limit(n: int):
        soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        previous = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, hard))
        try:
            yield
        finally:
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
            signal.signal(signal.SIGXFSZ, previous)

    return limit


def test_a_full_disk_stops_saving_with_one_line_and_the_folder_still_uploads(compose, tmp_path, file_size_limit):
    from ragexp.tracking.log import log_run
    from ragexp.workflow.runner import execute

    cfg = compose("dataset=records", f"dataset.path={_records(tmp_path / 'r.jsonl', 400)}", "metric=[exact_match]",
                  "tracking.plots=false", "tracking.enabled=false")  # saved, not logged: the store is not written
    expected = execute(cfg, save=False, show=False).summary["metrics"]["exact_match"]
    # mlflow_run.json, summary.json and config.yaml fit in 64,000 bytes; per_sample.json does not
    with file_size_limit(64_000), pytest.raises(SaveError) as err:
        execute(cfg, show=False)
    message = str(err.value)
    folder = Path(message.split(" in ", 1)[1].split(" (", 1)[0])
    assert "\n" not in message and message.startswith("could not save per_sample.json in ")
    assert "saved there: mlflow_run.json, summary.json, config.yaml" in message
    assert f"python -m ragexp.tracking.upload {folder}" in message
    assert sorted(p.name for p in folder.iterdir()) == ["config.yaml", "mlflow_run.json", "summary.json"]  # no .tmp

    run_id, uri = log_run(folder)  # what was saved is logged, and the run says what is missing
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.metrics["exact_match"] == expected
    assert run.data.tags["ragexp.missing_files"] == "per_sample.json, per_sample.parquet"
    assert {a.path for a in client.list_artifacts(run_id)} >= {"summary.json", "config.yaml"}


def test_nothing_written_says_nothing_was_saved(tmp_path, file_size_limit):
    from ragexp.tracking.log import RunResults, save_results

    with file_size_limit(10), pytest.raises(SaveError, match=r"could not save the results in .*: nothing was saved$"):
        save_results(tmp_path / "out", RunResults(
            config={}, tracking={"uri": f"sqlite:///{tmp_path / 'm.db'}"}, run_name="r", dataset_name="d",
            dataset_digest="x", per_sample={"id": ["a"]}, metrics={"m": 1.0}, extra_metrics={},
            summary={"n_samples": 1}))
    assert not [p for p in (tmp_path / "out").iterdir()]


@pytest.mark.integration
@pytest.mark.slow
def test_the_cli_on_a_full_disk_prints_one_line_and_leaves_an_uploadable_folder(tmp_path, data_dir):
    """``python -m ragexp`` whose files cannot grow past 1.1 MB (the store fits, per_sample.json does not;
    Python ignores SIGXFSZ, so the write fails with EFBIG as on a full disk): exit 2, one line, no .tmp,
    and ``python -m ragexp.tracking.upload`` logs what was saved."""
    data = _records(tmp_path / "r.jsonl", 3000)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    from ragexp.tracking.store import open_client

    open_client(uri).search_experiments()  # the store exists before the limited run (its creation is not the case)

    def limited() -> None:  # the store (~0.95 MB) fits; per_sample.json (~1.3 MB) does not
        resource.setrlimit(resource.RLIMIT_FSIZE, (1_100_000, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))

    proc = subprocess.run([sys.executable, "-m", "ragexp", f"data_dir={data_dir}", "dataset=records",
                           f"dataset.path={data}", "metric=[exact_match]", f"tracking.uri={uri}", "progress=false",
                           "hydra.run.dir=out"], cwd=tmp_path, capture_output=True, text=True, preexec_fn=limited,
                          timeout=600)
    folder = tmp_path / "out"
    assert proc.returncode == 4, proc.stderr[-2000:]  # an output could not be written (docs/errors.md)
    assert proc.stderr.strip().splitlines() == [
        f"ragexp: error: could not save per_sample.json in {folder} (File too large); saved there: mlflow_run.json, "
        f"summary.json, config.yaml; log what was saved with: python -m ragexp.tracking.upload {folder}"]
    assert not list(folder.glob(".*tmp")) and not (folder / "per_sample.parquet").exists()
    up = subprocess.run([sys.executable, "-m", "ragexp.tracking.upload", str(folder)], cwd=tmp_path,
                        capture_output=True, text=True, timeout=600)
    assert up.returncode == 0, up.stderr[-2000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    [run] = client.search_runs([client.get_experiment_by_name("ragexp").experiment_id])
    assert run.info.status == "FINISHED" and "exact_match" in run.data.metrics
    assert run.data.tags["ragexp.missing_files"] == "per_sample.json, per_sample.parquet"


@pytest.mark.integration
@pytest.mark.slow
def test_a_run_killed_once_its_manifest_is_written_leaves_an_uploadable_folder(tmp_path, data_dir):
    """kill -9 as soon as mlflow_run.json appears (the tables and pictures still to come, or being written):
    the folder uploads."""
    import time

    data = _records(tmp_path / "r.jsonl", 3000)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", f"data_dir={data_dir}", "dataset=records",
                             f"dataset.path={data}", "metric=[exact_match]", f"tracking.uri={uri}", "progress=false",
                             "hydra.run.dir=out"], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    manifest = tmp_path / "out" / "mlflow_run.json"
    deadline = time.monotonic() + 600
    while not manifest.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    assert manifest.exists()
    logged = json.loads(manifest.read_text())["logged"]
    if logged is None:  # killed before the run was logged (nearly always: the tables take a while)
        up = subprocess.run([sys.executable, "-m", "ragexp.tracking.upload", str(tmp_path / "out")], cwd=tmp_path,
                            capture_output=True, text=True, timeout=600)
        assert up.returncode == 0, up.stderr[-2000:]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    runs = client.search_runs([client.get_experiment_by_name("ragexp").experiment_id])
    assert [r.info.status for r in runs] == ["FINISHED"] and "exact_match" in runs[0].data.metrics
