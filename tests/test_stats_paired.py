"""ragexp.stats.paired against scipy on the same numbers, and Holm against a hand computation."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ragexp.stats.paired import holm, paired_compare, paired_compare_columns


def _mean_diff(x, y, axis):
    return np.mean(y - x, axis=axis)


def _scipy_permutation(b, c, resamples, seed=0):
    return stats.permutation_test((np.asarray(b), np.asarray(c)), _mean_diff, permutation_type="samples",
                                  vectorized=True, n_resamples=resamples, alternative="two-sided",
                                  rng=seed).pvalue


BASELINE_8 = [0.20, 0.40, 0.50, 0.30, 0.60, 0.10, 0.90, 0.45]
CANDIDATE_8 = [0.50, 0.35, 0.50, 0.70, 0.90, 0.15, 0.80, 0.65]


def test_exact_permutation_p_equals_scipys_enumeration():
    # 2**8 = 256 sign patterns <= 10,000 resamples: both enumerate, so the p-values are equal
    ours = paired_compare(BASELINE_8, CANDIDATE_8)
    assert ours.test == "permutation"
    assert ours.p_value == pytest.approx(_scipy_permutation(BASELINE_8, CANDIDATE_8, 10_000), abs=1e-12)
    assert ours.diff == pytest.approx((0.3 - 0.05 + 0 + 0.4 + 0.3 + 0.05 - 0.1 + 0.2) / 8)
    assert (ours.wins, ours.ties, ours.losses) == (5, 1, 2)


def test_exact_permutation_small_hand_count():
    # d = (1, 2, 3): the patterns reaching mean >= 2 are none flipped only -> 1 of 8 each tail
    r = paired_compare([0, 0, 0], [1, 2, 3])
    assert r.p_value == pytest.approx(2 * 1 / 8)


@pytest.mark.parametrize("shift", [0.0, 0.03, 0.08])
def test_random_permutation_p_close_to_scipy(shift):
    rng = np.random.default_rng(7)
    b = rng.random(300)
    c = np.clip(b + rng.normal(shift, 0.3, 300), 0, 1)
    ours = paired_compare(b, c, resamples=20_000, seed=1).p_value
    theirs = _scipy_permutation(b, c, 20_000, seed=2)
    # two independent Monte Carlo estimates of 2·min(tail): each has sd <= 2·sqrt(p/2·(1 − p/2)/B)
    sd = 2 * math.sqrt(max(theirs / 2 * (1 - theirs / 2), 1e-4) / 20_000)
    assert abs(ours - theirs) <= 4 * math.sqrt(2) * sd + 1 / 20_000


def test_bootstrap_ci_close_to_scipy_paired_percentile():
    rng = np.random.default_rng(3)
    b = rng.random(400)
    c = np.clip(b + rng.normal(0.04, 0.25, 400), 0, 1)
    ours = paired_compare(b, c, resamples=20_000, confidence=0.9, seed=5)
    theirs = stats.bootstrap((b, c), _mean_diff, paired=True, vectorized=True, n_resamples=20_000,
                             confidence_level=0.9, method="percentile", rng=6).confidence_interval
    se = np.std(c - b, ddof=1) / math.sqrt(400)
    # an end of a 20,000-resample percentile interval varies by ~0.015 standard errors between
    # seeds (sqrt(.05·.95/20000) / φ(1.645)); two independent ones agree within 0.1 se (~4.7 sd)
    assert ours.ci_low == pytest.approx(theirs.low, abs=0.1 * se)
    assert ours.ci_high == pytest.approx(theirs.high, abs=0.1 * se)
    assert ours.ci_low < ours.diff < ours.ci_high


def test_mcnemar_equals_scipy_binomtest():
    b = [1, 1, 0, 0, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    c = [1, 1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1, 1, 0, 0, 1]
    r = paired_compare(b, c)
    won = sum(1 for x, y in zip(b, c) if (x, y) == (0, 1))
    lost = sum(1 for x, y in zip(b, c) if (x, y) == (1, 0))
    assert (won, lost) == (r.wins, r.losses) == (8, 1)
    assert r.test == "mcnemar"
    assert r.p_value == pytest.approx(stats.binomtest(won, won + lost, 0.5).pvalue, rel=1e-9)
    # MDE from the discordant pairs' variance: (z_.975 + z_.8) · sqrt((b + c) / n) / sqrt(n)
    z = stats.norm.ppf(0.975) + stats.norm.ppf(0.8)
    assert r.mde == pytest.approx(z * math.sqrt((8 + 1) / 20) / math.sqrt(20))


def test_run_against_itself():
    values = [0.1, 0.5, 0.5, 0.9, 0.3] * 20  # 100 samples: random sign patterns
    r = paired_compare(values, values)
    assert (r.diff, r.ci_low, r.ci_high, r.p_value) == (0, 0, 0, 1)
    assert (r.wins, r.ties, r.losses) == (0, 100, 0)
    assert math.isnan(r.mde)  # no spread of differences: nothing to say about power
    hits = [1, 0, 1, 1, 0]
    r = paired_compare(hits, hits)
    assert (r.test, r.diff, r.p_value) == ("mcnemar", 0, 1)


def test_mde_continuous():
    b = np.linspace(0, 1, 50)
    c = b + np.sin(np.arange(50))
    r = paired_compare(b, c, confidence=0.9)
    z = stats.norm.ppf(0.95) + stats.norm.ppf(0.8)
    assert r.mde == pytest.approx(z * np.std(c - b, ddof=1) / math.sqrt(50))


def test_columns_equal_one_at_a_time():
    rng = np.random.default_rng(11)
    b = rng.random((120, 3))
    c = np.column_stack([b[:, 0] + rng.normal(0.1, 0.2, 120), b[:, 1], rng.integers(0, 2, 120)])
    b[:, 2] = rng.integers(0, 2, 120)
    together = paired_compare_columns(b, c, resamples=3000, seed=4)
    for j in range(3):
        alone = paired_compare(b[:, j], c[:, j], resamples=3000, seed=4)
        assert together[j].test == alone.test
        assert together[j].p_value == pytest.approx(alone.p_value)
        assert together[j].ci_low == pytest.approx(alone.ci_low, abs=1e-6)
    assert [r.test for r in together] == ["permutation", "permutation", "mcnemar"]


def test_bad_input_says_what():
    with pytest.raises(ValueError, match="one length"):
        paired_compare([1, 2], [1])
    with pytest.raises(ValueError, match="no paired samples"):
        paired_compare([], [])
    with pytest.raises(ValueError, match="finite"):
        paired_compare([1, float("nan")], [1, 2])


def test_holm_hand_computation():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005·4, 0.01·3, 0.03·2, 0.04·1 -> 0.02, 0.03, 0.06, max(0.04, 0.06)
    assert holm(p) == pytest.approx([0.01 * 3, max(0.04 * 1, 0.03 * 2), 0.03 * 2, 0.005 * 4])
    assert holm([0.5, 0.6]) == pytest.approx([min(1, 0.5 * 2), min(1, max(0.6, 0.5 * 2))])
    out = holm([0.02, float("nan"), 0.04])  # NaN stays NaN and is not counted
    assert math.isnan(out[1]) and out[0] == pytest.approx(0.02 * 2) and out[2] == pytest.approx(max(0.04 * 1, 0.02 * 2))
    assert holm([]) == []


# clustered paired comparison (stats.cluster_by): the cluster is the unit of the interval, the test and the MDE

def _clustered_data(g=12, seed=21, shift=0.05):
    """g clusters of 1–7 pairs with a cluster-level shift each (what clustering is about), as arrays and labels."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 8, g)
    labels = np.repeat([f"conv{k}" for k in range(g)], sizes)
    b = rng.random(len(labels))
    c = np.clip(b + shift + np.repeat(rng.normal(0, 0.2, g), sizes) + rng.normal(0, 0.1, len(labels)), 0, 1)
    return b, c, labels


def _cluster_totals(b, c, labels):
    keys = sorted(set(labels))
    d = np.asarray(c) - np.asarray(b)
    return (np.array([d[np.asarray(labels) == k].sum() for k in keys]),
            np.array([float((np.asarray(labels) == k).sum()) for k in keys]))


def _scipy_sign_flip(x, resamples, seed=0):
    # one sample with permutation_type="samples": scipy flips the signs of its observations
    return stats.permutation_test((x,), np.mean, permutation_type="samples", vectorized=True, n_resamples=resamples,
                                  alternative="two-sided", rng=seed).pvalue


def test_clustered_p_equals_scipys_sign_flip_of_cluster_totals():
    b, c, labels = _clustered_data(g=12)
    totals, _ = _cluster_totals(b, c, labels)
    ours = paired_compare(b, c, clusters=list(labels))
    # 2**12 = 4,096 sign patterns <= 10,000 resamples: both enumerate every flip of the 12 totals
    assert ours.p_value == pytest.approx(_scipy_sign_flip(totals, 10_000), abs=1e-12)
    assert (ours.test, ours.clusters, ours.n) == ("cluster permutation", 12, len(labels))
    assert ours.diff == pytest.approx(totals.sum() / len(labels))  # the mean difference is over pairs, as before
    assert ours.p_value >= 2 / 2 ** 12  # no two-sided p below 2 of the 4,096 patterns


def test_clustered_p_close_to_scipy_when_drawn():
    b, c, labels = _clustered_data(g=40, seed=5, shift=0.02)
    totals, _ = _cluster_totals(b, c, labels)
    ours = paired_compare(b, c, clusters=labels, resamples=20_000, seed=1).p_value
    theirs = _scipy_sign_flip(totals, 20_000, seed=2)
    sd = 2 * math.sqrt(max(theirs / 2 * (1 - theirs / 2), 1e-4) / 20_000)  # as in the unclustered test above
    assert abs(ours - theirs) <= 4 * math.sqrt(2) * sd + 1 / 20_000


def test_clustered_hand_count_and_one_pair_per_cluster():
    # d = (1, 1 | 2 | 3): totals (2, 2, 3); of the 8 flips only "none" reaches the mean 7/4 -> p = 2 · 1/8
    r = paired_compare([0, 0, 0, 0], [1, 1, 2, 3], clusters=["a", "a", "b", "c"])
    assert (r.p_value, r.clusters, r.diff) == (2 / 8, 3, 7 / 4)
    # one pair per cluster: the same sign flips as the unclustered test (not McNemar on 0/1 values)
    b, c = [0, 1, 0, 0, 1, 0, 0, 0], [1, 1, 1, 1, 0, 1, 1, 0]
    alone = paired_compare(b, c, clusters=list("abcdefgh"))
    assert alone.test == "cluster permutation"
    assert alone.p_value == pytest.approx(_scipy_sign_flip(np.subtract(c, b).astype(float), 10_000), abs=1e-12)


def test_clustered_interval_close_to_scipys_cluster_bootstrap():
    b, c, labels = _clustered_data(g=60, seed=9)
    totals, sizes = _cluster_totals(b, c, labels)
    ours = paired_compare(b, c, clusters=labels, resamples=20_000, confidence=0.9, seed=3)
    theirs = stats.bootstrap((totals, sizes), lambda s, k, axis: s.sum(axis=axis) / k.sum(axis=axis), paired=True,
                             vectorized=True, n_resamples=20_000, confidence_level=0.9, method="percentile",
                             rng=4).confidence_interval
    mean = totals.sum() / sizes.sum()
    se = math.sqrt(60 / 59 * ((totals - sizes * mean) ** 2).sum()) / sizes.sum()
    assert ours.ci_low == pytest.approx(theirs.low, abs=0.1 * se)  # as the unclustered test: ~4.7 Monte-Carlo sd
    assert ours.ci_high == pytest.approx(theirs.high, abs=0.1 * se)
    # the clustered MDE: (z_.95 + z_.8) · SE, SE the clustered standard error (G/(G−1) corrected)
    assert ours.mde == pytest.approx((stats.norm.ppf(0.95) + stats.norm.ppf(0.8)) * se)


def test_clustered_columns_equal_one_at_a_time_and_unclustered_unchanged():
    b, c, labels = _clustered_data(g=15, seed=2)
    bb, cc = np.column_stack([b, b[::-1]]), np.column_stack([c, (c[::-1] > 0.5).astype(float)])
    bb[:, 1] = bb[:, 1] > 0.5
    together = paired_compare_columns(bb, cc, clusters=labels, resamples=3000, seed=4)
    for j in range(2):
        alone = paired_compare(bb[:, j], cc[:, j], clusters=labels, resamples=3000, seed=4)
        assert (together[j].p_value, together[j].test) == (alone.p_value, "cluster permutation")
        assert together[j].ci_low == pytest.approx(alone.ci_low, abs=1e-6)
    assert paired_compare(b, c).clusters is None and paired_compare(b, c).test == "permutation"
    with pytest.raises(ValueError, match="one label per pair"):
        paired_compare(b, c, clusters=labels[:-1])
