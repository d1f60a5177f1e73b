"""Every reply shape and every wait a judge server can produce ends as a per-sample status, in bounded time.

The real litellm path against tests/judge_server.py (issue 33): 200 replies without a text to read
(no ``choices``, an empty list, a null message, no content, tool calls instead of text) mixed among good
ones; a 429 whose ``Retry-After`` outlasts the verdict's deadline, and one the run waits out with a line;
a server that is away for a few seconds and comes back.
"""

from __future__ import annotations

import json
import logging
import time

import pytest

from ragexp.common.records import Record
from ragexp.judge import build_judge

from judge_server import JudgeServer, Reply, judge_specs


def _judge(url, tmp_path, specs, **over):
    cfg = dict(name="shapes", model="openai/gpt-4o-mini", api_base=url, api_key_env=None,
               cache_path=str(tmp_path / "judge.sqlite"), timeout_s=5.0, max_retries=2, backoff_s=0.01,
               max_backoff_s=0.05, max_concurrency=4, max_tokens=64)
    return build_judge({**cfg, **over}, specs)


def _body(choices) -> bytes:
    body = {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "m",
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}}
    if choices is not ...:
        body["choices"] = choices
    return json.dumps(body).encode()


_TOOL = {"id": "c1", "type": "function", "function": {"name": "grade", "arguments": '{"relevant": true}'}}
SHAPES = {  # reply shape: (body, the reason's words)
    "no-choices-key": (_body(...), "choices"),  # litellm itself names it
    "empty-choices": (_body([]), "no choices"),
    # litellm refuses it itself, with a traceback in its message: the reason keeps its last line only
    "null-message": (_body([{"index": 0, "message": None, "finish_reason": "stop"}]),
                     "Invalid response object (AttributeError"),
    "no-content": (_body([{"index": 0, "message": {"role": "assistant"}, "finish_reason": "stop"}]), "no content"),
    "null-content": (_body([{"index": 0, "message": {"role": "assistant", "content": None},
                             "finish_reason": "stop"}]), "no content"),
    "tool-calls": (_body([{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": [_TOOL]},
                           "finish_reason": "tool_calls"}]), "tool calls (grade) instead of text"),
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_reply_shape_is_a_per_sample_status_and_the_others_are_scored(server, tmp_path, shape):
    body, words = SHAPES[shape]
    # one record in seven gets the shape on every attempt; the rest are answered sensibly
    server.script = lambda r: Reply(raw=body) if "[odd]" in r.first_user else None
    records = [Record(id=str(i), query=f"What is the capital of France? ({i}){' [odd]' if i % 7 == 3 else ''}",
                      contexts=["Paris is the capital of France."]) for i in range(14)]
    s = judge_specs("retrieval_precision")
    scores, usage = _judge(server.url, tmp_path, s).score(records, s)
    per = scores["retrieval_precision"]
    assert len(per) == len(records)
    for record, score in zip(records, per):
        if "[odd]" in record.query:
            assert score.status == "api_error" and score.value is None, score
            assert words in score.detail and "Traceback" not in score.detail, score.detail
        else:
            assert score.status == "ok" and score.value == 1.0
    odd_calls = sum(1 for r in server.log if "[odd]" in r.first_user)
    assert odd_calls == (2 if shape == "tool-calls" else 2 * 3)  # tool calls are not asked again; the rest are
    assert usage["judge/failures/api_error"] == 2
    assert usage["judge/tokens_in"] >= 10 * odd_calls  # the replies were paid for: their tokens are counted


def test_a_retry_after_past_the_deadline_fails_fast_with_one_line(server, tmp_path, caplog):
    server.script = lambda r: Reply(status=429, headers={"Retry-After": "600"}) if r.attempt == 0 else None
    records = [Record(id=str(i), query=f"What is the capital of France? ({i})", contexts=["Paris is the capital."])
               for i in range(16)]
    s = judge_specs("retrieval_precision")
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="ragexp.judge"):
        scores, usage = _judge(server.url, tmp_path, s, timeout_s=2.0, deadline_s=20, max_concurrency=2).score(records, s)
    took = time.monotonic() - started
    per = scores["retrieval_precision"]
    assert {x.status for x in per} == {"rate_limited"}, [x.status for x in per]
    assert all("600 s" in x.detail and "judge.deadline_s=20" in x.detail for x in per)
    assert took < 20  # no verdict waited for a pause it could never see the end of
    lines = [r.getMessage() for r in caplog.records if "Retry-After" in r.getMessage()]
    assert len(lines) == 1 and server.url in lines[0] and "600 s" in lines[0] and "requests held" in lines[0]
    assert usage["judge/calls"] <= 2  # the requests sent before the first 429 came back, nothing after it


def test_a_pause_within_the_deadline_is_waited_out_and_told(server, tmp_path, caplog):
    first = []

    def script(r):
        if not first:
            first.append(r)
            return Reply(status=429, headers={"Retry-After": "3"})
        return None

    server.script = script
    records = [Record(id=str(i), query=f"What is the capital of France? ({i})", contexts=["Paris is the capital."])
               for i in range(8)]
    s = judge_specs("retrieval_precision")
    with caplog.at_level(logging.WARNING, logger="ragexp.judge"):
        scores, _ = _judge(server.url, tmp_path, s, timeout_s=1.0, deadline_s=30, max_concurrency=1).score(records, s)
    assert {x.status for x in scores["retrieval_precision"]} == {"ok"}
    text = [r.getMessage() for r in caplog.records]
    assert [t for t in text if "asking to wait 3 s" in t and server.url in t]
    # the stall watcher counts the requests queued behind the pause, not only those in flight (none are)
    stall = [t for t in text if "no reply from" in t]
    assert stall and "0 in flight" in stall[0] and "Retry-After" in stall[0]
    starts = sorted(r.at for r in server.log)
    assert starts[1] - starts[0] >= 3  # nobody was sent before the pause ended


def test_a_server_away_for_seconds_is_retried_not_called_unreachable(tmp_path):
    down_s = 4.0
    probe = JudgeServer().start()
    port = int(probe.url.rsplit(":", 1)[1].split("/")[0])
    probe.stop()  # the port is closed: connections are refused until the server comes back
    records = [Record(id=str(i), query=f"What is the capital of France? ({i})", contexts=["Paris is the capital."])
               for i in range(6)]
    s = judge_specs("retrieval_precision")
    judge = _judge(f"http://127.0.0.1:{port}/v1", tmp_path, s, backoff_s=1.0, max_backoff_s=30.0, max_retries=4)
    import threading

    back = JudgeServer(port=port)
    timer = threading.Timer(down_s, back.start)
    timer.start()
    try:
        scores, usage = judge.score(records, s)
    finally:
        timer.join()
        back.stop()
    assert {x.status for x in scores["retrieval_precision"]} == {"ok"}
    assert usage["judge/retries"] > 0
