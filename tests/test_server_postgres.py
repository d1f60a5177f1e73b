"""``tracking=server``: sweeps into a real ``mlflow server`` backed by a real PostgreSQL (issue 10, items 3 and 5).

Both services are started on 127.0.0.1 by tests/services.py. Artifacts go through the server's proxy
(``--serve-artifacts``): the launch directory never holds an ``mlruns`` folder or a store of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli import parent_and_children, run_cli, runs
from judge_server import JudgeServer
from test_tracking_failures import Gate, _comparable, _env, _judge_args, _popen, _results_of_failed_logging


def _server_args(uri: str) -> list[str]:
    return ["tracking=server", f"tracking.uri={uri}", "progress=false"]


def _table(client, run_id: str, dst: Path) -> dict:
    """The run's per-sample table, downloaded through the server."""
    dst.mkdir(parents=True, exist_ok=True)
    return json.loads(Path(client.download_artifacts(run_id, "per_sample.json", str(dst))).read_text())


def _assert_nothing_local(launch: Path) -> None:
    assert not (launch / "mlflow.db").exists() and not (launch / "mlruns").exists(), "logged beside the launch"


@pytest.mark.integration
@pytest.mark.services
def test_a_sweep_into_the_postgres_backed_server_logs_runs_tables_leaderboard_and_compares(
        tmp_path, pg_mlflow_server, postgres_cluster):
    uri, experiment = pg_mlflow_server.uri, "pg-sweep"  # an experiment of its own on the session's server
    sweep = run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "dataset.system=strong,weak",
                    "stats.primary=answer_token_f1", "stats.resamples=2000", *_server_args(uri),
                    f"tracking.experiment={experiment}", cwd=tmp_path, env=_env())
    _assert_nothing_local(tmp_path)
    client, found = runs(uri, experiment)
    (parent,) = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    mine = [c for c in found if c.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(mine) == 2 and all(c.info.status == "FINISHED" for c in mine)
    for child in mine:
        assert child.info.artifact_uri.startswith("mlflow-artifacts:"), "artifacts go through the server"
        names = {a.path for a in client.list_artifacts(child.info.run_id)}
        assert {"per_sample.json", "summary.json", "config.yaml"} <= names
        table = _table(client, child.info.run_id, tmp_path / child.info.run_id)
        assert len(table["data"]) == child.data.metrics["answer_token_f1/n"] == 50
    # the runs and their metrics are rows of PostgreSQL, the artifacts files in the server's folder
    db = pg_mlflow_server.backend.rsplit("/", 1)[1]
    assert int(postgres_cluster.sql(f"SELECT count(*) FROM runs WHERE run_uuid IN "
                                    f"('{parent.info.run_id}', '{mine[0].info.run_id}', '{mine[1].info.run_id}')",
                                    database=db)) == 3
    served = {p.name for p in (pg_mlflow_server.folder / "artifacts").rglob("*") if p.is_file()}
    assert {"per_sample.json", "leaderboard.json", "sweep_results.json"} <= served
    # the parent: the sweep table and the leaderboard, best first
    parent_files = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"sweep_results.json", "leaderboard.json", "leaderboard.png"} <= parent_files
    rows = json.loads(Path(client.download_artifacts(parent.info.run_id, "sweep_results.json", str(tmp_path))).read_text())
    assert len(rows["children"]) == 2
    board = json.loads(Path(client.download_artifacts(parent.info.run_id, "leaderboard.json", str(tmp_path))).read_text())
    assert "strong" in board["rows"][0]["run_name"] and board["rows"][1]["differs"] is True
    assert "sweep leaderboard · answer_token_f1" in sweep.stdout
    # python -m ragexp.compare reads both runs' tables through the server and logs its comparison there
    by_system = {("strong" if "strong" in c.info.run_name else "weak"): c.info.run_id for c in mine}
    compare = subprocess.run([sys.executable, "-m", "ragexp.cli.compare", f"baseline={by_system['strong']}",
                              f"candidate={by_system['weak']}", "tracking=server", f"tracking.uri={uri}"],
                             cwd=tmp_path, env=_env(),
                             capture_output=True, text=True, timeout=300)
    assert compare.returncode == 0, compare.stderr[-3000:]
    assert "Comparison logged as MLflow run" in compare.stdout and uri in compare.stdout
    logged = compare.stdout.split("Comparison logged as MLflow run ")[1].split()[0]
    assert client.get_run(logged).info.status == "FINISHED"
    _assert_nothing_local(tmp_path)


@pytest.mark.integration
@pytest.mark.services
def test_eight_parallel_jobs_into_the_server_lose_no_run(tmp_path, fresh_pg_mlflow_server):
    uri = fresh_pg_mlflow_server.uri
    run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=8", "dataset.system=strong,weak",
            "stats.primary=answer_token_f1", "stats.resamples=200,300,400,500", *_server_args(uri),
            cwd=tmp_path, env=_env())
    _assert_nothing_local(tmp_path)
    client, parents, children = parent_and_children(uri)
    assert len(parents) == 1 and len(children) == 8, "0 lost runs"
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    assert len({c.info.run_name for c in children}) == 8
    for child in children:
        assert child.info.status == "FINISHED"
        assert "answer_token_f1" in child.data.metrics and child.data.metrics["answer_token_f1/n"] == 50
        assert len(_table(client, child.info.run_id, tmp_path / child.info.run_id)["data"]) == 50
    parent = parents[0].info.run_id
    board = json.loads(Path(client.download_artifacts(parent, "leaderboard.json", str(tmp_path))).read_text())
    assert sorted(r["run_name"] for r in board["rows"]) == sorted(c.info.run_name for c in children)
    rows = json.loads(Path(client.download_artifacts(parent, "sweep_results.json", str(tmp_path))).read_text())
    assert len(rows["children"]) == 8
    assert client.get_run(parent).info.status == "FINISHED"


@pytest.mark.integration
@pytest.mark.services
def test_the_server_stopped_mid_run_fails_in_seconds_keeps_the_results_and_the_upload_logs_them(
        tmp_path, data_dir, fresh_pg_mlflow_server):
    server = fresh_pg_mlflow_server
    # each MLflow request: 3 s at most, retried once (conf/tracking/server.yaml's keys)
    args = lambda judge_url: [*_judge_args(data_dir, judge_url), *_server_args(server.uri),  # noqa: E731
                              "tracking.http_timeout_s=3", "tracking.http_max_retries=1", "run_name=the-run"]
    launch = tmp_path / "launch"
    launch.mkdir()
    gate = Gate()
    with JudgeServer(script=gate) as judge:
        judge_port = int(judge.url.rsplit(":", 1)[1].split("/")[0])
        proc = _popen(args(judge.url), launch)
        assert gate.arrived.wait(timeout=300), "the run never reached the judge"
        server.stop()  # the tracking server goes away while the judge works
        stopped = time.monotonic()
        gate.open()
        out, err = proc.communicate(timeout=300)
        took = time.monotonic() - stopped
    print(f"run ended {took:.1f} s after the server stopped")
    assert took < 60, f"a dead server should fail the run within its HTTP bounds, took {took:.0f} s"
    folder, command, saved = _results_of_failed_logging(proc, out, err, server.uri, launch)
    assert len(json.loads((folder / "per_sample.json").read_text())["data"]) > 0
    _assert_nothing_local(launch)

    server.start()  # back on the same address, database and artifact folder
    later = subprocess.run(command.replace("python", sys.executable, 1).split(), cwd=launch, env=_env(),
                           capture_output=True, text=True, timeout=300)
    assert later.returncode == 0, later.stderr
    assert "logged as MLflow run" in later.stdout
    # the same run logged normally (its own launch directory and judge cache, the same judge address)
    normal = tmp_path / "normal"
    normal.mkdir()
    with JudgeServer(port=judge_port) as judge:
        run_cli(*args(judge.url), cwd=normal, env=_env())
    client, parents, children = parent_and_children(server.uri)
    assert children == [] and len(parents) == 2
    uploaded, direct = parents
    a, b = _comparable(client, uploaded, tmp_path / "a"), _comparable(client, direct, tmp_path / "b")
    assert a["status"] == "FINISHED"
    assert a["metrics"]["answer_similarity"] == saved["metrics"]["answer_similarity"]
    for key in a:
        assert a[key] == b[key], key
    assert "ragexp.traces_failed" not in a["tags"] and not a["tags"]["ragexp.traces"].startswith("0 of")  # traces too


@pytest.mark.integration
@pytest.mark.services
def test_a_run_name_longer_than_the_store_keeps_is_cut_not_the_run_lost(tmp_path, pg_mlflow_server):
    uri, experiment, name = pg_mlflow_server.uri, "pg-long-name", "retriever=bm25," * 20  # 300 characters
    run_cli(*_server_args(uri), f"tracking.experiment={experiment}", f"run_name='{name}'", cwd=tmp_path, env=_env())
    _, (run,) = runs(uri, experiment)
    assert run.info.status == "FINISHED" and run.info.run_name == name[:249] + "…"


@pytest.mark.integration
@pytest.mark.services
def test_a_postgres_store_that_refuses_or_is_not_there_is_one_line_for_run_and_compare(tmp_path, postgres_cluster):
    """A login the database refuses (here an unknown user: the cluster trusts every known one, so a wrong
    password cannot be shown) and a port nothing listens on: the run and the comparison each stop with
    one line naming the store and the reason, exit 2, before any work — not MLflow's ~100 s of retries."""
    from cli import free_port

    base = postgres_cluster.uri
    refused = base.replace("//ragexp@", "//nobody:wrong@")
    absent = f"postgresql://ragexp@127.0.0.1:{free_port()}/ragexp"
    for uri, says in ((refused, 'role "nobody" does not exist'), (absent, "connection refused")):
        env = {**_env(), "MLFLOW_TRACKING_URI": uri}  # not on the command line, which warns of the secret
        for command in (["ragexp", "progress=false"], ["ragexp.compare", "baseline=a", "candidate=b"]):
            proc = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, env=env, capture_output=True,
                                  text=True, timeout=300)
            lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
            assert proc.returncode == 2 and len(lines) == 1, (command, proc.stderr[-3000:])
            assert lines[0].startswith("ragexp: error: tracking store postgresql://") and says in lines[0], lines
            assert "wrong" not in proc.stderr and "wrong" not in proc.stdout  # the password is never shown
        assert not list(tmp_path.rglob("summary.json"))  # refused before the run computed anything
