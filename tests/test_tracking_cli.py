"""What a run leaves in MLflow (SPEC §4), read back with MlflowClient as a user would."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest
import yaml

from cli import parent_and_children, run_cli, runs
from ragexp.results.columns import status_column


@pytest.mark.integration
def test_default_command_leaves_a_complete_run_in_launch_dir_sqlite(tmp_path, data_dir):
    proc = run_cli(f"data_dir={data_dir}", cwd=tmp_path)
    db = tmp_path / "mlflow.db"
    assert db.exists(), "the default store is ./mlflow.db in the launch directory"
    assert f"python -m ragexp.ui tracking.uri=sqlite:///{db}" in proc.stdout
    client, found = runs(f"sqlite:///{db}")
    assert len(found) == 1
    run = found[0]
    # params: what tells runs apart (each group's option; test_mlflow_view.py has the rest)
    assert run.data.params["dataset"] == "demo" and run.data.params["metric"] == "default"
    assert not any(k.endswith("_target_") for k in run.data.params)
    # metrics: every aggregate the summary printed
    summary_path = client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path))
    summary = json.loads(open(summary_path).read())
    logged = {k: v for k, v in summary["metrics"].items() if v is not None and not math.isnan(v)}
    assert logged, "the demo run computes metrics"
    for key, value in logged.items():
        assert math.isclose(run.data.metrics[key], value, rel_tol=1e-12), key
    # the console leads with the headline metrics; report.all=true prints every value (docs/uncertainty.md)
    assert all(key in proc.stdout for key in summary["headline"])
    (tmp_path / "all").mkdir()
    every = run_cli(f"data_dir={data_dir}", "report.all=true", "tracking.enabled=false", cwd=tmp_path / "all")
    unshown = [key for key in logged if key not in every.stdout]
    # only cut-offs deeper than the passages a question got (they repeat the last one), and the line says so
    assert all(key.endswith(("_at_5", "_at_10")) for key in unshown) and "cut-offs beyond the 4 passages" in every.stdout, unshown
    # per-sample table: one row per sample, each metric's value and status
    table_path = client.download_artifacts(run.info.run_id, "per_sample.json", str(tmp_path))
    table = json.loads(open(table_path).read())
    frame = pd.DataFrame(table["data"], columns=table["columns"])
    assert len(frame) == summary["n_samples"]
    assert {"id", "query", "answer", "token_f1", status_column("token_f1")} <= set(frame.columns)
    assert frame["id"].is_unique
    ok = frame[status_column("token_f1")] == "ok"
    assert math.isclose(frame.loc[ok, "token_f1"].mean(), run.data.metrics["token_f1"], rel_tol=1e-9)
    # config.yaml is the resolved config; .hydra holds Hydra's files
    cfg_path = client.download_artifacts(run.info.run_id, "config.yaml", str(tmp_path))
    cfg = yaml.safe_load(open(cfg_path))
    assert cfg["dataset"]["name"] == "demo" and "token_f1" in cfg["metric"]
    hydra_files = {a.path for a in client.list_artifacts(run.info.run_id, ".hydra")}
    assert {".hydra/config.yaml", ".hydra/overrides.yaml", ".hydra/hydra.yaml"} <= hydra_files
    # tags and the dataset input
    tags = run.data.tags
    assert tags["ragexp.dataset"] == "demo"
    assert tags["ragexp.version"]
    assert len(tags["ragexp.dataset_digest"]) == 16 and tags["ragexp.dataset_digest"] == summary["dataset_digest"]
    assert len(tags["mlflow.source.git.commit"]) == 40
    inputs = run.inputs.dataset_inputs
    assert [i.dataset.name for i in inputs] == ["demo"]
    assert inputs[0].dataset.digest == summary["dataset_digest"]


@pytest.mark.integration
def test_tracking_uri_from_config_and_environment(tmp_path, data_dir):
    other = tmp_path / "store" / "elsewhere.db"
    other.parent.mkdir()
    run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", f"tracking.uri=sqlite:///{other}", "progress=false",
            cwd=tmp_path)
    assert other.exists() and not (tmp_path / "mlflow.db").exists()
    # the artifacts went beside that database, not into the directory the command ran from
    assert list((tmp_path / "store" / "mlruns").rglob("per_sample.json")) and not (tmp_path / "mlruns").exists()
    env_db = tmp_path / "from_env.db"
    run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "progress=false", cwd=tmp_path,
            env={"MLFLOW_TRACKING_URI": f"sqlite:///{env_db}"})
    assert env_db.exists() and not (tmp_path / "mlflow.db").exists()
    _, found = runs(f"sqlite:///{env_db}")
    assert [r.data.tags["ragexp.dataset"] for r in found] == ["memory_eval_true"]


@pytest.mark.integration
def test_secrets_never_reach_params_artifacts_or_output(tmp_path, data_dir):
    secret = "sk-test-DO-NOT-LOG-0123456789"
    proc = run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "progress=false",
                   f"+tracking.tags.note=using {secret}", f"+extra.api_key={secret}", f"+extra.password={secret}",
                   cwd=tmp_path, env={"OPENAI_API_KEY": secret})
    assert secret not in proc.stdout + proc.stderr
    client, found = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = found[0]
    assert run.data.params["extra.api_key"] == "***" and run.data.params["extra.password"] == "***"
    everything = json.dumps([run.data.params, run.data.tags])
    out = tmp_path / "artifacts"
    out.mkdir()
    local = client.download_artifacts(run.info.run_id, "", str(out))
    for path in __import__("pathlib").Path(local).rglob("*"):
        if path.is_file():
            everything += path.read_text(errors="replace")
    assert secret not in everything
    assert "extra.api_key=***" in everything  # the override itself was kept, redacted


@pytest.mark.integration
def test_multirun_basic_launcher_nests_children_under_one_parent(tmp_path, data_dir):
    run_cli("-m", f"data_dir={data_dir}", "dataset=memory_eval_true,memory_eval_false",
            "metric=memory", "metric.keyword_verdict_accuracy.threshold=0.3,0.6", "progress=false", cwd=tmp_path)
    client, parents, children = parent_and_children(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(parents) == 1 and len(children) == 4
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert {(c.data.params["dataset"], c.data.params["metric.keyword_verdict_accuracy.threshold"]) for c in children} == {
        ("memory_eval_true", "0.3"), ("memory_eval_true", "0.6"), ("memory_eval_false", "0.3"), ("memory_eval_false", "0.6")}
    assert parents[0].info.status == "FINISHED" and parents[0].data.metrics["sweep/children"] == 4
    path = client.download_artifacts(parents[0].info.run_id, "sweep_results.json", str(tmp_path))
    rows = json.loads(open(path).read())["children"]
    assert len(rows) == 4 and all("keyword_overlap" in r for r in rows)
    # the swept settings are columns of the comparison table, a group's choice under the group's name
    assert {(r["param.dataset"], r["param.metric.keyword_verdict_accuracy.threshold"]) for r in rows} == {
        ("memory_eval_true", "0.3"), ("memory_eval_true", "0.6"), ("memory_eval_false", "0.3"), ("memory_eval_false", "0.6")}


@pytest.mark.integration
def test_multirun_with_tracking_disabled_logs_nothing_and_succeeds(tmp_path, data_dir):
    # the jobs log nothing, so the sweep opens no parent run: no store, no "jobs never started"
    proc = run_cli("-m", f"data_dir={data_dir}", "dataset.system=strong,weak", "metric=hit_rate",
                   "tracking.enabled=false", "progress=false", cwd=tmp_path)
    assert proc.returncode == 0
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / "mlruns").exists()
    assert "never started" not in proc.stderr and "FAILED" not in proc.stderr
    results = sorted(tmp_path.glob("multirun/**/summary.json"))
    assert len(results) == 2, "each job still keeps its results in its folder"


@pytest.mark.integration
def test_multirun_joblib_parallel_jobs_share_one_sqlite_store(tmp_path, data_dir):
    run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"data_dir={data_dir}",
            "dataset=memory_eval_true,memory_eval_false", "metric=memory",
            "metric.keyword_verdict_accuracy.threshold=0.2,0.4,0.6", "progress=false", cwd=tmp_path)
    _, parents, children = parent_and_children(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert len(parents) == 1 and len(children) == 6
    assert all(c.info.status == "FINISHED" for c in children)
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}


@pytest.fixture
def saved_folder(tmp_path, monkeypatch):
    """The results folder of a real run (the demo through ragexp.evaluate) whose logging never happened."""
    import ragexp

    monkeypatch.chdir(tmp_path)
    result = ragexp.evaluate("demo", log=f"sqlite:///{tmp_path / 'mlflow.db'}", tracking={"plots": False})
    folder = result.summary["results_folder"]
    from pathlib import Path

    manifest = Path(folder) / "mlflow_run.json"
    saved = json.loads(manifest.read_text())
    saved["logged"] = None
    manifest.write_text(json.dumps(saved))
    return Path(folder)


@pytest.mark.parametrize("damage, says", [
    (lambda text: text[: len(text) // 2], "mlflow_run.json, row "),  # cut short (a full disk, a killed editor)
    (lambda text: "\udcff".encode("utf-8", "surrogateescape").decode("latin-1") + text, "is not valid JSON"),
    (lambda text: "[1, 2]", "expected a JSON object, got list"),
    (lambda text: json.dumps({**json.loads(text), "metrics": {"f1": "high"}}), "field 'metrics.f1': expected a number"),
    (lambda text: json.dumps({**json.loads(text), "params": []}), "field 'params': expected an object of params"),
    (lambda text: json.dumps({k: v for k, v in json.loads(text).items() if k != "tracking_uri"}),
     "field 'tracking_uri': expected a tracking URI, got null"),
    (lambda text: json.dumps({**json.loads(text), "logged": {"run_id": 3}}), "field 'logged'"),
], ids=["truncated", "garbage", "a list", "a metric edited to text", "params not an object", "no store",
        "logged edited"])
def test_upload_of_a_damaged_or_hand_edited_manifest_is_one_line_exit_2(saved_folder, capsys, damage, says):
    from ragexp.tracking.upload import main

    manifest = saved_folder / "mlflow_run.json"
    manifest.write_text(damage(manifest.read_text()))
    assert main([str(saved_folder)]) == 2
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"ragexp: error: {manifest}") and says in lines[0], err


def test_upload_logs_an_intact_saved_folder(saved_folder, capsys):
    from ragexp.tracking.upload import main

    assert main([str(saved_folder)]) == 0
    assert "logged as MLflow run" in capsys.readouterr().out
    assert json.loads((saved_folder / "mlflow_run.json").read_text())["logged"]["run_id"]
