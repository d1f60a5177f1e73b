"""Sweeps on Ray and submitit, and jobs that fail: real launchers, real processes, real stores.

- Ray: a local Ray instance (``hydra.launcher.ray.init.num_cpus=2``, no dashboard) runs a 6-job
  BM25 sweep into an ``mlflow server`` backed by PostgreSQL (tests/services.py); another sweep has
  a job whose own process SIGKILLs itself and a job that raises.
- submitit: ``hydra/launcher=submitit_local``, the Slurm code path without a cluster.
- The failing system is a user's pipeline (``pipeline=custom``, a module written into the test's
  folder): job ``kill`` ends its process with SIGKILL mid-run, job ``fail`` raises.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from cli import run_cli
from ragexp.cli.ui import stop_process_group

pytest.importorskip("ray", reason="the Ray launcher needs the .[cluster] extra (ray)")

RAY_LOCAL = ["hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2"]
RAY_ENV = {"RAY_USAGE_STATS_ENABLED": "0"}

FLAKY_RAG = textwrap.dedent('''
    """A user's system that breaks: job == kill ends its own process with SIGKILL, job == fail raises."""
    import os
    import signal


    class FlakyRAG:
        def __init__(self, job: int, fail: int = -1, kill: int = -1):
            self.job, self.fail, self.kill = job, fail, kill

        def __call__(self, query):
            if self.job == self.kill:
                os.kill(os.getpid(), signal.SIGKILL)
            if self.job == self.fail:
                raise RuntimeError(f"system {self.job} is broken")
            return {"answer": query.split()[0], "contexts": [query]}
''')


def _flaky(folder: Path) -> dict[str, str]:
    (folder / "flaky_rag.py").write_text(FLAKY_RAG)
    return {"PYTHONPATH": str(folder)}


def _flaky_sweep(jobs: str, fail: int, kill: int = -1) -> list[str]:
    return ["-m", "pipeline=custom", "pipeline._target_=flaky_rag.FlakyRAG", f"+pipeline.job={jobs}",
            f"+pipeline.fail={fail}", f"+pipeline.kill={kill}", "metric=answer", "progress=false"]


def _sweep(uri: str, experiment: str = "ragexp"):
    """(client, parent, children) of the one sweep in the experiment."""
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None, f"no experiment {experiment!r} in {uri}"
    found = client.search_runs([exp.experiment_id], max_results=1000)
    parents = [r for r in found if r.data.tags.get("ragexp.role") == "parent"]
    assert len(parents) == 1, [r.info.run_name for r in found]
    children = [r for r in found if r.data.tags.get("mlflow.parentRunId") == parents[0].info.run_id]
    return client, parents[0], children


def _jobs(folder: Path) -> dict[int, object]:
    """``+pipeline.job`` → that job's child run, read from the sweep's job folders (the run a job logged,
    ``mlflow_run.json``, or its FAILED record, ``job_failed.json``), whatever the runs are named."""
    import yaml
    from mlflow.tracking import MlflowClient

    sweep = next((folder / "multirun").glob("*/*"))
    parent = json.loads((sweep / "mlflow_parent_run.json").read_text())
    client = MlflowClient(tracking_uri=parent["tracking_uri"])
    out = {}
    for job in sweep.iterdir():
        if not (job / ".hydra" / "overrides.yaml").exists():
            continue
        overrides = yaml.safe_load((job / ".hydra" / "overrides.yaml").read_text())
        num = int(next(o for o in overrides if o.startswith("+pipeline.job=")).split("=")[1])
        if (job / "job_failed.json").exists():
            run_id = json.loads((job / "job_failed.json").read_text())["run_id"]
        else:
            run_id = json.loads((job / "mlflow_run.json").read_text())["logged"]["run_id"]
        run = client.get_run(run_id)
        assert run.data.tags["mlflow.parentRunId"] == parent["run_id"]
        out[num] = run
    return out


def _builds(cache: Path) -> list[str]:
    log = cache / "builds.log"
    return log.read_text().splitlines() if log.exists() else []


@pytest.mark.integration
@pytest.mark.services
def test_a_six_job_ray_sweep_into_the_postgres_backed_server_logs_every_child_with_its_table(
        tmp_path, pg_mlflow_server):
    experiment = "launchers_ray_six"
    proc = run_cli("-m", *RAY_LOCAL, "retriever=bm25", "retriever.top_k=1,3,5", "dataset.system=strong,weak",
                   "metric=retrieval", "progress=false", f"tracking.uri={pg_mlflow_server.uri}",
                   f"tracking.experiment={experiment}", "pipeline.cache_dir=shared_cache/index",
                   cwd=tmp_path, env=RAY_ENV, timeout=900)
    assert "Started a local Ray instance" in proc.stderr  # the jobs ran on Ray, not in this process

    client, parent, children = _sweep(pg_mlflow_server.uri, experiment)
    assert parent.info.status == "FINISHED"
    assert parent.data.tags["ragexp.jobs_failed"] == "0"
    assert parent.data.metrics["sweep/jobs_failed"] == 0
    assert parent.data.metrics["sweep/children"] == 6
    assert len(children) == 6 and {c.info.status for c in children} == {"FINISHED"}
    for child in children:
        assert child.data.metrics["hit_rate/hit_rate_at_1/n"] == 50, child.info.run_name
        names = [a.path for a in client.list_artifacts(child.info.run_id)]
        assert any(n.startswith("per_sample") and n.endswith(".json") for n in names), names
    # the index is built once, in the launch directory's cache, and shared by the six Ray workers
    assert len(_builds(tmp_path / "shared_cache" / "index")) == 1
    # every job's results are in its folder of the one sweep folder, under the launch directory
    sweep = next((tmp_path / "multirun").glob("*/*"))
    assert sorted(p.name for p in sweep.iterdir() if (p / "summary.json").exists()) == [str(i) for i in range(6)]


@pytest.mark.integration
@pytest.mark.services
def test_on_ray_a_killed_job_and_a_raising_job_end_failed_with_their_reasons_and_the_others_go_on(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(*_flaky_sweep("1,2,3,4", fail=2, kill=3), *RAY_LOCAL, f"tracking.uri={uri}",
                   cwd=tmp_path, env={**RAY_ENV, **_flaky(tmp_path)}, timeout=900, check=False)
    assert proc.returncode != 0, proc.stderr[-3000:]

    client, parent, children = _sweep(uri)
    assert len(children) == 4
    status = _jobs(tmp_path)
    assert sorted(status) == [1, 2, 3, 4]
    assert status[1].info.status == status[4].info.status == "FINISHED"
    assert status[1].data.metrics["answer_token_f1/n"] == 50
    assert status[2].info.status == "FAILED"
    assert status[2].data.tags["ragexp.failure_reason"] == "RuntimeError: system 2 is broken"
    assert status[3].info.status == "FAILED"
    assert "worker process died" in status[3].data.tags["ragexp.failure_reason"]
    assert parent.info.status == "FAILED"
    assert parent.data.tags["ragexp.jobs_failed"] == "2"
    assert parent.data.metrics["sweep/jobs_failed"] == 2
    assert parent.data.tags["ragexp.failure_reason"].startswith("2 of 4 jobs failed")
    assert "2 FAILED" in proc.stderr
    sweep_results = json.loads(Path(client.download_artifacts(parent.info.run_id, "sweep_results.json",
                                                              str(tmp_path))).read_text())
    assert sorted(r["status"] for r in sweep_results["children"]) == ["FAILED", "FAILED", "FINISHED", "FINISHED"]


@pytest.mark.integration
def test_the_submitit_local_launcher_runs_the_sweep_records_a_failed_job_and_a_rerun_reuses_the_index(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(*_flaky_sweep("1,2,3", fail=2), "hydra/launcher=submitit_local", f"tracking.uri={uri}",
                   cwd=tmp_path, env=_flaky(tmp_path), timeout=900, check=False)
    assert proc.returncode != 0, proc.stderr[-3000:]
    _, parent, children = _sweep(uri)
    assert len(children) == 3
    status = {num: run.info.status for num, run in _jobs(tmp_path).items()}
    assert status == {1: "FINISHED", 2: "FAILED", 3: "FINISHED"}
    failed = next(c for c in children if c.info.status == "FAILED")
    assert failed.data.tags["ragexp.failure_reason"] == "RuntimeError: system 2 is broken"
    assert parent.info.status == "FAILED" and parent.data.tags["ragexp.jobs_failed"] == "1"
    sweep = next((tmp_path / "multirun").glob("*/*"))
    assert list(sweep.glob(".submitit/*/*_log.out"))  # each job ran in a submitit process of its own

    # the same BM25 sweep twice through submitit: the second run builds no index (the cache is shared)
    other = tmp_path / "second"
    other.mkdir()
    sweep_args = ["-m", "hydra/launcher=submitit_local", "retriever=bm25", "retriever.top_k=1,3",
                  "metric=retrieval", "progress=false", f"tracking.uri=sqlite:///{other / 'mlflow.db'}",
                  "pipeline.cache_dir=cache/index"]
    run_cli(*sweep_args, cwd=other, timeout=900)
    assert len(_builds(other / "cache" / "index")) == 1
    run_cli(*sweep_args, cwd=other, timeout=900)
    assert len(_builds(other / "cache" / "index")) == 1


@pytest.mark.integration
def test_with_the_basic_launcher_a_raising_job_is_a_failed_run_and_the_sweep_exits_non_zero(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(*_flaky_sweep("1,2,3", fail=1), f"tracking.uri={uri}", cwd=tmp_path, env=_flaky(tmp_path),
                   check=False)
    assert proc.returncode != 0
    _, parent, children = _sweep(uri)
    assert len(children) == 3
    assert {num: run.info.status for num, run in _jobs(tmp_path).items()} == {1: "FAILED", 2: "FINISHED",
                                                                               3: "FINISHED"}
    assert parent.info.status == "FAILED"
    assert parent.data.tags["ragexp.jobs_failed"] == "1"
    assert parent.data.tags["ragexp.failure_reason"].startswith("1 of 3 jobs failed")


def test_a_killed_jobs_folder_without_results_is_recorded_failed_at_the_sweeps_end(tmp_path):
    """What joblib or submitit leave when a worker is killed: a started job folder with neither
    results nor a failure record. The sweep's end logs it FAILED under the parent."""
    from mlflow.tracking import MlflowClient
    from omegaconf import OmegaConf

    from ragexp.tracking.jobs import KILLED, record_unreported, unreported_jobs
    from ragexp.tracking.launch import LAUNCH_ENV, PARENT_FILE

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    parent = client.create_run(client.create_experiment("ragexp"), run_name="sweep")
    sweep = tmp_path / "multirun" / "s"
    (sweep / "0" / ".hydra").mkdir(parents=True)
    (sweep / "0" / ".hydra" / "overrides.yaml").write_text("- retriever.top_k=3\n")
    (sweep / "1" / ".hydra").mkdir(parents=True)
    (sweep / "1" / ".hydra" / "overrides.yaml").write_text("- retriever.top_k=5\n")
    (sweep / "1" / "mlflow_run.json").write_text("{}")  # this one saved its results
    (sweep / PARENT_FILE).write_text(json.dumps({"run_id": parent.info.run_id, "tracking_uri": uri,
                                                 "launch_id": "abc123"}))
    os.environ[LAUNCH_ENV] = "abc123"
    try:
        config = OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}, "tracking": {"uri": uri}})
        assert unreported_jobs(sweep) == [sweep / "0"]
        assert record_unreported(config) == 1
        assert unreported_jobs(sweep) == []  # recorded once: a second sweep end does not record it again
        assert record_unreported(config) == 0
    finally:
        os.environ.pop(LAUNCH_ENV, None)
    runs = client.search_runs([parent.info.experiment_id], f"tags.mlflow.parentRunId = '{parent.info.run_id}'")
    assert [(r.info.run_name, r.info.status, r.data.tags["ragexp.failure_reason"]) for r in runs] == [
        ("retriever.top_k=3", "FAILED", KILLED)]


def test_ray_init_options_join_a_cluster_without_the_local_only_ones():
    from hydra_plugins.ragexp_ray_launcher._core import forwarded_env, init_options

    assert init_options({"address": "auto", "num_cpus": 2, "include_dashboard": False, "namespace": "team"}) == {
        "address": "auto", "namespace": "team"}
    assert init_options({"address": "local", "num_cpus": 2}) == {"address": "local", "num_cpus": 2}
    os.environ["RAGEXP_TEST_FORWARD"] = "x"
    try:
        env = forwarded_env(["RAGEXP_TEST_FORWARD", "RAGEXP_TEST_ABSENT"])
    finally:
        os.environ.pop("RAGEXP_TEST_FORWARD")
    assert env["RAGEXP_TEST_FORWARD"] == "x" and "RAGEXP_TEST_ABSENT" not in env
    assert env.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"  # set by conftest, as a user sets it


@pytest.mark.integration
def test_jobs_that_change_directory_still_share_the_launch_directorys_index_cache(tmp_path):
    """``hydra.job.chdir=true`` runs each job in its own folder (as a remote worker runs elsewhere): a
    relative ``pipeline.cache_dir`` is still the launch directory's, built once for the sweep."""
    run_cli("-m", "hydra.job.chdir=true", "retriever=bm25", "retriever.top_k=1,3", "metric=retrieval",
            "progress=false", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "pipeline.cache_dir=cache/index",
            cwd=tmp_path)
    assert len(_builds(tmp_path / "cache" / "index")) == 1
    assert not list((tmp_path / "multirun").glob("*/*/*/cache"))


@pytest.mark.integration
def test_with_joblib_a_killed_worker_stops_the_launcher_and_the_parent_says_what_failed_and_never_ran(tmp_path):
    """loky raises when a worker is killed (and ends the others): the jobs that had started are FAILED
    runs, the parent says how many of the sweep's 4 jobs never started, the exit status is not 0."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = run_cli(*_flaky_sweep("1,2,3,4", fail=-1, kill=2), "hydra/launcher=joblib", "hydra.launcher.n_jobs=2",
                   f"tracking.uri={uri}", cwd=tmp_path, env=_flaky(tmp_path), check=False)
    assert proc.returncode != 0
    _, parent, children = _sweep(uri)
    runs = _jobs(tmp_path)
    assert runs[2].info.status == "FAILED"
    assert runs[2].data.tags["ragexp.failure_reason"].startswith("its process ended before the job finished")
    assert all(r.info.status in ("FAILED", "FINISHED") for r in children)  # nothing left RUNNING
    never = 4 - len(children)
    assert parent.info.status == "FAILED"
    assert parent.data.metrics["sweep/jobs_planned"] == 4
    assert parent.data.tags["ragexp.jobs_failed"] == str(sum(r.info.status == "FAILED" for r in children))
    if never:
        assert f"{never} of 4 jobs never started" in parent.data.tags["ragexp.failure_reason"]


@pytest.mark.integration
def test_results_a_killed_job_saved_but_never_logged_are_logged_at_the_sweeps_end(tmp_path, data_dir):
    """A job killed between saving its results and logging them (loky ends every worker when one dies)
    leaves ``mlflow_run.json`` with ``logged: null``: the sweep's end logs that folder as the job's run
    under the parent, with the values the job saved."""
    from omegaconf import OmegaConf

    from ragexp.tracking.jobs import log_unlogged, unlogged_jobs

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_cli("-m", f"data_dir={data_dir}", "dataset.system=strong,weak", "metric=hit_rate", "progress=false",
            f"tracking.uri={uri}", cwd=tmp_path)
    client, parent, children = _sweep(uri)
    sweep = next((tmp_path / "multirun").glob("*/*"))
    manifests = sorted(sweep.glob("*/mlflow_run.json"))
    assert len(manifests) == 2 and not unlogged_jobs(sweep)
    killed = json.loads(manifests[0].read_text())
    gone = killed["logged"]["run_id"]
    client.delete_run(gone)  # as if its process had died before logging: results saved, no run
    killed["logged"] = None
    manifests[0].write_text(json.dumps(killed))
    assert unlogged_jobs(sweep) == [manifests[0].parent]

    assert log_unlogged(OmegaConf.create({"hydra": {"sweep": {"dir": str(sweep)}}})) == 1
    now = json.loads(manifests[0].read_text())["logged"]
    assert now is not None and now["run_id"] != gone and not unlogged_jobs(sweep)
    run = client.get_run(now["run_id"])
    assert run.info.status == "FINISHED" and run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    summary = json.loads((manifests[0].parent / "summary.json").read_text())
    assert run.data.metrics["hit_rate/hit_rate_at_1"] == summary["metrics"]["hit_rate/hit_rate_at_1"]


def test_the_planned_number_of_jobs_counts_the_command_line_and_the_sweepers_params(compose):
    from ragexp.tracking.jobs import sweep_size

    from omegaconf import open_dict

    cfg = compose(return_hydra_config=True)
    with open_dict(cfg):
        cfg.hydra.sweeper.params = {"retriever.top_k": "1,3,5"}  # as an experiment's YAML sweeps
        cfg.hydra.overrides.task = ["retriever=bm25,dense", "dataset.system=strong"]
    assert sweep_size(cfg) == 3 * 2 * 1
    with open_dict(cfg):
        cfg.hydra.sweeper._target_ = "hydra_plugins.hydra_optuna_sweeper.optuna_sweeper.OptunaSweeper"
    assert sweep_size(cfg) is None


@pytest.fixture
def ray_head(tmp_path):
    """A Ray cluster started with ``ray start --head`` from a bare environment (as on another machine:
    its workers inherit none of the launching shell's variables), stopped with its process group."""
    import shutil
    import subprocess
    import sys
    import time

    from cli import free_port

    ray = shutil.which("ray") or str(Path(sys.executable).parent / "ray")
    port = free_port()
    env = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", str(tmp_path)), "RAY_USAGE_STATS_ENABLED": "0",
           "RAY_AUTH_MODE": "disabled",  # no token shared with the other local Ray instances of this machine
           "RAY_GRACEFUL_SHUTDOWN_DRAIN_TIMEOUT_S": "0"}  # stopped at once: Ray 2.60 drains a SIGTERMed head for 30 s
    said = tmp_path / "ray_start.log"
    with open(said, "w") as out:
        proc = subprocess.Popen([ray, "start", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                                 "--disable-usage-stats", "--block"], env=env, cwd=tmp_path, start_new_session=True,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        # ready once it says so (17-20 s measured at load 8; a fixed 3 s wait left the sweep to Ray's own
        # patience while it joined a head still starting)
        deadline = time.monotonic() + 300
        while "Ray runtime started." not in said.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, said.read_text()[-3000:]
            time.sleep(0.2)
        yield f"127.0.0.1:{port}"
    finally:
        stop_process_group(proc, term_wait=30, kill_wait=10)


@pytest.mark.integration
@pytest.mark.services
def test_a_sweep_joins_an_existing_ray_cluster_and_its_jobs_get_ragexps_environment(tmp_path, ray_head):
    """Workers of a cluster started elsewhere: the sweep's parent run id, launch id and the offline price
    map reach the jobs only through the launcher (runtime_env), and the jobs work in the launch directory."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run_cli("-m", "hydra/launcher=ray", f"hydra.launcher.ray.init.address={ray_head}",
            "hydra.launcher.ray.init.num_cpus=2",  # left out when joining (Ray refuses it there)
            "retriever=bm25", "retriever.top_k=1,3", "metric=retrieval", "progress=false", f"tracking.uri={uri}",
            cwd=tmp_path, env={**RAY_ENV, "RAY_AUTH_MODE": "disabled"}, timeout=900)
    _, parent, children = _sweep(uri)
    assert parent.info.status == "FINISHED"
    assert len(children) == 2 and {c.info.status for c in children} == {"FINISHED"}
    assert len(_builds(tmp_path / ".ragexp_cache" / "index")) == 1


SLOW_RAG = textwrap.dedent('''
    """A system that takes ten minutes a question; it leaves started_<job> in the launch folder first."""
    import time


    class SlowRAG:
        def __init__(self, job: int):
            self.job = job

        def __call__(self, query):
            open(f"started_{self.job}", "w").close()
            time.sleep(600)
            return {"answer": "x", "contexts": [query]}
''')


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        if int(text[text.rindex(")") + 2:].split()[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _alive(pid: int) -> bool:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return text[text.rindex(")") + 2:].split()[0] not in ("Z", "X")


@pytest.mark.integration
@pytest.mark.slow
def test_kill_9_of_a_joblib_sweep_leaves_no_worker_or_resource_tracker_behind(tmp_path):
    """The launching process killed with SIGKILL while both jobs work: its loky workers stop (each job as by
    SIGTERM) and loky's resource tracker with them, instead of living on blocked, re-parented to init."""
    import os
    import subprocess
    import sys
    import time

    (tmp_path / "slow_rag.py").write_text(SLOW_RAG)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(tmp_path)}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", "-m", "pipeline=custom", "pipeline._target_=slow_rag.SlowRAG",
                             "+pipeline.job=1,2", "metric=answer", "progress=false", "hydra/launcher=joblib",
                             "hydra.launcher.n_jobs=2"], cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while len(list(tmp_path.glob("started_*"))) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the jobs never started"
            time.sleep(0.5)
        left = _children(proc.pid)
        assert len(left) >= 3, left  # two workers and loky's resource tracker
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 120
        while any(_alive(p) for p in left) and time.monotonic() < deadline:
            time.sleep(1)
        assert not [p for p in left if _alive(p)], [Path(f"/proc/{p}/cmdline").read_bytes() for p in left if _alive(p)]
    finally:
        for p in [proc.pid, *_children(proc.pid)]:
            try:
                os.kill(p, 9)
            except OSError:
                pass
