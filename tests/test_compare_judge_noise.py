"""A paired comparison of two runs judged with ``judge.samples=3`` (docs/judge-trust.md, "Judge noise"):
the k verdicts reach ``per_sample.parquet`` as ``K/samples`` and the comparison's interval and p-value
come from the two-stage paired bootstrap, not from the item values alone."""

from __future__ import annotations

import json

import pytest

from ragexp.core.pairing import RunTable, compare_tables
from ragexp.results.columns import table_columns
from ragexp.results.tables import read_parquet_columns, write_parquet
from ragexp.stats.paired import paired_compare

from judge_server import Reply

def _run(compose, server, tmp_path, name, metric, flips):
    """One judged run of 30 records; ``flips(seed, i)`` says which verdicts the judge turns to False."""
    from ragexp.workflow.runner import execute

    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "query": f"What about topic {i}?",
                                        "answer": f"Topic {i} is described here.",
                                        "contexts": [f"Topic {i} is described here at length."]}) + "\n"
                            for i in range(30)))

    def script(r):
        i = int(r.first_user.split("Topic ")[1].split()[0])
        if flips(r.body.get("seed"), i):
            field = "relevant" if r.task == "relevance" else "fully_supported"
            return Reply(text=json.dumps({field: False, "reason": "flipped"}))
        return None

    server.script = script
    cfg = compose("dataset=records", f"dataset.path={path}", f"metric={metric}", "judge=openai_compatible",
                  f"judge.api_base={server.url}", "judge.cache=false", "judge.samples=3", "judge.temperature=0.7",
                  "stats.resamples=2000")
    outcome = execute(cfg, save=False, show=False)
    # the table as python -m ragexp.compare reads it back from a logged run (ragexp.tracking.runs)
    write_parquet(tmp_path / f"{name}.parquet", outcome.per_sample)
    columns = table_columns(read_parquet_columns(tmp_path / f"{name}.parquet"))
    return RunTable(name=name, columns=list(columns), rows=[list(r) for r in zip(*columns.values())],
                    questions_digest=outcome.summary.get("questions_digest"))


def test_comparing_runs_judged_3_times_uses_the_two_stage_paired_interval(compose, server, tmp_path):
    # one context per record, judged relevant 3 times; the value is the mean of the 3 verdicts.
    # baseline: the second verdict flips on every third record (2/3 there, 1 elsewhere);
    # candidate: the second and third flip there (1/3), the second also on i % 3 == 1 (2/3)
    key = "retrieval_precision"
    base = _run(compose, server, tmp_path, "base", key, lambda seed, i: seed == 1 and i % 3 == 0)
    cand = _run(compose, server, tmp_path, "cand", key, lambda seed, i: (seed in (1, 2) and i % 3 == 0)
                or (seed == 1 and i % 3 == 1))
    col = base.columns.index(f"{key}/samples")  # the k verdicts, read back from per_sample.parquet
    assert [r[col] for r in base.rows][:3] == [[1.0, 0.0, 1.0], [1.0, 1.0, 1.0], [1.0, 1.0, 1.0]]

    row = compare_tables(base, cand, resamples=2000, seed=0)["metrics"][key]
    assert row["method"] == "two_stage" and row["n"] == 30
    assert row["diff"] == pytest.approx((10 * 1 / 3 + 10 * 2 / 3 + 10) / 30 - (10 * 2 / 3 + 20) / 30)
    # the one-stage comparison of the same item values (what the row reported before)
    values = [[r[c.columns.index(key)] for r in c.rows] for c in (base, cand)]
    one = paired_compare(*values, resamples=2000, seed=0)
    assert row["one_stage"]["ci_low"] == one.ci_low and row["one_stage"]["ci_high"] == one.ci_high
    assert row["ci_high"] - row["ci_low"] > one.ci_high - one.ci_low  # the judge's wobble is in it
    assert row["ci_low"] <= row["diff"] <= row["ci_high"]


def test_a_majority_metric_keeps_the_exact_one_stage_comparison(compose, server, tmp_path):
    key = "answer_consistency_binary"
    base = _run(compose, server, tmp_path, "base", key, lambda seed, i: seed == 1 and i % 3 == 0)
    cand = _run(compose, server, tmp_path, "cand", key, lambda seed, i: seed in (1, 2) and i % 3 == 0)
    assert f"{key}/samples" in base.columns
    row = compare_tables(base, cand, resamples=500)["metrics"][key]
    assert "method" not in row and row["test"] == "mcnemar" and row["diff"] == -10 / 30
