"""One resample draw for every interval of a run, at any size (docs/uncertainty.md).

``joint_intervals`` gives the ratio intervals (the keyword confusion metrics) and the mean intervals
of a run from one pass over one seeded draw, generated in chunks. Each interval must be exactly what
its own function gives alone — below 16M cells and above, where each used to draw its own — and at
a large n the bootstrap interval must agree with scipy's.
"""

from __future__ import annotations

import numpy as np
import pytest

from ragexp.stats.intervals import joint_intervals, mean_intervals, ratio_intervals


def _run(n: int, seed: int = 3):
    rng = np.random.default_rng(seed)
    means = {"token_f1": list(rng.beta(2, 3, n)),
             "rougeL": [None if i % 7 == 0 else float(x) for i, x in enumerate(rng.random(n))],
             "hit_rate": list((rng.random(n) < 0.6).astype(float)),  # 0/1: Wilson, no draw
             "latency/retrieve": list(rng.exponential(0.01, n))}
    verdict = rng.random(n) < 0.4
    label = rng.random(n) < 0.5
    ratios = {"precision": (list((verdict & label).astype(float)), list(verdict.astype(float))),
              "accuracy": (list((verdict == label).astype(float)), [1.0] * n)}
    return means, ratios


@pytest.mark.parametrize("n, resamples", [(300, 2_000), (1_700, 10_000)])  # 0.6M and 17M cells
@pytest.mark.parametrize("clustered", [False, True])
def test_joint_intervals_equal_each_function_alone(n, resamples, clustered):
    means, ratios = _run(n)
    clusters = [i // 4 for i in range(n)] if clustered else None
    alone = {**ratio_intervals(ratios, clusters=clusters, resamples=resamples),
             **mean_intervals(means, clusters=clusters, resamples=resamples)}
    joint = joint_intervals(means, ratios, clusters=clusters, resamples=resamples)
    assert list(joint) == ["precision", "accuracy", "token_f1", "rougeL", "hit_rate", "latency/retrieve"]
    assert joint == alone  # every field of every interval, bit for bit
    assert joint["hit_rate"].method == ("cluster-percentile" if clustered else "wilson")
    assert joint["token_f1"].ci_low < joint["token_f1"].mean < joint["token_f1"].ci_high
    if n * resamples > 16_000_000:
        assert joint["precision"].ci_low < joint["precision"].mean < joint["precision"].ci_high


def test_a_large_run_s_bootstrap_interval_agrees_with_scipy():
    """n = 20,000 with 2,000 resamples (40M cells, drawn in chunks): the percentile interval of a mean
    agrees with scipy.stats.bootstrap's on the same values within the bootstrap's Monte-Carlo error."""
    from scipy.stats import bootstrap

    means, ratios = _run(20_000)
    x = np.array(means["token_f1"])
    ours = joint_intervals({"token_f1": means["token_f1"]}, ratios, resamples=2_000)["token_f1"]
    theirs = bootstrap((x,), np.mean, n_resamples=2_000, method="percentile", random_state=0,
                       confidence_level=0.95).confidence_interval
    width = theirs.high - theirs.low
    assert ours.ci_low == pytest.approx(theirs.low, abs=0.1 * width)
    assert ours.ci_high == pytest.approx(theirs.high, abs=0.1 * width)
    assert ours.stderr == pytest.approx(x.std(ddof=1) / np.sqrt(len(x)), rel=1e-9)
