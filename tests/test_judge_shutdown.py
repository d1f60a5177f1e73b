"""Ctrl-C on a judge multirun: every process exits, its HTTP clients closed first.

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


def _interrupt_once(tmp_path: Path, data_dir, server: JudgeServer, after_calls: int, model: str,
                    launcher: tuple[str, ...] = ()):
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(LITELLM_LOCAL_MODEL_COST_MAP="True", PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1",
               PYTHONWARNINGS="always::ResourceWarning")  # an HTTP session left open says so at exit
    args = ["-m", f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=judge", "judge=openai_compatible",
            f"judge.api_base={server.url}", f"judge.model={model}",
            "judge.max_concurrency=2,3", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "progress=false",
            f"judge.cache_path={tmp_path / f'judge-{after_calls}.sqlite'}", *launcher]
    server.reset()
    proc = subprocess.Popen([sys.executable, "-m", "ragexp", *args], cwd=tmp_path, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while server.calls < after_calls and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert proc.poll() is None, "the run ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    try:
        _, err = proc.communicate(timeout=BOUND_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        pytest.fail(f"Ctrl-C after {after_calls} calls: the process did not exit within {BOUND_S} s\n{err[-3000:]}")
    return proc.returncode, err


@pytest.mark.integration
@pytest.mark.parametrize("model", ["hosted_vllm/judge", "openai/gpt-4o-mini"])
def test_repeated_ctrl_c_of_a_judge_multirun_always_exits_cleanly(tmp_path, data_dir, model):
    with JudgeServer(latency=0.15) as server:
        for after_calls in (1, 6):
            code, err = _interrupt_once(tmp_path, data_dir, server, after_calls, model)
            assert code == 130, err[-3000:]
            assert "Traceback" not in err, err[-3000:]
            assert not UNCLOSED.search(err), err[-3000:]  # every HTTP session was closed before exit
            assert [ln for ln in err.splitlines() if ln.strip()][-1].startswith("ragexp: interrupted")


@pytest.mark.integration
def test_repeated_ctrl_c_of_a_parallel_judge_multirun_exits(tmp_path, data_dir):
    """Hydra's joblib launcher: the jobs run in worker processes, which get the Ctrl-C too."""
    with JudgeServer(latency=0.15) as server:
        for after_calls in (2, 8):
            code, err = _interrupt_once(tmp_path, data_dir, server, after_calls, "hosted_vllm/judge",
                                        ("hydra/launcher=joblib", "hydra.launcher.n_jobs=2"))
            assert code == 130, err[-3000:]
            assert "Traceback" not in err, err[-3000:]
            assert not UNCLOSED.search(err), err[-3000:]


def _loop_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "ragexp-judge-loop" and t.is_alive()]


def test_clients_are_closed_after_an_error_at_once_and_after_a_success_by_shutdown(tmp_path):
    import litellm

    from ragexp.core.scoring import build_metrics
    from ragexp.judge import build_judge
    from ragexp.errors import JudgeUnreachable
    from ragexp.judge.loop import shutdown
    from ragexp.common.records import Record

    from test_judge_robust import closed_port, judge_cfg

    s = build_metrics({"retrieval_precision": {"_target_": "ragexp.metrics.judged.relevance.retrieval_precision"}})[0]
    records = [Record(id=str(i), query=f"Capital of France {i}?", contexts=["Paris is the capital of France."])
               for i in range(6)]
    with JudgeServer() as server:
        for model in ("hosted_vllm/judge", "openai/gpt-4o-mini"):
            scores, _ = build_judge(judge_cfg(server.url, tmp_path, model=model, cache=False), s).score(records, s)
            assert [sc.status for sc in scores["retrieval_precision"]] == ["ok"] * 6
        clients = list(litellm.in_memory_llm_clients_cache.cache_dict.values())
        # each client's HTTP pool, taken now: openai's clients say is_closed(); litellm's handlers give their
        # httpx client as .client (a closed one is replaced by a fresh one when asked again)
        pools = [None if callable(getattr(c, "is_closed", None)) else c.client for c in clients]
        assert clients and _loop_threads()  # kept between runs of one process...
        shutdown()  # ...until exit (atexit runs this) or an error
        assert not _loop_threads() and not litellm.in_memory_llm_clients_cache.cache_dict
        for c, pool in zip(clients, pools):
            assert (c.is_closed() if pool is None else pool.is_closed), c
        again, _ = build_judge(judge_cfg(server.url, tmp_path, cache=False), s).score(records, s)  # a fresh loop
        assert again == scores
    judge = build_judge(judge_cfg(f"http://127.0.0.1:{closed_port()}/v1", tmp_path, cache=False, backoff_s=0.05), s)
    with pytest.raises(JudgeUnreachable):
        judge.score(records, s)
    assert not _loop_threads() and not litellm.in_memory_llm_clients_cache.cache_dict  # closed on the way out
