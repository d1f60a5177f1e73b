"""judge.examples=k: worked examples from the dev part only, by the documented seeded rule, in the system
message of every question; the candidates table of a dev/test sweep shows dev and test agreement side by
side, chooses on dev, and refuses test agreement for a candidate whose examples are test records
(docs/judge-trust.md, "Improving the judge with your labels")."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from ragexp.judge.examples import pick


def _expertqa(compose, server, split, *more):
    return compose("dataset=expertqa", f"dataset.split={split}", "metric=answer_consistency_binary",
                   "judge=openai_compatible", f"judge.api_base={server.url}", "judge.cache=false",
                   "stats.resamples=500", "stats.cluster_by=question_id", *more)


def test_examples_are_drawn_from_dev_only_by_the_seeded_rule(compose, server):
    from ragexp.workflow.runner import execute, load_dataset

    cfg = _expertqa(compose, server, "test", "judge.examples=4", "dataset.limit=30")
    outcome = execute(cfg, save=False, show=False)
    ids = outcome.summary["judge_examples"]["ids"]
    dev = load_dataset(_expertqa(compose, server, "dev").dataset).records
    test = load_dataset(_expertqa(compose, server, "test").dataset).records
    assert set(ids) <= {r.id for r in dev} and not set(ids) & {r.id for r in test}
    # the rule by hand: each class ordered by id, shuffled with default_rng(judge.seed = 0); 1, 0, 1, 0
    key = "answer_consistency_binary"
    by = {v: sorted((r for r in dev if (r.human or {}).get(key) == v and r.answer.strip() and r.contexts),
                    key=lambda r: r.id) for v in (1.0, 0.0)}
    rng = np.random.default_rng(0)
    order = {v: [by[v][i].id for i in rng.permutation(len(by[v]))] for v in (1.0, 0.0)}
    assert ids == [order[1.0][0], order[0.0][0], order[1.0][1], order[0.0][1]]
    assert [r.id for r in pick(dev, key, 4, 0)] == ids
    # every question carried the four examples in its system message, the record itself in the first user one
    sent = [r for r in server.log if "Worked examples" in r.messages[0]["content"]]
    assert len(sent) == server.calls > 0 and all(r.messages[0]["content"].count("--- Example ") == 4 for r in sent)


def test_a_metric_without_a_yes_no_question_refuses_examples(compose, server):
    from ragexp.errors import ConfigError
    from ragexp.workflow.runner import execute

    cfg = compose("dataset=expertqa", "dataset.limit=5", "metric=answer_consistency", "judge=openai_compatible",
                  f"judge.api_base={server.url}", "judge.examples=2")
    with pytest.raises(ConfigError, match="cannot take worked examples"):
        execute(cfg, save=False, show=False)


@pytest.mark.slow
def test_a_dev_test_sweep_gives_a_candidates_table_and_refuses_overlapping_examples(compose, server, tmp_path):
    from ragexp.cli.judge_candidates import candidates, lines
    from ragexp.workflow.runner import execute

    sweep = tmp_path / "sweep"
    for n, (split, k) in enumerate([("dev", 0), ("test", 0), ("dev", 4), ("test", 4)]):
        out = execute(_expertqa(compose, server, split, f"judge.examples={k}", "dataset.limit=60",
                                "tracking.enabled=false"), show=False)
        shutil.copytree(out.folder, sweep / str(n))
    table = candidates(sweep, resamples=500)
    rows = {r["candidate"]: r for r in table["candidates"]}
    assert set(rows) == {"judge.examples=0", "judge.examples=4"}
    for r in rows.values():
        assert r["dev_agreement"]["value"] is not None and r["test_agreement"]["value"] is not None
        assert r["test_agreement"]["n"] and r["dev_agreement"]["n"]
    assert sum(1 for r in rows.values() if r.get("chosen")) == 1
    text = "\n".join(lines(table))
    assert "chosen on dev, reported on test" in text and "← chosen (best on dev)" in text
    # a candidate whose examples are test records: its test agreement is refused
    summary_path = sweep / "3" / "summary.json"
    summary = json.loads(summary_path.read_text())
    import pandas as pd

    test_ids = pd.read_parquet(sweep / "3" / "per_sample.parquet")["id"].tolist()
    summary["judge_examples"]["ids"] = test_ids[:2]
    summary_path.write_text(json.dumps(summary))
    refused = {r["candidate"]: r for r in candidates(sweep, resamples=500)["candidates"]}["judge.examples=4"]
    assert "refused" in refused["test_agreement"] and "value" not in refused["test_agreement"]
