"""claim_faithfulness (ragexp/metrics/judged/claims.py), the worked example of docs/metrics.md "Adding a
metric": RAGChecker's arithmetic on RAGChecker's own verdicts, the metric through the real local judge
server (tests/judge_server.py), and its agreement with ExpertQA's people measured by the run."""

from __future__ import annotations

import json

import pytest

from ragexp.common.records import Record
from ragexp.judge.errors import ParseError
from ragexp.judge import build_judge
from ragexp.judge.parse import parse_verdict
from ragexp.metrics.base import REGISTRY
from ragexp.metrics.judged.claims import ENTAILMENT, claim_faithfulness_value

from judge_server import Reply, judge_specs

E, N, C = "entailment", "neutral", "contradiction"


def test_ragchecker_faithfulness_from_its_own_verdicts(data_dir):
    """RAGChecker's checking_outputs.json holds each response claim's relation to each retrieved chunk
    (retrieved2response) and the faithfulness it computed from them: ours from the same relations is it."""
    results = json.loads((data_dir / "ragchecker" / "checking_outputs.json").read_text())["results"]
    relations = [[[x.lower() for x in row] for row in r["retrieved2response"]] for r in results]
    # the first query: claims 1, 7, 9 and 10 of 11 are entailed by a chunk; the second: all 5 claims
    assert claim_faithfulness_value(relations[0]) == 4 / 11
    assert claim_faithfulness_value(relations[1]) == 5 / 5
    for r, rel in zip(results, relations):
        assert claim_faithfulness_value(rel) == pytest.approx(r["metrics"]["faithfulness"], abs=1e-15)


def test_a_claim_only_contradicted_or_neutral_is_not_faithful():
    assert claim_faithfulness_value([[C, C], [N, E], [N, N]]) == 1 / 3
    assert claim_faithfulness_value([[], []]) == 0 / 2  # nothing retrieved: nothing entailed
    assert claim_faithfulness_value([]) is None  # no claim: undefined
    info = REGISTRY["claim_faithfulness"]
    assert info.fields == ("answer", "contexts") and info.agrees_with == "answer_consistency"
    assert info.judge.scale == 1.0 and [k.name for k in info.judge.asks] == ["main_points", "entailment"]


def test_the_relation_reader():
    assert parse_verdict(ENTAILMENT, '{"relation": "Entailment", "reason": "says so"}').value == E
    assert parse_verdict("entailment", '```json\n{"relation": "contradicts"}\n```').value == C
    with pytest.raises(ParseError, match="'relation' must be one of"):
        parse_verdict(ENTAILMENT, '{"relation": "maybe"}')


def _judge(server, tmp_path, specs):
    return build_judge(dict(name="test", model="openai/gpt-4o-mini", api_base=server.url, api_key_env=None,
                            cache=False, timeout_s=5.0, max_retries=1, backoff_s=0.01, max_backoff_s=0.05),
                       specs)


def test_through_the_local_judge_server(server, tmp_path):
    specs = judge_specs("claim_faithfulness", "answer_consistency")
    records = [
        # two claims: the first in the first passage, the second in none → 1/2
        Record("two", "q", answer="Paris is the capital of France. The moon is made of green cheese.",
               contexts=["Paris is the capital of France.", "Bananas are yellow fruit.", ""]),
        Record("none-retrieved", "q", answer="Paris is the capital of France.", contexts=[]),
        Record("empty-answer", "q", answer="", contexts=["Paris is the capital of France."]),
        Record("absent", "q", answer="Paris is the capital of France."),
    ]
    scores, _ = _judge(server, tmp_path, specs).score(records, specs)
    got = scores["claim_faithfulness"]
    assert [s.status for s in got] == ["ok", "ok", "undefined", "missing_field"]
    assert [s.value for s in got[:2]] == [1 / 2, 0 / 1]
    detail = json.loads(got[0].detail)
    assert detail["relations"] == [[E, N], [N, N]]  # the empty passage is not asked
    tasks = server.tasks()
    # claims asked once per answer and shared with answer_consistency; 2 claims x 2 passages checked
    assert tasks["points"] == 2 and tasks["relation"] == 2 * 2


def test_an_unreadable_relation_is_a_parse_error_with_both_replies(server, tmp_path):
    specs = judge_specs("claim_faithfulness")
    server.script = lambda r: Reply(text="It depends.") if r.task == "relation" else None
    scores, _ = _judge(server, tmp_path, specs).score(
        [Record("x", "q", answer="Paris is the capital.", contexts=["Paris is the capital."])], specs)
    s = scores["claim_faithfulness"][0]
    assert s.status == "parse_error" and s.value is None and "It depends." in s.detail


def test_agreement_with_expertqa_people_is_measured(compose, server):
    """ExpertQA's experts say how much of each claim its evidence supports (answer_consistency's labels):
    the run pairs claim_faithfulness with them and reports agreement over the labelled claims."""
    from ragexp.workflow.runner import execute

    cfg = compose("dataset=expertqa", "dataset.limit=30", "metric=claim_faithfulness", "judge=openai_compatible",
                  f"judge.api_base={server.url}", "judge.cache=false", "stats.resamples=1000")
    outcome = execute(cfg, save=False, show=False)
    from scipy.stats import spearmanr

    entry = outcome.summary["agreement"]["claim_faithfulness"]
    assert entry["kind"] == "continuous" and entry["headline"] == "spearman"
    pairs = [(r.human["answer_consistency"], v) for r, v, status in zip(
        outcome.records, outcome.per_sample["claim_faithfulness"], outcome.per_sample["claim_faithfulness/status"])
        if status == "ok" and "answer_consistency" in (r.human or {})]
    assert entry["n"] == len(pairs) >= 20  # paired with the experts' support share of each claim
    expected = spearmanr([h for h, _ in pairs], [j for _, j in pairs]).statistic
    assert entry["statistics"]["spearman"]["mean"] == pytest.approx(expected, abs=1e-12)
