"""Sentences about trusting a judge say no more than the numbers under them (issue 42, item 7): a labels hint
does not claim a precision the interval does not have, a count beyond the data is said to be so, and a
comparison of a one-verdict judge does not print its κ as if it measured agreement. Through the real judge
path (tests/judge_server.py) where a judge is involved."""

from __future__ import annotations

import json

from judge_server import Reply, blocks

from ragexp.report.agreement import comparison_lines, judges_lines, labels_hint


def _table(n: int, labelled: dict[int, int], cluster_of):
    """n records, people's 0/1 label on the indices of ``labelled``; the judge says yes to even-numbered answers."""
    rows, verdicts = [], {}
    for i in range(n):
        answer = f"Statement number {i} about topic {i}."
        row = {"id": f"s{i}", "query": f"What about topic {i}?", "answer": answer,
               "contexts": [f"A passage on topic {i}."], "conv": cluster_of(i)}
        if i in labelled:
            row["human"] = {"answer_consistency_binary": labelled[i]}
        rows.append(row)
        verdicts[answer] = i % 2 == 0
    return rows, verdicts


def _evaluate(server, rows, verdicts, *more):
    import ragexp

    def script(request):
        answer = blocks(request.first_user)["answer"][0].strip()
        return Reply(text=json.dumps({"fully_supported": verdicts[answer], "reason": "scripted"}))

    server.script = script
    return ragexp.evaluate(rows, metric="answer_consistency_binary", judge="openai_compatible", log=False,
                           overrides=[f"judge.api_base={server.url}", "judge.cache=false", "stats.resamples=200",
                                      *more])


def test_three_labels_in_one_cluster_give_no_count_rather_than_a_precision_they_lack(server):
    # 30 records in 6 clusters of 5; people labelled 3 records, all of cluster 0: the corrected mean has no interval
    rows, verdicts = _table(30, {0: 1, 1: 0, 2: 1}, lambda i: f"c{i // 5}")
    result = _evaluate(server, rows, verdicts, "stats.cluster_by=conv")
    entry = result.summary["agreement"]["answer_consistency_binary"]
    assert entry["corrected"]["ci_low"] is None and entry["corrected"]["mean"] is not None
    need = entry["labels_needed"]
    assert need["corrected_mean"] == "no interval" and need["records"] == 30
    line = labels_hint("answer_consistency_binary", entry, need)
    assert "already known" not in line, line
    assert "The corrected mean of the judge's answer_consistency_binary has no interval with these 3 labels" in line
    assert "no count of labels can be given yet" in line


def test_a_count_larger_than_the_data_is_said_to_be_so():
    entry = {"n": 120, "metric": "m"}
    need = {"target_halfwidth": 0.05, "corrected_mean": 430, "kappa": 10_857, "records": 2_100}
    line = labels_hint("m", entry, need)
    assert "about 430 labelled samples are needed, and about 10,857 for κ; 120 are labelled now." in line
    assert "That is more than the 2,100 samples this run scored" in line
    within = labels_hint("m", entry, {**need, "kappa": 700})
    assert "more than the" not in within  # 430 and 700 both fit in 2,100 samples


def test_a_one_verdict_judge_in_a_comparison_is_said_not_measured():
    from ragexp.core.labels import compare_agreement

    # people's labels 0/1 alternating; the baseline judge says 1 to everything, the candidate follows people
    n = 40
    human = [float(i % 2) for i in range(n)]
    cols_b = {"human/answer_consistency_binary": human, "answer_consistency_binary": [1.0] * n}
    cols_c = {"human/answer_consistency_binary": human, "answer_consistency_binary": list(human)}
    section = compare_agreement(cols_b, cols_c, ["answer_consistency_binary"], resamples=200)
    entry = section["answer_consistency_binary"]
    assert entry["one_verdict"] == {"baseline": {"value": 1, "share": 1.0, "n": 40}}
    fact = ("the baseline judge gave 1 to 100% of the 40 samples it scored: its κ is 0 by construction, not a "
            "measure of agreement")
    judged = [x for x in judges_lines(section, 0.95) if x.startswith("answer_consistency_binary:")]
    assert len(judged) == 1 and judged[0].startswith("answer_consistency_binary: the candidate judge agrees better "
                                                     "with people (κ ") and judged[0].endswith("; " + fact), judged
    assert f"answer_consistency_binary: {fact}" in comparison_lines(section)
    both = {**entry, "one_verdict": {"baseline": entry["one_verdict"]["baseline"],
                                     "candidate": {"value": 0, "share": 1.0, "n": 40}}}
    for lines in (comparison_lines({"answer_consistency_binary": both}), judges_lines({"answer_consistency_binary": both}, 0.95)):
        said = [x for x in lines if x.startswith("answer_consistency_binary:")]
        assert said == ["answer_consistency_binary: the baseline judge gave 1 to 100% of the 40 samples it scored and "
                        "the candidate judge gave 0 to 100% of the 40 samples it scored: their κ is 0 by construction, "
                        "not a measure of agreement, so the two judges' agreement is not compared"], lines
