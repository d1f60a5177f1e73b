"""One resample draw for every interval of a run, at any size (docs/uncertainty.md).

``joint_intervals`` gives the ratio intervals (the keyword confusion metrics) and the mean intervals
of a run from one pass over one seeded draw, generated in chunks. Each interval must be exactly what
its own function gives alone — below 16M cells and above, where each used to draw its own. Above
16M cells an unclustered mean of small skewness takes the normal interval instead (scipy's numbers
decide which, and either agrees with scipy's bootstrap).
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


def _scipy_says_normal(x, resamples: int, method: str, confidence: float = 0.95) -> bool:
    """docs/uncertainty.md's rule from scipy's numbers: the skewness term of the bootstrap's endpoints
    at most half their Monte-Carlo error."""
    from scipy.stats import norm, skew

    z, q = norm.ppf(0.5 + confidence / 2), (1 - confidence) / 2
    k = z * z - 1 if method == "percentile" else 2 * z * z + 1
    return abs(skew(x)) * k / (6 * np.sqrt(len(x))) <= np.sqrt(q * (1 - q) / resamples) / norm.pdf(z) / 2


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_a_large_run_takes_the_normal_interval_where_the_bootstrap_adds_nothing(method):
    """n = 20,000 with 2,000 resamples (40M counts): a mean of little skewness gets mean ± z·s/√n
    (scipy's norm.interval with scipy's sem), one of heavy skewness keeps the bootstrap, and either
    agrees with scipy.stats.bootstrap within the bootstrap's Monte-Carlo error."""
    from scipy.stats import bootstrap, norm, sem

    rng = np.random.default_rng(5)
    columns = {"token_f1": rng.beta(2, 3, 20_000), "lognormal_1": rng.lognormal(0, 1, 20_000),
               "lognormal_2": rng.lognormal(0, 2, 20_000)}
    expected = {"percentile": ["normal", "normal", "percentile"], "bca": ["normal", "bca", "bca"]}[method]
    ours = mean_intervals({k: list(v) for k, v in columns.items()}, resamples=2_000, method=method)
    for (key, x), want in zip(columns.items(), expected):
        iv = ours[key]
        assert iv.method == want == ("normal" if _scipy_says_normal(x, 2_000, method) else method), key
        assert iv.n == 20_000 and iv.mean == pytest.approx(x.mean(), rel=1e-12)
        assert iv.stderr == pytest.approx(sem(x), rel=1e-9)
        if want == "normal":
            low, high = norm.interval(0.95, loc=x.mean(), scale=sem(x))
            assert (iv.ci_low, iv.ci_high) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
        theirs = bootstrap((x,), np.mean, n_resamples=2_000, method="BCa" if method == "bca" else "percentile",
                           random_state=0, confidence_level=0.95, batch=250).confidence_interval
        width = theirs.high - theirs.low
        assert iv.ci_low == pytest.approx(theirs.low, abs=0.1 * width), key
        assert iv.ci_high == pytest.approx(theirs.high, abs=0.1 * width), key


def test_a_run_of_16m_counts_or_fewer_or_clustered_keeps_the_bootstrap():
    """The normal interval is for large unclustered runs only: at 1,600 samples × 10,000 resamples
    (16M counts) and for clustered samples at any size, a mean keeps its bootstrap interval."""
    x = list(np.random.default_rng(1).beta(2, 3, 20_000))
    assert mean_intervals({"x": x[:1_600]})["x"].method == "percentile"
    assert mean_intervals({"x": x[:1_601]})["x"].method == "normal"
    clustered = mean_intervals({"x": x}, clusters=[i // 2 for i in range(20_000)], resamples=1_000)["x"]
    assert clustered.method == "cluster-percentile"
