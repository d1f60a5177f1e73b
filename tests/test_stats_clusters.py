"""Clustered labels (stats.cluster_by) in the judge-trust statistics: the judge-corrected mean's
clustered standard error equals statsmodels' cluster-robust covariance of the two part means, labels
in one cluster give no interval (and say why), the design effect equals statsmodels' ratio of
cluster-robust to plain variance, and the labels hint follows the clusters (docs/judge-trust.md,
"How many labels?"; its coverage and accuracy are simulated in benchmarks/bench_clusters.py)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ragexp.stats.design import design_effect, design_of
from ragexp.stats.ppi import ppi_mean

sm = pytest.importorskip("statsmodels.api")


def _clustered_set(seed, groups=60, labelled_groups=None):
    """Claims grouped by question (1-6 per question), people's verdicts and a noisy judge's sharing a
    question effect; the labelled records are those of the first ``labelled_groups`` questions (or a
    random third of every record)."""
    g = np.random.default_rng(seed)
    sizes = g.integers(1, 7, size=groups)
    cl = np.repeat(np.arange(groups), sizes)
    effect = g.normal(0, 1.0, size=groups)[cl]
    truth = (effect + g.normal(0, 1, size=len(cl)) > -0.5).astype(float)
    judge = np.where(g.random(len(cl)) < 0.2, 1 - truth, truth)
    lab = cl < labelled_groups if labelled_groups else g.random(len(cl)) < 1 / 3
    return truth, judge, cl, lab


def _sandwich(y, yh, yu, lam, cl_lab, cl_rest):
    """statsmodels: the two part means as an OLS on two indicators, uncorrected cluster-robust covariance."""
    z = np.concatenate([y - lam * yh, lam * yu])
    x = np.zeros((len(z), 2))
    x[:len(y), 0], x[len(y):, 1] = 1, 1
    fit = sm.OLS(z, x).fit(cov_type="cluster", cov_kwds={"groups": np.concatenate([cl_lab, cl_rest]),
                                                          "use_correction": False})
    return fit.cov_params(), fit.params


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_clustered_corrected_mean_equals_statsmodels_cluster_robust_parts(seed):
    truth, judge, cl, lab = _clustered_set(seed)
    c = ppi_mean(truth[lab], judge[lab], judge[~lab], clusters=list(cl[lab]) + list(cl[~lab]))
    cov, params = _sandwich(truth[lab], judge[lab], judge[~lab], c.lam, cl[lab], cl[~lab])
    g_l, g_u = len(set(cl[lab])), len(set(cl[~lab]))
    a = np.array([math.sqrt(g_l / (g_l - 1)), math.sqrt(g_u / (g_u - 1))])  # CR1 of each part
    assert c.mean == pytest.approx(float(params.sum()), abs=1e-12)
    assert c.stderr == pytest.approx(math.sqrt(float(a @ cov @ a)), rel=1e-9)
    assert c.design.groups == g_l and "design effect" in c.note


def test_every_record_labelled_clustered_is_statsmodels_cr1_of_the_human_mean():
    truth, judge, cl, _ = _clustered_set(4)
    c = ppi_mean(truth, judge, [], clusters=list(cl))
    fit = sm.OLS(truth, np.ones((len(truth), 1))).fit(cov_type="cluster", cov_kwds={"groups": cl})
    assert c.mean == pytest.approx(truth.mean(), abs=1e-12)
    assert c.stderr == pytest.approx(float(fit.bse[0]), rel=1e-9)  # one regressor: CR1 is G/(G-1)


def test_design_effect_is_statsmodels_cluster_robust_over_plain_variance():
    truth, _, cl, _ = _clustered_set(5)
    x = np.ones((len(truth), 1))
    robust = sm.OLS(truth, x).fit(cov_type="cluster", cov_kwds={"groups": cl}).bse[0] ** 2
    plain = sm.OLS(truth, x).fit().bse[0] ** 2
    assert design_effect(truth, cl) == pytest.approx(float(robust / plain), rel=1e-9)


def test_labels_in_one_cluster_give_no_corrected_interval_and_say_why():
    # the case: 3 labelled records of 20, all of one question; ppi-python (no clusters) gives an
    # interval, the clustered one cannot measure the spread between labelled questions
    from ppi_py import ppi_mean_ci

    y, yh = np.array([1.0, 0.0, 0.0]), np.array([1.0, 1.0, 0.0])
    yu = np.array([1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0])
    clusters = ["q1"] * 3 + [f"q{2 + i // 2}" for i in range(17)]
    c = ppi_mean(y, yh, yu, clusters=clusters)
    assert c.mean is not None and (c.ci_low, c.ci_high, c.stderr) == (None, None, None)
    assert "the 3 labels fall in one cluster" in c.note and "no interval" in c.note
    assert c.labels_for(0.05) is None
    lo, hi = ppi_mean_ci(y, yh, yu, alpha=0.05)
    assert float(hi[0]) - float(lo[0]) > 0.5  # without clusters the interval is wide, never zero


def test_labels_hint_grows_with_the_clusters_the_labels_fall_in():
    truth, judge, cl, lab = _clustered_set(6, groups=200)
    plain = ppi_mean(truth[lab], judge[lab], judge[~lab])
    clustered = ppi_mean(truth[lab], judge[lab], judge[~lab], clusters=list(cl[lab]) + list(cl[~lab]))
    assert clustered.design.deff > 1.1
    assert clustered.labels_for(0.05) > plain.labels_for(0.05)


def test_cluster_design_by_arithmetic():
    d = design_of(["a", "a", "b", "c"], ["a", "a", "b", "c", "c", "d"], deff=1.2)
    assert d.size_now == (4 + 1 + 1) / 4  # Σ m_c² / n
    assert d.pair_share == (2 + 0 + 2 + 0) / (6 * 5)  # Σ M_c (M_c - 1) / (T (T - 1))
    assert d.rho == pytest.approx(0.2 / 0.5)
    # the half-width over n labels: hw_now² · (n_now / n) · deff(n) / deff(n_now), deff(n) = 1 + (m(n) - 1) ρ
    need = d.labels_for(0.2, 4, 0.1)

    def hw2(n):
        m = d.size_now + (n - 4) * d.pair_share
        return 0.2 ** 2 * 4 / n * (1 + (m - 1) * d.rho) / (1 + (d.size_now - 1) * d.rho)

    assert hw2(need) <= 0.1 ** 2 < hw2(need - 1)


def test_agreement_with_labels_in_one_cluster_says_so():
    from ragexp.stats.agreement import judge_agreement

    a = judge_agreement("m", [1, 0, 0], [1, 1, 0], clusters=["q1"] * 3, resamples=200)
    kappa = a.statistics["kappa"]
    assert kappa.ci_low is None and "the 3 labels fall in one cluster" in kappa.note
