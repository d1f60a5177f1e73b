"""Structured output in each server's form (docs/judge.md, "Structured output"): OpenAI's json_schema
(vLLM, llama-server, Ollama) and llama-cpp-python's json_object + schema, each as a setting, and ``auto``,
which falls back once, recorded, when the server refuses a form as llama-cpp-python does."""

from __future__ import annotations

import logging

import pytest

from ragexp.common.records import Record
from ragexp.errors import ConfigError
from ragexp.judge import build_judge
from ragexp.judge.parse import verdict_kinds

from judge_server import LLAMA_CPP_PYTHON, JudgeServer, judge_specs

RECORDS = [Record(id=str(i), query=f"What is the capital of France? ({i})", contexts=[f"Paris is the capital. ({i})"],
                  answer="Paris is the capital.") for i in range(6)]


def _judge(server, tmp_path, specs, **over):
    cfg = dict(name="so", model="hosted_vllm/judge", api_base=server.url, api_key_env=None, cache=False,
               timeout_s=10, max_retries=1, backoff_s=0.01, max_backoff_s=0.05, max_concurrency=1, max_tokens=64)
    return build_judge({**cfg, **over}, specs)


@pytest.mark.parametrize("form", ["json_schema", "json_object_schema"])
def test_each_form_is_sent_as_its_servers_take_it(tmp_path, form):
    s = judge_specs("retrieval_precision", "answer_consistency_binary")
    with JudgeServer() as server:
        scores, usage = _judge(server, tmp_path, s, structured_output=form).score(RECORDS, s)
    assert {x.status for per in scores.values() for x in per} == {"ok"}
    assert {r.form for r in server.log} == {form}
    assert all(r.schema == verdict_kinds()[r.task].schema for r in server.log)
    if form == "json_object_schema":  # llama-cpp-python's spelling, passed through litellm as is
        assert all(set(r.body["response_format"]) == {"type", "schema"} for r in server.log)


def test_auto_falls_back_once_recorded_when_the_server_refuses_json_schema(tmp_path, caplog):
    s = judge_specs("retrieval_precision", "answer_consistency_binary")
    with JudgeServer(refuse=LLAMA_CPP_PYTHON) as server, caplog.at_level(logging.WARNING, logger="ragexp.judge"):
        scores, usage = _judge(server, tmp_path, s, structured_output="auto").score(RECORDS, s)
    assert {x.status for per in scores.values() for x in per} == {"ok"}
    forms = [r.form for r in server.log]
    assert forms[0] == "json_schema" and set(forms[1:]) == {"json_object_schema"}  # one refusal, then the other form
    assert usage["judge/structured_output_fallbacks"] == 1 and usage["judge/retries"] == 0
    lines = [r.getMessage() for r in caplog.records if "refused structured output" in r.getMessage()]
    assert len(lines) == 1 and "json_object_schema from now on" in lines[0] and "Input should be 'text' or 'json_object'" in lines[0]


def test_auto_ends_in_plain_text_when_the_server_takes_no_schema(tmp_path):
    s = judge_specs("retrieval_precision")
    with JudgeServer(refuse=("json_schema", "json_object_schema")) as server:
        scores, usage = _judge(server, tmp_path, s, structured_output="auto").score(RECORDS, s)
    assert {x.status for x in scores["retrieval_precision"]} == {"ok"}
    forms = [r.form for r in server.log]
    assert forms[:2] == ["json_schema", "json_object_schema"] and set(forms[2:]) == {"text"}
    assert usage["judge/structured_output_fallbacks"] == 2


def test_a_form_set_by_hand_is_not_changed_behind_the_users_back(tmp_path):
    s = judge_specs("retrieval_precision")
    with JudgeServer(refuse=LLAMA_CPP_PYTHON) as server:
        scores, usage = _judge(server, tmp_path, s, structured_output="json_schema").score(RECORDS[:2], s)
    assert {x.status for x in scores["retrieval_precision"]} == {"api_error"}
    assert "Input should be 'text' or 'json_object'" in scores["retrieval_precision"][0].detail
    assert "judge/structured_output_fallbacks" not in usage


def test_an_unknown_form_is_one_line():
    with pytest.raises(ConfigError, match="structured_output must be null, auto, json_schema"):
        build_judge(dict(name="x", model="hosted_vllm/j", api_base="http://127.0.0.1:9/v1", api_key_env=None,
                         structured_output="xml"), judge_specs("retrieval_precision"))
