"""Judge noise (docs/judge-trust.md, "Judge noise"): ``judge.samples=k`` asks every question k times,
each cached under its own key; self-agreement (Fleiss' κ against statsmodels) and flips are logged; the
two-stage bootstrap carries the judge's within-item variance into intervals."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ragexp.common.records import Record
from ragexp.judge import build_judge
from ragexp.stats.intervals import mean_interval
from ragexp.stats.twostage import fleiss_kappa, flip_share, two_stage_interval, two_stage_paired

from judge_server import Reply, judge_specs, sensible

RECORDS = [Record(id=str(i), query=f"What is the capital of France? ({i})",
                  contexts=[f"Paris is the capital of France. ({i})"],
                  answer="Paris is the capital of France.") for i in range(12)]


def _judge(server, tmp_path, specs, **over):
    cfg = dict(name="noise", model="hosted_vllm/judge", api_base=server.url, api_key_env=None,
               cache_path=str(tmp_path / "judge.sqlite"), timeout_s=10, max_retries=2, backoff_s=0.01,
               max_backoff_s=0.05, max_concurrency=8, max_tokens=64, temperature=0.7)
    return build_judge({**cfg, **over}, specs)


def test_samples_3_makes_exactly_3x_the_calls_once_and_none_on_a_rerun(server, tmp_path):
    s = judge_specs("retrieval_precision", "answer_consistency_binary")
    one, _ = _judge(server, tmp_path, s, cache=False).score(RECORDS, s)
    single = server.calls
    server.reset()
    three, usage = _judge(server, tmp_path, s, samples=3).score(RECORDS, s)
    assert server.calls == 3 * single and usage["judge/calls"] == 3 * single
    assert {r.body["temperature"] for r in server.log} == {0.7}
    assert sorted({r.body["seed"] for r in server.log}) == [0, 1, 2]  # each sample its own seed
    server.reset()
    again, usage = _judge(server, tmp_path, s, samples=3).score(RECORDS, s)
    assert server.calls == 0 and usage["judge/cache_hits"] == 3 * single
    assert [x.value for x in again["retrieval_precision"]] == [x.value for x in three["retrieval_precision"]]
    server.reset()
    _, usage = _judge(server, tmp_path, s, samples=5).score(RECORDS, s)  # a larger k asks only the new ones
    assert server.calls == 2 * single and usage["judge/cache_hits"] == 3 * single
    # the sensible judge is deterministic: every sample agrees, the value is the single run's
    assert [x.value for x in three["answer_consistency_binary"]] == [x.value for x in one["answer_consistency_binary"]]
    assert all(x.samples == (x.value,) * 3 for x in three["retrieval_precision"])


def test_a_judge_that_flips_is_logged_with_its_self_agreement(server, tmp_path):
    """Seed 1 (the second sample) says the opposite on records 0-3: 4 of 12 items flip."""
    def script(r):
        i = int(r.first_user.split("of France. (")[1].split(")")[0])
        if r.body.get("seed") == 1 and i < 4:
            v = sensible(r)
            return Reply(text=json.dumps({"fully_supported": not v["fully_supported"], "reason": "flipped"}))
        return None

    server.script = script
    s = judge_specs("answer_consistency_binary")
    scores, usage = _judge(server, tmp_path, s, samples=3).score(RECORDS, s)
    per = scores["answer_consistency_binary"]
    verdicts = [list(x.samples) for x in per]
    assert all(v[0] == v[2] == 1.0 for v in verdicts) and [v[1] for v in verdicts] == [0.0] * 4 + [1.0] * 8
    assert [x.value for x in per] == [1.0] * 12  # the majority of 1, 0, 1
    key = "judge/noise/answer_consistency_binary"
    assert usage[f"{key}/flip_share"] == 4 / 12 and usage[f"{key}/n"] == 12
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa as sm_fleiss

    table, _ = aggregate_raters(np.array(verdicts))
    assert usage[f"{key}/fleiss_kappa"] == pytest.approx(sm_fleiss(table, method="fleiss"), abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_fleiss_kappa_equals_statsmodels(seed):
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa as sm_fleiss

    rng = np.random.default_rng(seed)
    k = 2 + seed
    ratings = rng.integers(0, 3 + seed % 2, size=(40, k)).astype(float)
    ratings[: 10] = ratings[:10, :1]  # some items every verdict alike
    table, _ = aggregate_raters(ratings)
    assert fleiss_kappa(ratings.tolist()) == pytest.approx(sm_fleiss(table, method="fleiss"), abs=1e-9)
    assert flip_share(ratings.tolist()) == np.mean(ratings.max(axis=1) > ratings.min(axis=1))


def test_fleiss_kappa_is_undefined_without_chance_agreement_to_correct():
    assert fleiss_kappa([[1, 1], [1, 1], [1, 1]]) is None
    assert fleiss_kappa([[1, 0]]) is None


def test_two_stage_with_one_verdict_per_item_is_the_ordinary_bootstrap():
    from scipy.stats import bootstrap

    rng = np.random.default_rng(3)
    x = rng.beta(2, 3, 80)
    iv = two_stage_interval([[v] for v in x], resamples=20_000, seed=1)
    ref = bootstrap((x,), np.mean, n_resamples=20_000, method="percentile", random_state=2).confidence_interval
    assert iv.mean == pytest.approx(x.mean(), abs=1e-12) and iv.n == 80
    assert iv.ci_low == pytest.approx(ref.low, abs=0.006) and iv.ci_high == pytest.approx(ref.high, abs=0.006)


def test_two_stage_counts_the_judges_wobble_once():
    """Items, then verdicts: the interval is as wide as the items' own spread says (which already holds
    the judge's noise once), not wider; with a judge that never wobbles it is the item bootstrap's."""
    rng = np.random.default_rng(4)
    p = rng.beta(2, 2, 200)
    for noise in (0.0, 0.3):
        verdicts = p[:, None] + rng.normal(0, noise, (200, 3))
        two = two_stage_interval(verdicts.tolist(), resamples=5000, seed=0)
        one = mean_interval(verdicts.mean(axis=1).tolist(), resamples=5000, seed=0)
        assert two.mean == pytest.approx(one.mean, abs=1e-12)
        assert (two.ci_high - two.ci_low) / (one.ci_high - one.ci_low) == pytest.approx(1, abs=0.08), noise


def test_two_stage_paired_sees_a_real_difference_and_not_a_null_one():
    rng = np.random.default_rng(5)
    p = rng.beta(2, 2, 100)
    base = (p[:, None] + rng.normal(0, 0.2, (100, 3))).tolist()
    better = (p[:, None] + 0.1 + rng.normal(0, 0.2, (100, 3))).tolist()
    same = (p[:, None] + rng.normal(0, 0.2, (100, 3))).tolist()
    d = two_stage_paired(base, better, resamples=4000, seed=0)
    assert d["n"] == 100 and 0 < d["ci_low"] < d["diff"] < d["ci_high"] and d["p_value"] < 0.01
    null = two_stage_paired(base, same, resamples=4000, seed=0)
    assert null["ci_low"] < 0 < null["ci_high"] and null["p_value"] > 0.05


def _coverage(reps: int, binary: bool) -> dict[str, float]:
    """Share of simulated runs (60 items, 3 verdicts each) whose 95% interval holds the true mean."""
    rng = np.random.default_rng(11)
    n, k = 60, 3
    hits = {"two_stage": 0, "flattened": 0}
    for r in range(reps):
        if binary:  # each item's chance of a "supported" verdict ~ Beta(2, 2): P(majority of 3 is 1) averages 1/2
            verdicts = (rng.random((n, k)) < rng.beta(2, 2, n)[:, None]).astype(float)
        else:  # each item's true value ~ Beta(2, 2) (mean 1/2), each verdict that plus the judge's noise
            verdicts = rng.beta(2, 2, n)[:, None] + rng.normal(0, 0.25, (n, k))
        two = two_stage_interval(verdicts.tolist(), binary=binary, resamples=1000, seed=r)
        flat = mean_interval(verdicts.ravel().tolist(), resamples=1000, seed=r)  # k verdicts taken as k samples
        hits["two_stage"] += two.ci_low <= 0.5 <= two.ci_high
        hits["flattened"] += flat.ci_low <= 0.5 <= flat.ci_high
    return {k_: v / reps for k_, v in hits.items()}


@pytest.mark.slow
def test_two_stage_holds_its_coverage_where_the_one_stage_bootstrap_of_verdicts_does_not():
    cont = _coverage(1000, binary=False)
    assert 0.93 <= cont["two_stage"] <= 0.97, cont
    assert cont["flattened"] < 0.90, cont  # the k verdicts of an item are not k independent samples
    binary = _coverage(1000, binary=True)
    assert 0.93 <= binary["two_stage"] <= 0.97 and binary["flattened"] < binary["two_stage"], binary


def test_a_run_with_judge_samples_logs_the_noise_and_two_stage_intervals(compose, server, tmp_path):
    from ragexp.workflow.runner import execute

    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps({"id": f"r{i}", "query": f"What about topic {i}?",
                                        "answer": f"Topic {i} is described here.",
                                        "contexts": [f"Topic {i} is described here at length."]}) + "\n"
                            for i in range(30)))

    def script(r):  # the second sample says the opposite on every third record
        i = int(r.first_user.split("Topic ")[1].split()[0])
        if r.body.get("seed") == 1 and i % 3 == 0:
            return Reply(text=json.dumps({"fully_supported": False, "reason": "flipped"}))
        return None

    server.script = script
    cfg = compose("dataset=records", f"dataset.path={path}", "metric=answer_consistency_binary",
                  "judge=openai_compatible", f"judge.api_base={server.url}", "judge.cache=false", "judge.samples=3",
                  "judge.temperature=0.7", "stats.resamples=1000")
    outcome = execute(cfg, save=False, show=False)
    assert server.calls == 3 * 30
    summary = outcome.summary
    assert summary["intervals"]["answer_consistency_binary"]["method"] == "two_stage"
    assert summary["judge"]["judge/noise/answer_consistency_binary/flip_share"] == 10 / 30
    assert summary["metrics"]["answer_consistency_binary"] == 1.0  # the majority of 1, 0, 1


@pytest.mark.parametrize("metric", ["answer_consistency_binary", "answer_consistency"])
def test_the_judge_noise_command_with_clusters_runs(compose, server, metric):
    """docs/judge-trust.md's judge-noise command with stats.cluster_by: every judge metric goes to the
    two-stage interval, and the (empty) joint intervals still take the run's cluster labels."""
    from ragexp.workflow.runner import execute

    cfg = compose("dataset=expertqa", "dataset.limit=30", f"metric={metric}", "judge=openai_compatible",
                  f"judge.api_base={server.url}", "judge.cache=false", "judge.samples=3", "judge.temperature=0.7",
                  "stats.cluster_by=question_id", "stats.resamples=500")
    outcome = execute(cfg, save=False, show=False)
    key = next(k for k in outcome.summary["intervals"] if k.startswith(metric))
    iv = outcome.summary["intervals"][key]
    questions = {r.extra["question_id"] for r in outcome.records}
    assert iv["method"] == "two_stage" and iv["ci_low"] <= iv["mean"] <= iv["ci_high"]
    assert 2 <= iv["n_clusters"] <= len(questions) <= 30
