"""Ctrl-C on a judge multirun: every process exits, its HTTP clients and worker processes closed first.

Real processes: ``python -m ragexp -m ...`` against the real local judge server, interrupted with
SIGINT at a different moment each time (issue 14, item 5). A hang is a failure through the
``communicate`` timeout, not a timing assertion.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from judge_server import JudgeServer

BOUND_S = 90  # far above a normal exit on a loaded 2-core host; a hang never gets there
UNCLOSED = re.compile(r"Unclosed client session|Unclosed connector|unclosed transport|Event loop is closed|"
                      r"Task was destroyed but it is pending", re.I)


def _children(pid: int) -> set[int]:
    """The pids whose parent is ``pid`` (read from /proc)."""
    out = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.add(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _interrupt_once(tmp_path: Path, data_dir, server: JudgeServer, after_calls: int, model: str, workers: int):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1",
               PYTHONWARNINGS="always::ResourceWarning")  # an HTTP session left open says so at exit
    args = ["-m", f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=judge", "judge=openai_compatible",
            f"judge.api_base={server.url}", f"judge.model={model}", f"judge.workers={workers}",
            "judge.max_concurrency=2,3", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "progress=false",
            f"judge.cache_path={tmp_path / f'judge-{after_calls}.sqlite'}"]
    server.reset()
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while server.calls < after_calls and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    helpers = _children(proc.pid)  # judge worker processes, when judge.workers > 1
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    try:
        _, err = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"Ctrl-C after {after_calls} calls: the process did not exit within {BOUND_S} s\n{err[-3000:]}")
    return proc.returncode, err, helpers


@pytest.mark.parametrize("model, workers", [("hosted_vllm/judge", 1), ("openai/gpt-4o-mini", 1),
                                            ("hosted_vllm/judge", 2)])
def test_repeated_ctrl_c_of_a_judge_multirun_always_exits_cleanly(tmp_path, data_dir, model, workers):
    with JudgeServer(latency=0.15) as server:
        for after_calls in (1, 6):
            code, err, helpers = _interrupt_once(tmp_path, data_dir, server, after_calls, model, workers)
            assert code == 130, err[-3000:]
            assert "Traceback" not in err, err[-3000:]
            assert not UNCLOSED.search(err), err[-3000:]  # every HTTP session was closed before exit
            assert [ln for ln in err.splitlines() if ln.strip()][-1].startswith("ragexp: interrupted")
            time.sleep(0.5)
            assert not [p for p in helpers if _alive(p)]  # no worker process outlives the run
