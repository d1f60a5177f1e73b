"""``python -m ragexp metric=full judge=...`` end to end: the judge server, the CLI, MLflow read back."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragexp.results.tables import read_parquet_columns
from ragexp.errors import ConfigError
from ragexp.results.columns import detail_column, status_column

from cli import run_cli, runs
from judge_server import JudgeServer

JUDGE_KEYS = ("answer_similarity", "retrieval_precision", "augmentation_accuracy", "augmentation_precision",
              "answer_consistency", "answer_consistency_binary", "questeval_recall", "questeval_precision",
              "overall_score")
USAGE_KEYS = ("judge/calls", "judge/cache_hits", "judge/tokens_in", "judge/tokens_out", "judge/cost_usd",
              "judge/failures")


def _no_keys() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = ""  # unset: the judge itself must keep litellm off the network
    return env


@pytest.mark.integration
def test_full_suite_with_a_judge_logs_every_judge_metric_and_usage(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with JudgeServer() as server:
        args = (f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=full", "judge=openai_compatible",
                f"judge.api_base={server.url}", "judge.cost_per_million_in=0.15", "judge.cost_per_million_out=0.6",
                f"tracking.uri={uri}", "progress=false")
        first = run_cli(*args, cwd=tmp_path, env=_no_keys())
        calls_first = server.calls
        run_cli(*args, cwd=tmp_path, env=_no_keys())  # the same run again: all from the cache
        assert server.calls == calls_first
    assert (tmp_path / ".ragexp_cache" / "judge.sqlite").exists()  # in the launch dir, not Hydra's output dir
    assert "verdicts from the cache" in first.stdout + first.stderr  # the usage line is logged
    assert "cost map fetch" not in first.stdout + first.stderr  # litellm's price map is read locally
    client, found = runs(uri)
    assert len(found) == 2
    one, two = (r.data.metrics for r in found)
    for key in JUDGE_KEYS + USAGE_KEYS + ("token_f1", "keyword_overlap"):
        assert key in one, key
    assert one["judge/calls"] == calls_first > 0 and one["judge/cache_hits"] == 0
    assert one["judge/cost_usd"] == pytest.approx((one["judge/tokens_in"] * 0.15 + one["judge/tokens_out"] * 0.6) / 1e6)
    assert two["judge/calls"] == 0 and two["judge/cache_hits"] == calls_first and two["judge/cost_usd"] == 0
    assert all(one[k] == two[k] for k in JUDGE_KEYS if k in two)
    assert 0 <= one["answer_similarity"] <= 5 and 0 <= one["overall_score"] <= 1
    # the per-sample table holds each judge metric's value, status and rationale
    path = client.download_artifacts(found[0].info.run_id, "per_sample.json", str(tmp_path))
    table = json.loads(open(path, encoding="utf-8").read())
    columns = table["columns"]
    rows = [dict(zip(columns, row)) for row in table["data"]]
    assert len(rows) == 8
    for key in JUDGE_KEYS:
        assert status_column(key) in columns
    assert {r[status_column("answer_consistency")] for r in rows} == {"ok"}
    path = client.download_artifacts(found[0].info.run_id, "per_sample.parquet", str(tmp_path))  # untrimmed
    first = {c: v[0] for c, v in read_parquet_columns(Path(path)).items()}
    assert json.loads(first[detail_column("retrieval_precision")])["relevant"]  # the verdicts behind the value
    params = found[0].data.params
    assert params["judge"] == "openai_compatible" and params["judge.cost_per_million_in"] == "0.15"  # set: a param
    assert "judge.api_key_env" not in params and "judge.model" not in params  # the option's defaults: in config.yaml


@pytest.mark.integration
def test_hosted_judge_without_its_key_fails_at_once_with_one_line(tmp_path, data_dir):
    proc = run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=full", "judge=gpt4o",
                   f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", cwd=tmp_path, env=_no_keys(), check=False)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert lines == ["ragexp: error: judge 'gpt4o' (gpt-4o) needs an API key: set the environment variable "
                     "OPENAI_API_KEY (or pick another judge=...)"]
    assert not (tmp_path / "mlflow.db").exists()  # stopped before any work


def test_judge_group_composes(compose):
    cfg = compose("metric=judge", "judge=gpt4o")
    assert cfg.judge.model == "gpt-4o" and cfg.judge.api_key_env == "OPENAI_API_KEY"
    assert cfg.judge.temperature == 0 and cfg.judge.seed == 0
    assert set(JUDGE_KEYS) <= set(cfg.metric)
    full = compose("metric=full", "judge=ollama")
    assert set(JUDGE_KEYS) <= set(full.metric) and "token_f1" in full.metric
    for name in ("gpt4o_mini", "claude_sonnet", "gemini_flash", "openai_compatible"):
        assert compose(f"judge={name}").judge.name == name


def test_judge_metrics_without_a_judge_raise_before_any_work(compose):
    from ragexp.workflow.runner import run

    cfg = compose("dataset=memory_eval_true", "metric=judge")
    assert cfg.get("judge") is None
    with pytest.raises(ConfigError, match="judge=<name>"):
        run(cfg)


@pytest.mark.integration
def test_multirun_jobs_in_parallel_processes_share_the_cache(tmp_path, data_dir):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    with JudgeServer(latency=0.05) as server:
        run_cli("-m", f"data_dir={data_dir}", "dataset=memory_eval_true", "dataset.limit=3", "metric=judge",
                "judge=openai_compatible", f"judge.api_base={server.url}", "judge.max_concurrency=2,4",
                "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"tracking.uri={uri}", "progress=false",
                cwd=tmp_path, env=_no_keys())
        distinct = len({json.dumps(r.messages, sort_keys=True) for r in server.log})
    _, found = runs(uri)
    children = [r for r in found if "mlflow.parentRunId" in r.data.tags]
    assert len(children) == 2
    for child in children:
        m = child.data.metrics
        assert all(k in m for k in JUDGE_KEYS) and m["judge/failures"] == 0
    # each job needs every distinct request once (asked, or answered by the cache the other job filled)
    for child in children:
        assert child.data.metrics["judge/calls"] + child.data.metrics["judge/cache_hits"] == distinct
    assert sum(c.data.metrics["judge/calls"] for c in children) == server.calls


@pytest.mark.integration
def test_budget_stop_from_the_cli_says_how_far_it_got_and_exits(tmp_path, data_dir):
    with JudgeServer() as server:
        proc = run_cli(f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=judge", "judge=openai_compatible",
                       f"judge.api_base={server.url}", "judge.model=openai/gpt-4o", "judge.cost_per_million_in=null",
                       "judge.cost_per_million_out=null", "judge.max_cost_usd=0.02", "judge.max_tokens=128",
                       f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "progress=false",
                       cwd=tmp_path, env=_no_keys(), check=False, timeout=120)  # no hang at exit either
        paid = server.calls
    assert proc.returncode == 2
    error = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragexp: error:")]
    assert len(error) == 1 and "max_cost_usd=0.02" in error[0] and "of 8 samples fully scored" in error[0]
    spent = float(error[0].split("$")[1].split()[0])
    assert 0 < spent <= 0.02 and paid > 0
    from ragexp.judge.cache import JudgeCache

    assert len(JudgeCache(tmp_path / ".ragexp_cache" / "judge.sqlite")) == paid  # what was paid for is kept


@pytest.mark.integration
def test_ctrl_c_mid_judge_keeps_every_reply_received_and_the_rerun_asks_only_for_the_rest(tmp_path, data_dir):
    from ragexp.judge.cache import JudgeCache

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = (f"data_dir={data_dir}", "dataset=memory_eval_true", "metric=judge", "judge=openai_compatible",
            "judge.max_concurrency=2", f"tracking.uri={uri}", "progress=false")
    env = {**_no_keys(), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    with JudgeServer(latency=0.2) as server:
        proc = subprocess.Popen([sys.executable, "-m", "ragexp", *args, f"judge.api_base={server.url}"], cwd=tmp_path,
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 300
        while server.calls < 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be interrupted"
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = proc.communicate(timeout=300)  # a hang guard: the exit waits for the helper's store check
        sent_first = server.calls
        cached = len(JudgeCache(tmp_path / ".ragexp_cache" / "judge.sqlite"))
        server.reset()
        run_cli(*args, f"judge.api_base={server.url}", cwd=tmp_path, env=_no_keys())  # the same command again
        distinct = len({json.dumps(r.messages, sort_keys=True) for r in server.log})
    assert proc.returncode == 130
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert "Traceback" not in err and lines[-1].startswith("ragexp: interrupted: judge 'openai_compatible' stopped after")
    answered, sent = map(int, re.search(r"after (\d+) replies to (\d+) requests", lines[-1]).groups())
    assert 0 < answered <= cached <= sent <= sent_first  # every reply that arrived was kept
    assert sent_first - cached <= 2  # lost: at most the requests in flight (max_concurrency) at the interrupt
    _, found = runs(uri)
    assert len(found) == 1  # the interrupted run logged nothing
    m = found[0].data.metrics
    assert m["judge/cache_hits"] == cached and m["judge/calls"] == server.calls  # only the rest was asked
    assert m["judge/failures"] == 0
    assert distinct == server.calls  # and nothing twice
