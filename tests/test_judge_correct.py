"""answer_correct (ragexp/metrics/judged/correct.py), the judged answer correctness of metric=locomo_judged
in the style of Mem0's "J": its arithmetic, and the metric through the real local judge server
(tests/judge_server.py), a failure kept per sample with its reason."""

from __future__ import annotations

import json

from ragexp.common.records import Record
from ragexp.judge import build_judge
from ragexp.metrics.base import REGISTRY
from ragexp.metrics.judged.correct import CORRECT, answer_correct_value

from judge_server import Reply, judge_specs


def test_correct_against_any_reference():
    assert answer_correct_value([False, True, False]) == 1.0
    assert answer_correct_value([False, False]) == 0.0
    info = REGISTRY["answer_correct"]
    assert info.fields == ("query", "answer", "reference_answers") and info.binary
    assert info.judge.scale == 1.0 and info.judge.asks == (CORRECT,)


def _judge(server, specs):
    return build_judge(dict(name="test", model="openai/gpt-4o-mini", api_base=server.url, api_key_env=None,
                            cache=False, timeout_s=5.0, max_retries=1, backoff_s=0.01, max_backoff_s=0.05),
                       specs)


def test_through_the_local_judge_server(server):
    """The stand-in judge's generic rule says true when at least half the answer's terms are in the question
    and the reference: 'Oslo' against 'Oslo' is correct, 'Bergen' is not."""
    specs = judge_specs("answer_correct")
    q = "Where does Ann live?"
    records = [Record("right", q, answer="Oslo", reference_answers=["Oslo"]),
               Record("wrong", q, answer="Bergen", reference_answers=["Oslo"]),
               Record("second-reference", q, answer="Oslo", reference_answers=["Paris", "Oslo"]),
               Record("empty", q, answer="", reference_answers=["Oslo"]),
               Record("no-reference", q, answer="Oslo", reference_answers=[" "]),
               Record("absent", q, reference_answers=["Oslo"])]
    scores, _ = _judge(server, specs).score(records, specs)
    got = scores["answer_correct"]
    assert [s.status for s in got] == ["ok", "ok", "ok", "ok", "undefined", "missing_field"]
    assert [s.value for s in got[:4]] == [1.0, 0.0, 1.0, 0.0]
    assert json.loads(got[2].detail)["correct"] == [False, True]  # one verdict per reference, in order
    assert "not asked" in got[3].detail
    # asked: Oslo/Oslo, Bergen/Oslo, Oslo/Paris (the second record's Oslo/Oslo is the first's verdict, asked
    # once in a run); the empty answer not at all
    assert server.tasks()["correct"] == 3


def test_a_failed_judge_call_is_the_samples_status_with_its_reason(server):
    specs = judge_specs("answer_correct")
    server.script = lambda r: Reply(text="It depends.") if r.task == "correct" else None
    scores, _ = _judge(server, specs).score([Record("x", "Where?", answer="Oslo", reference_answers=["Oslo"])], specs)
    s = scores["answer_correct"][0]
    assert s.status == "parse_error" and s.value is None and "It depends." in s.detail
