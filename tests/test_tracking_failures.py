"""Nothing computed is lost, nothing is left stuck (issue 14 items 1, 2, 4 and 12's tracking.uri cases).

Real processes throughout: ``python -m ragexp`` as a user runs it, a real ``mlflow server`` killed
mid-run, real SIGTERM / SIGKILL, and several ragexp processes started together on one fresh store.
The judge server's script holds the first judge request until the test has done what it must do
while the run is busy (kill the tracking server, send a signal), so the timing is not left to luck.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Callable

import pytest

from cli import free_port, parent_and_children, run_cli, runs, start_mlflow_server
from ragexp.cli.ui import stop_process_group
from judge_server import JudgeServer

ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "MLFLOW_TRACKING_URI"}
    return {**env, **ENV}


def _kill_server(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    """Signal the server and the workers it started (``mlflow server`` runs uvicorn as a child)."""
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def _stop(proc: subprocess.Popen) -> None:
    stop_process_group(proc, term_wait=20)


class Gate:
    """A judge-server script that holds every request until :meth:`open` (and counts the arrivals)."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.released = threading.Event()

    def __call__(self, request):
        self.arrived.set()
        self.released.wait(timeout=120)
        return None  # the sensible verdict

    def open(self) -> None:
        self.released.set()


def _popen(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "ragexp", *args], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.strip()]


def _results_of_failed_logging(proc: subprocess.Popen, out: str, err: str, uri: str,
                               launch: Path) -> tuple[Path, str, dict]:
    """A run whose store died while it worked: exit 2, one line naming the store, the results folder
    and the upload command, the table printed and summary.json saved. Returns (folder, command, the saved summary)."""
    lines = _lines(err)
    assert proc.returncode == 2 and "Traceback" not in err, err[-3000:]
    # the store named as the step that met it dead says it: creating the run, or (when the server died
    # before the experiment was looked up) reading the experiment
    assert len(lines) == 1 and lines[0].startswith((f"ragexp: error: could not log to {uri}",
                                                    f"ragexp: error: tracking store {uri}: cannot read or create")), lines
    assert "answer_similarity" in out, "the table is printed before logging"
    folder = Path(lines[0].split("the results are in ")[1].split(";")[0])
    command = lines[0].split("log them later with: ")[1]
    assert command == f"python -m ragexp.tracking.upload {folder}"
    assert folder.is_relative_to(launch / "outputs"), "the job's Hydra output folder"
    saved = json.loads((folder / "summary.json").read_text())
    assert saved["metrics"]["answer_similarity"] is not None
    return folder, command, saved


def _judge_args(data_dir: Path, url: str) -> list[str]:
    return [f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=answer_similarity", "judge=openai_compatible",
            f"judge.api_base={url}", "judge.max_concurrency=2", "progress=false"]


# --- item 12: a store MLflow cannot use is one line, before any work -------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("uri, says", [
    ("http://127.0.0.1:{closed}", "is not reachable"),
    ("file:///nonexistent/dir", "the folder /nonexistent does not exist"),
    ("notascheme://x", "unknown scheme 'notascheme'"),
    ("sqlite:////nonexistent/dir/mlflow.db", "the folder /nonexistent/dir does not exist"),
])
def test_an_unusable_tracking_uri_is_one_line_before_any_work(tmp_path, data_dir, uri, says):
    uri = uri.format(closed=free_port())  # a port nothing listens on
    proc = run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=keyword_overlap", "progress=false",
                   f"tracking.uri={uri}", cwd=tmp_path, check=False, timeout=60)  # MLflow alone would retry for minutes
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and lines[0].startswith("ragexp: error: ") and says in lines[0] and uri in lines[0]
    assert not list(tmp_path.rglob("summary.json")), "the check comes before the work"


def _read_only(path: Path) -> None:
    """Read-only even for root (CI may run as root, for whom chmod does not stop a write)."""
    path.chmod(0o444)
    if os.geteuid() == 0:
        if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode != 0:
            pytest.skip("running as root without chattr: cannot make a file read-only")


@pytest.mark.integration
def test_a_read_only_sqlite_store_is_one_line_before_any_work(tmp_path, data_dir):
    db = tmp_path / "mlflow.db"
    run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=keyword_overlap", "progress=false", cwd=tmp_path)
    results = {p.parent for p in tmp_path.rglob("summary.json")}
    _read_only(db)
    try:
        proc = run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=keyword_overlap", "progress=false",
                       cwd=tmp_path, check=False, timeout=60)
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", str(db)])
        db.chmod(0o644)
    lines = _lines(proc.stderr)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(lines) == 1 and "read-only" in lines[0] and str(db) in lines[0]
    assert {p.parent for p in tmp_path.rglob("summary.json")} == results, "no work was done"
    _, found = runs(f"sqlite:///{db}")
    assert len(found) == 1


# --- item 1: a tracking server that dies mid-run loses nothing -------------------------------------------------

def _comparable(client, run, dst: Path) -> dict:
    """What a user compares between two runs: params, metrics, tags, artifacts and their contents."""
    dst.mkdir(parents=True)
    local = Path(client.download_artifacts(run.info.run_id, "", str(dst)))
    files = {}
    for p in sorted(local.rglob("*")):
        if p.is_file():
            try:
                text = p.read_text()
            except UnicodeDecodeError:  # a plot: compared byte for byte
                files[str(p.relative_to(local))] = p.read_bytes()
                continue
            if p.name == "summary.json":
                data = json.loads(text)
                data.pop("seconds"), data.pop("results_folder", None)
                text = json.dumps(data, sort_keys=True)
            if p.name == "per_sample.json":
                text = json.dumps(json.loads(text), sort_keys=True)
            files[str(p.relative_to(local))] = text
    files.pop(".hydra/hydra.yaml")  # Hydra's own record of its output folder and of the time it ran
    owner = ("ragexp.host", "ragexp.pid", "ragexp.pid_start", "mlflow.user", "mlflow.source.name",
             "mlflow.source.git.commit")  # the commit is read when the results are saved; others commit meanwhile
    return {
        "name": run.info.run_name, "status": run.info.status, "params": run.data.params, "metrics": run.data.metrics,
        "tags": {k: v for k, v in run.data.tags.items() if k not in owner and k != "mlflow.runName"},
        "inputs": [(i.dataset.name, i.dataset.digest, i.dataset.schema, i.dataset.profile)
                   for i in run.inputs.dataset_inputs],
        "files": files,
    }


@pytest.mark.integration
@pytest.mark.services
def test_a_tracking_server_killed_mid_run_loses_nothing_and_the_printed_command_logs_it_later(tmp_path, data_dir):
    port = free_port()
    store = tmp_path / "server"
    url = f"http://127.0.0.1:{port}"
    server = start_mlflow_server(store, port, env=_env())
    launch = tmp_path / "launch"
    launch.mkdir()
    gate = Gate()
    judge_port = free_port()  # both runs see the same judge.api_base, so their params are the same
    try:
        with JudgeServer(script=gate, port=judge_port) as judge:
            args = [*_judge_args(data_dir, judge.url), f"tracking.uri={url}", "run_name=the-run"]
            proc = _popen(args, launch)
            assert gate.arrived.wait(timeout=300), "the run never reached the judge"
            _kill_server(server)  # the tracking server dies while the judge works
            server.wait()
            gate.open()
            out, err = proc.communicate(timeout=300)  # MLflow's own retries alone would take ~50 minutes
    finally:
        _stop(server)
    folder, command, saved = _results_of_failed_logging(proc, out, err, url, launch)

    server = start_mlflow_server(store, port, env=_env())  # the server is back, on the same address
    try:
        later = subprocess.run(command.replace("python", sys.executable, 1).split(), cwd=launch, env=_env(),
                               capture_output=True, text=True, timeout=120)
        assert later.returncode == 0, later.stderr
        assert "logged as MLflow run" in later.stdout
        again = subprocess.run([sys.executable, "-m", "ragexp.tracking.upload", str(folder)], cwd=launch, env=_env(),
                               capture_output=True, text=True, timeout=120)
        assert "already logged" in again.stdout  # a second upload does not log it twice
        # the same run, logged normally from a fresh launch directory (its own judge cache)
        normal = tmp_path / "normal"
        normal.mkdir()
        with JudgeServer(port=judge_port) as judge:
            run_cli(*_judge_args(data_dir, judge.url), f"tracking.uri={url}", "run_name=the-run", cwd=normal, env=_env())
        client, found = runs(url)
        assert len(found) == 2
        uploaded, direct = found
        a, b = _comparable(client, uploaded, tmp_path / "a"), _comparable(client, direct, tmp_path / "b")
    finally:
        _stop(server)
    assert a["status"] == "FINISHED"
    assert a["metrics"]["answer_similarity"] == saved["metrics"]["answer_similarity"]
    for key in a:
        assert a[key] == b[key], key
    assert "ragexp.traces_failed" not in a["tags"] and not a["tags"]["ragexp.traces"].startswith("0 of")  # traces too


# --- item 2: parallel processes on one fresh SQLite store ------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("n", [2, 8])
def test_processes_started_together_on_a_fresh_store_all_log_and_leave_it_usable(tmp_path, data_dir, n):
    db = tmp_path / "fresh" / "mlflow.db"
    db.parent.mkdir()
    args = [f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=keyword_overlap", "progress=false",
            f"tracking.uri=sqlite:///{db}"]
    procs = []
    for i in range(n):
        cwd = tmp_path / f"p{i}"
        cwd.mkdir()
        procs.append(_popen([*args, f"run_name=p{i}"], cwd))
    results = [(p, *p.communicate(timeout=600)) for p in procs]
    for p, out, err in results:
        assert p.returncode == 0, err[-3000:]
    _, found = runs(f"sqlite:///{db}")
    assert sorted(r.info.run_name for r in found) == sorted(f"p{i}" for i in range(n))
    assert all(r.info.status == "FINISHED" and "keyword_overlap" in r.data.metrics for r in found)
    after = run_cli(*args, "run_name=after", cwd=tmp_path)  # the store still takes runs
    assert "logged to" in after.stdout
    _, found = runs(f"sqlite:///{db}")
    assert len(found) == n + 1


# --- item 4: SIGTERM, kill -9, and runs left RUNNING -----------------------------------------------------------

def _sigterm_while_the_judge_waits(args_for: Callable[[str], list[str]], cwd: Path) -> list[str]:
    """Run ``python -m ragexp *args_for(judge_url)``, send SIGTERM once the judge holds its first request,
    and check the exit: status 143, no traceback. Returns the lines printed on stderr."""
    gate = Gate()
    with JudgeServer(script=gate) as judge:
        proc = _popen(args_for(judge.url), cwd)
        assert gate.arrived.wait(timeout=300)
        proc.send_signal(signal.SIGTERM)
        gate.open()
        _, err = proc.communicate(timeout=300)  # a hang guard: the exit waits for the helper's store check
    assert proc.returncode == 143 and "Traceback" not in err, err[-3000:]
    return _lines(err)


@pytest.mark.integration
def test_sigterm_mid_judge_is_one_line_exit_143_and_nothing_left_running(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    lines = _sigterm_while_the_judge_waits(lambda url: [*_judge_args(data_dir, url), f"tracking.uri={uri}"], tmp_path)
    assert lines[-1].startswith("ragexp: terminated (SIGTERM): judge 'openai_compatible' stopped after")
    assert lines[-1].endswith("No MLflow run was logged: the run had not finished.")
    client, found = runs(uri)
    assert found == []


def _multirun(data_dir: Path, judge_url: str, uri: str) -> list[str]:
    # job 0 needs no judge and finishes; job 1 waits on the judge
    return ["-m", f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=keyword_overlap,answer_similarity",
            "judge=openai_compatible", f"judge.api_base={judge_url}", "progress=false", f"tracking.uri={uri}"]


@pytest.mark.integration
def test_sigterm_on_a_multirun_says_what_was_logged_and_closes_the_parent_failed(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    lines = _sigterm_while_the_judge_waits(lambda url: _multirun(data_dir, url, uri), tmp_path)
    _, parents, children = parent_and_children(uri)
    assert len(parents) == 1 and [c.info.status for c in children] == ["FINISHED"]
    parent = parents[0]
    assert lines[-1].startswith("ragexp: terminated (SIGTERM)")
    assert f"1 of the sweep's runs finished and are logged under parent run {parent.info.run_id} in {uri}" in lines[-1]
    assert parent.info.status == "FAILED" and "SIGTERM" in parent.data.tags["ragexp.failure_reason"]


@pytest.mark.integration
def test_a_multirun_killed_with_sigkill_is_closed_failed_by_the_next_start(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    gate = Gate()
    with JudgeServer(script=gate) as judge:
        proc = _popen(_multirun(data_dir, judge.url, uri), tmp_path)
        assert gate.arrived.wait(timeout=300)
        proc.kill()  # kill -9: no handler runs, the parent stays RUNNING
        proc.wait()
        gate.open()
    _, parents, _ = parent_and_children(uri)
    assert [p.info.status for p in parents] == ["RUNNING"]
    assert parents[0].data.tags["ragexp.pid"] == str(proc.pid)
    nxt = run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=keyword_overlap", "progress=false",
                  f"tracking.uri={uri}", cwd=tmp_path)
    closed = [ln for ln in _lines(nxt.stderr) if "FAILED" in ln]
    assert len(closed) == 1 and f"pid {proc.pid} on {socket.gethostname()}" in closed[0]
    assert parents[0].info.run_id in closed[0]
    client, found = runs(uri)
    parent = client.get_run(parents[0].info.run_id)
    assert parent.info.status == "FAILED" and f"pid {proc.pid}" in parent.data.tags["ragexp.failure_reason"]
    assert not [r for r in found if r.info.status == "RUNNING"]


# --- the pieces, on a real store and real processes ------------------------------------------------------------

def test_mlflow_http_bounds_hold_inside_the_block_only_and_never_override_the_users(monkeypatch):
    from ragexp.tracking.store import HTTP_BOUNDS, bounded_http

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "300")  # the user's own choice
    with bounded_http():
        assert os.environ["MLFLOW_HTTP_REQUEST_MAX_RETRIES"] == HTTP_BOUNDS["MLFLOW_HTTP_REQUEST_MAX_RETRIES"]
        assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"
    assert "MLFLOW_HTTP_REQUEST_MAX_RETRIES" not in os.environ  # nothing leaks into the user's environment
    assert os.environ["MLFLOW_HTTP_REQUEST_TIMEOUT"] == "300"


def test_only_runs_of_dead_processes_of_this_host_are_closed(tmp_path):
    from mlflow.tracking import MlflowClient

    from ragexp.tracking.store import (FAILURE_TAG, HOST_TAG, PID_SPACE_TAG, PID_START_TAG, PID_TAG, check_store,
                                       owner_tags)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, exp = check_store(uri, "ragexp")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(900)"])  # killed below; alive until then
    try:
        host = socket.gethostname()
        mine = owner_tags()
        assert mine.get(PID_SPACE_TAG), "this boot and PID namespace are known (Linux /proc)"
        here = {HOST_TAG: host, PID_SPACE_TAG: mine[PID_SPACE_TAG]}  # this host, this boot and PID namespace
        live_tags = {**here, PID_TAG: str(alive.pid)}
        cases = {
            "dead": {**here, PID_TAG: str(dead.pid)},
            "alive": live_tags,
            "reused pid": {**live_tags, PID_START_TAG: "1"},  # that pid now belongs to another process
            "this process": mine,
            "other host": {**here, HOST_TAG: host + "-elsewhere", PID_TAG: str(dead.pid)},
            # the same host name and pid seen from another container (PID namespace): not this process's to judge
            "other namespace": {**here, PID_SPACE_TAG: "another-boot/pid:[1]", PID_TAG: str(dead.pid)},
            # an owner that does not say its namespace could be any container's: left alone
            "namespace not said": {HOST_TAG: host, PID_TAG: str(dead.pid)},
        }
        ids = {name: client.create_run(exp, run_name=name, tags=tags).info.run_id for name, tags in cases.items()}
        check_store(uri, "ragexp")
        status = {name: MlflowClient(uri).get_run(i) for name, i in ids.items()}
    finally:
        alive.kill()
        alive.wait()
    assert {n: r.info.status for n, r in status.items()} == {
        "dead": "FAILED", "alive": "RUNNING", "reused pid": "FAILED", "this process": "RUNNING", "other host": "RUNNING",
        "other namespace": "RUNNING", "namespace not said": "RUNNING"}
    assert f"pid {dead.pid} on {socket.gethostname()}" in status["dead"].data.tags[FAILURE_TAG]


_FILL = """
import resource, signal, sys
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails (EFBIG) instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), int(sys.argv[2])))
from mlflow.tracking import MlflowClient
try:
    MlflowClient(sys.argv[1])
except Exception:
    sys.exit(3)
"""


def _half_created_store(folder: Path) -> Path:
    """A fresh ``mlflow.db`` whose creation ran out of room mid-migration (a file-size limit stands in for a
    full disk: SQLite's writes fail the same way) and left alembic's ``_alembic_tmp_*`` copy behind."""
    import sqlite3

    for kb in range(400, 1200, 20):
        db = folder / "mlflow.db"
        db.unlink(missing_ok=True)
        proc = subprocess.run([sys.executable, "-c", _FILL, f"sqlite:///{db}", str(kb * 1024)], env=_env(),
                              capture_output=True, text=True, timeout=300)
        if proc.returncode != 3:
            continue
        con = sqlite3.connect(db)
        left = [r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE name LIKE '_alembic_tmp_%'")]
        con.close()
        if left:
            return db
    pytest.fail("no file-size limit left a half-migrated store behind")


@pytest.mark.integration
@pytest.mark.slow
def test_a_store_whose_creation_ran_out_of_disk_is_repaired_by_the_next_run(tmp_path):
    db = _half_created_store(tmp_path)
    from mlflow.tracking import MlflowClient

    with pytest.raises(Exception, match="_alembic_tmp_"):  # what every later run and upload met before
        MlflowClient(f"sqlite:///{db}")
    proc = run_cli("progress=false", "tracking.plots=false", cwd=tmp_path)
    assert f"ragexp: repaired {db}" in proc.stderr, proc.stderr[-2000:]
    assert "logged to" in proc.stdout
    _, found = runs(f"sqlite:///{db}")
    assert [r.info.status for r in found] == ["FINISHED"]


def test_a_half_migrated_store_that_cannot_be_repaired_names_the_fix(tmp_path):
    """A copy whose original table is gone may hold the only rows: it is left, and the line says what to do."""
    import sqlite3

    from ragexp.errors import TrackingError
    from ragexp.tracking.store import _repair_migration

    db = tmp_path / "mlflow.db"
    con = sqlite3.connect(db)
    con.execute("CREATE TABLE _alembic_tmp_experiments (x)")
    con.close()
    with pytest.raises(TrackingError) as caught:
        _repair_migration(f"sqlite:///{db}", Exception("table _alembic_tmp_experiments already exists"))
    assert str(caught.value).endswith(f"move it aside (mv {db} {db}.broken) and run again, else: "
                                      f"sqlite3 {db} 'DROP TABLE _alembic_tmp_experiments'")
    assert "\n" not in str(caught.value)
    con = sqlite3.connect(db)
    assert [r[0] for r in con.execute("SELECT name FROM sqlite_master")] == ["_alembic_tmp_experiments"]
    con.close()


@pytest.mark.integration
def test_a_launch_from_a_folder_that_cannot_be_written_is_one_line_saying_what_to_do():
    """/proc/1 stands in for a read-only folder (nobody, root included, can create a folder there)."""
    where = Path("/proc/1")
    for args, key in ((["progress=false"], "hydra.run.dir="), (["-m", "dataset.system=strong,weak"], "hydra.sweep.dir=")):
        proc = run_cli(*args, cwd=where, check=False)
        lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr[-3000:]
        assert lines[0].startswith("ragexp: error: cannot write the run's output folder ") and key in lines[0], lines
        assert "/proc/1 is read-only" in lines[0] and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_a_database_store_that_accepts_and_never_answers_is_one_line_not_a_hang():
    """A port that accepts connections and never speaks (a hung server, a firewall that swallows packets):
    the store check ends with one line (psycopg's connect timeout), it never waits on MLflow's retries."""
    from ragexp.errors import TrackingError
    from ragexp.tracking.store import check_store

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.5)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])  # and never a byte back
            except OSError:
                continue

    threading.Thread(target=accept, daemon=True).start()
    uri = f"postgresql://ragexp:s3cret@127.0.0.1:{listener.getsockname()[1]}/ragexp"
    try:
        with pytest.raises(TrackingError) as caught:
            check_store(uri, "ragexp")
    finally:
        stop.set()
        listener.close()
        for conn in held:
            conn.close()
    said = str(caught.value)
    assert said.startswith(f"tracking store postgresql://") and "127.0.0.1" in said and "\n" not in said, said
    assert "timed out" in said or "did not answer" in said, said
    assert "s3cret" not in said
