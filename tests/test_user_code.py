"""The user's code cannot end, hang, silence or leak through ragexp (issue 41 groups 6-9; docs/guarantees.md,
"Your code cannot stop ragexp"): ragexp/common/isolation.py in-process, then ``pipeline=traced`` as a real
process with the misbehaving apps of tests/hostile_apps.py."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import hostile_apps
import pytest
from cli import run_cli, runs

from ragexp.common.isolation import UserCode, end_without_waiting, load
from ragexp.errors import ConfigError

TESTS = Path(__file__).resolve().parent


def _raise(exc: BaseException) -> None:
    raise exc


def test_each_way_out_of_a_call_is_its_outcome_and_the_caller_goes_on():
    code = UserCode("my_app:build", timeout_s=0.5)
    assert code.call(lambda a, b=0: a + b, 2, b=3).value == 5
    said = {name: code.call(fn) for name, fn in {
        "exit": lambda: sys.exit(3), "odd": lambda: _raise(hostile_apps.Odd("an odd failure")),
        "error": lambda: 1 / 0, "interrupt": lambda: _raise(KeyboardInterrupt("by the app")),
        "hang": lambda: time.sleep(30)}.items()}
    assert {k: (o.status, o.reason) for k, o in said.items()} == {
        "exit": ("error", "SystemExit(3): the code called sys.exit(3)"),
        "odd": ("error", "Odd: an odd failure"),
        "error": ("error", "ZeroDivisionError: division by zero"),
        "interrupt": ("error", "KeyboardInterrupt: by the app"),
        "hang": ("timeout", "no answer within 0.5 s (left running in the background, its result dropped)")}
    assert code.timeouts == 1 and 0.5 <= said["hang"].seconds < 5
    # a thread the code starts from a call is a daemon: it cannot keep the process alive
    started = code.call(lambda: threading.Thread(target=time.sleep, args=(0.2,)).start() or threading.enumerate())
    assert all(t.daemon for t in started.value if t.name.startswith("Thread-"))
    with pytest.raises(ConfigError, match="expected a number of seconds"):
        UserCode("x", timeout_s=-1)


def test_a_factory_or_an_import_that_fails_is_one_line_and_signal_handlers_are_put_back(tmp_path, monkeypatch):
    code = UserCode("pipeline.factory hostile_apps:exit_factory")
    with pytest.raises(ConfigError) as exc:
        code.build(hostile_apps.exit_factory)
    assert str(exc.value) == "pipeline.factory hostile_apps:exit_factory failed: SystemExit(3): the code called sys.exit(3)"
    with pytest.raises(ConfigError, match=r"^odd failed: Odd: cannot build$"):
        UserCode("odd").build(hostile_apps.odd_factory)
    mine = signal.getsignal(signal.SIGTERM)
    UserCode("ignoring").build(lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN))
    assert signal.getsignal(signal.SIGTERM) is mine
    (tmp_path / "broken_app.py").write_text("def build(:\n    pass\n")
    (tmp_path / "exiting_app.py").write_text("import sys\nsys.exit(4)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError) as exc:
        load("broken_app:build", "pipeline.factory")
    assert str(exc.value).startswith("pipeline.factory broken_app:build could not be imported: SyntaxError: ")
    assert str(exc.value).endswith(f"({tmp_path / 'broken_app.py'}, line 1)") and "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match=r"exiting_app:build could not be imported: SystemExit\(4\)"):
        load("exiting_app:build", "pipeline.factory")
    end_without_waiting(0)  # nothing the user's code started is left: no watch, the process goes on


def _records(path: Path, queries: list[str]) -> str:
    path.write_text("".join(json.dumps({"id": f"q{i}", "query": q, "reference_answers": ["one queen"],
                                        "gt_context_ids": ["bee-01"]}) + "\n" for i, q in enumerate(queries)))
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _no_secret_anywhere(folder: Path, *texts: str) -> list[str]:
    """Where a secret of tests/hostile_apps.py is found: the texts (console) and every file under ``folder``
    (the MLflow store's SQLite bytes, its artifacts, the results folder, caches)."""
    secrets = [hostile_apps.KEY.encode(), hostile_apps.VAR_VALUE.encode()]
    found = [f"text {i}" for i, t in enumerate(texts) for s in secrets if s.decode() in t]
    return found + [str(f) for f in folder.rglob("*") if f.is_file() and any(s in f.read_bytes() for s in secrets)]


@pytest.mark.integration
def test_a_hostile_traced_app_gets_per_question_statuses_and_ragexp_ends(tmp_path):
    """One run: sys.exit(3), a BaseException subclass, stdout and stderr closed, a hang past
    pipeline.timeout_s, a key in an exception event and in the answer, a variable set mid-run, and a
    non-daemon thread left by the factory; then three runs whose import or factory fails."""
    queries = ["How many queens? ok", "exit please", "odd one", "secret answer", "leak it", "close the streams",
               "hang forever", "How many queens? again"]
    data = tmp_path / "records.jsonl"
    digest = _records(data, queries)
    env = {"PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    t0 = time.monotonic()
    proc = run_cli("dataset=records", f"dataset.path={data}", "pipeline=traced", "pipeline.factory=hostile_apps:build",
                   "pipeline.autolog=none", "pipeline.timeout_s=4", "metric=[recall_at_k,answer_token_f1]",
                   "progress=false", cwd=tmp_path, env=env, timeout=300)
    took = time.monotonic() - t0
    out = proc.stdout + proc.stderr
    assert "Traceback" not in out and took < 120, (took, out[-3000:])
    assert "the user's code left 1 thread(s) running (app-lingering-thread)" in proc.stderr
    assert "4 question(s) failed in the app" in proc.stderr and "1 of them past pipeline.timeout_s=4 s" in proc.stderr
    client, found = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert [r.info.status for r in found] == ["FINISHED"]
    assert found[0].data.metrics["pipeline/timeouts"] == 1.0
    table = json.loads(next(tmp_path.rglob("per_sample.json")).read_text())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    errors = {r["id"]: r.get("pipeline_error") for r in rows}
    assert errors["q1"] == "SystemExit(3): the code called sys.exit(3)" and errors["q2"] == "Odd: an odd failure"
    assert errors["q4"] == "RuntimeError: the vector store refused *** (token ***)"
    assert errors["q6"].startswith("no answer within 4 s") and errors["q0"] is None and errors["q7"] is None
    assert errors["q5"] is None  # closing the streams is no failure: ragexp put them back, printed its results after
    assert "recall_at_k" in proc.stdout  # the results table, printed after the app closed sys.stdout
    answers = {r["id"]: r.get("answer") for r in rows}
    assert answers["q3"] == "A honeybee colony has one queen. Use *** or ***."
    assert not _no_secret_anywhere(tmp_path, proc.stdout, proc.stderr)
    assert hashlib.sha256(data.read_bytes()).hexdigest() == digest
    for factory, said in [("hostile_apps:exit_factory", "pipeline.factory hostile_apps:exit_factory() failed: "
                                                         "SystemExit(3): the code called sys.exit(3)"),
                          ("hostile_apps:odd_factory", "failed: Odd: cannot build"),
                          ("no_such_module_anywhere:build", "cannot import module 'no_such_module_anywhere'")]:
        bad = run_cli("dataset=records", f"dataset.path={data}", "pipeline=traced", f"pipeline.factory={factory}",
                      "metric=[recall_at_k]", cwd=tmp_path, env=env, check=False, timeout=120)
        lines = [line for line in bad.stderr.splitlines() if line.strip() and "INFO" not in line]
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr[-2000:]
        assert len([line for line in lines if line.startswith("ragexp: error")]) == 1, lines


@pytest.mark.integration
def test_sigterm_stops_a_run_whose_app_ignores_it(tmp_path):
    """The factory ignores SIGTERM and each question takes a second: SIGTERM still ends ragexp (143) with its
    line, within the grace it promises, no traceback."""
    data = tmp_path / "records.jsonl"
    _records(data, [f"How many queens? {i}" for i in range(60)])
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": f"{TESTS}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", "dataset=records", f"dataset.path={data}",
                             "pipeline=traced", "pipeline.factory=hostile_apps:build", "+pipeline.kwargs.linger=false",
                             "+pipeline.kwargs.ignore_sigterm=true", "+pipeline.kwargs.slow=1.0",
                             "pipeline.autolog=none", "metric=[recall_at_k]", "progress=false"],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.rglob("mlflow.db")):
        time.sleep(0.5)
    time.sleep(8)  # the store is there, the app built: questions are being asked
    proc.send_signal(signal.SIGTERM)
    t0 = time.monotonic()
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, (proc.returncode, err[-3000:])
    assert time.monotonic() - t0 < 45 and "terminated (SIGTERM)" in err and "Traceback" not in out + err, err[-3000:]


@pytest.mark.integration
def test_kill_9_of_a_streamed_run_leaves_no_scoring_process(tmp_path):
    """Issue 41 group 9: the forked scorers of execution.mode=stream end with their parent, even by kill -9."""
    data = tmp_path / "records.jsonl"
    data.write_text("".join(json.dumps({"id": f"r{i}", "query": f"question {i} about bees",
                                        "answer": "the queen bee lays the eggs " * 20,
                                        "reference_answers": ["the queen lays the eggs of the hive " * 10]}) + "\n"
                            for i in range(60000)))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", "dataset=records", f"dataset.path={data}",
                             "execution.mode=stream", "execution.processes=2", "execution.chunk_records=500",
                             "metric=[answer_token_f1,bleu]", "progress=false", "tracking.enabled=false"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def children() -> list[int]:
        out = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]

    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(children()) < 2 and proc.poll() is None:
        time.sleep(0.5)
    scorers = children()
    assert len(scorers) >= 2, "the streamed run did not start its scoring processes"
    proc.kill()
    proc.wait()

    def alive(pid: int) -> bool:
        try:
            return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
        except OSError:
            return False

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in scorers):
        time.sleep(0.2)
    left = [p for p in scorers if alive(p)]
    for pid in left:  # not to leave them behind for the next test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"scoring processes {left} outlived their parent"


@pytest.mark.slow
def test_a_judges_rationale_quoting_a_key_reaches_no_assessment(tmp_path):
    """Issue 41 group 6: ragexp's judge metric as an mlflow.genai scorer, its judge quoting a key in its reason
    (stand-in judge, a real OpenAI-compatible server): the assessment's rationale is redacted, the key is in no
    byte of the MLflow store."""
    import mlflow
    from judge_server import JudgeServer, Reply

    import ragexp

    key = hostile_apps.KEY

    def quoting(request):
        return Reply(text=json.dumps({"score": 4, "reason": f"the answer is close; it also shows {key}"}))

    before = mlflow.get_tracking_uri()
    try:
        with JudgeServer(script=quoting) as server:
            scorers = ragexp.mlflow_scorers("answer_similarity", ["answer_similarity"], judge="openai_compatible",
                                            overrides=[f"judge.api_base={server.url}", "judge.max_retries=0",
                                                       f"judge.cache_path={tmp_path / 'judge.sqlite'}"])
            mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
            mlflow.set_experiment("scorers")
            result = mlflow.genai.evaluate(data=[{"inputs": {"query": "How many queens?"},
                                                  "outputs": {"answer": "One queen."},
                                                  "expectations": {"expected_response": "A colony has one queen."}}],
                                           scorers=scorers)
    finally:
        mlflow.set_tracking_uri(before)
    rationale = result.result_df["answer_similarity/rationale"].iloc[0]
    assert rationale.endswith("it also shows ***"), rationale
    leaks = [str(f) for f in tmp_path.rglob("*") if f.is_file() and key.encode() in f.read_bytes()]
    assert not leaks, leaks
