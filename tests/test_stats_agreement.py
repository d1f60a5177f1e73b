"""Agreement statistics and PPI++ corrected means against reference libraries on the same numbers
(scikit-learn, krippendorff, scipy, ppi-python); Gwet's AC1 by arithmetic; intervals by simulation."""

import math

import numpy as np
import pytest

from ragexp.stats.agreement import judge_agreement, kind_of, labels_for_halfwidth, paired_agreement
from ragexp.stats.ppi import ppi_mean

rng = np.random.default_rng(20261124)
ORD_H = rng.integers(0, 6, 300)
ORD_J = np.clip(ORD_H + rng.integers(-2, 3, 300), 0, 5)
BIN_H = rng.integers(0, 2, 250)
BIN_J = np.where(rng.random(250) < 0.8, BIN_H, 1 - BIN_H)
CON_H = rng.choice([0.0, 0.5, 1.0], 180)
CON_J = np.clip(CON_H + rng.normal(0, 0.3, 180), 0, 1).round(2)


def test_binary_kappa_equals_scikit_learn():
    from sklearn.metrics import cohen_kappa_score

    a = judge_agreement("m", BIN_H, BIN_J, resamples=500)
    assert a.kind == "binary" and a.n == 250
    assert a.statistics["kappa"].mean == pytest.approx(cohen_kappa_score(BIN_H, BIN_J), abs=1e-9)
    assert a.statistics["percent_agreement"].mean == pytest.approx((BIN_H == BIN_J).mean(), abs=1e-12)


def test_ordinal_quadratic_kappa_and_alpha_equal_the_references():
    from sklearn.metrics import cohen_kappa_score
    import krippendorff

    a = judge_agreement("m", ORD_H, ORD_J, resamples=500)
    assert a.kind == "ordinal"
    assert a.statistics["kappa_quadratic"].mean == pytest.approx(
        cohen_kappa_score(ORD_H, ORD_J, weights="quadratic", labels=list(range(6))), abs=1e-9)
    ref = krippendorff.alpha(reliability_data=np.vstack([ORD_H, ORD_J]).astype(float), level_of_measurement="ordinal")
    assert a.statistics["alpha_ordinal"].mean == pytest.approx(ref, abs=1e-9)
    # the confusion table: rows people, columns the judge
    assert np.array(a.confusion).sum() == 300 and a.confusion[2][3] == int(((ORD_H == 2) & (ORD_J == 3)).sum())


def test_gwet_ac1_by_arithmetic():
    # 10 items: people say 1 on 8, the judge agrees on 7 of those and on 1 of the 2 zeros
    human = [1] * 8 + [0] * 2
    judge = [1] * 7 + [0] + [0, 1]
    a = judge_agreement("m", human, judge, resamples=200)
    pa = 8 / 10
    pi1 = (8 / 10 + 8 / 10) / 2  # share of 1 among both raters' 20 values
    pe = (pi1 * (1 - pi1) + (1 - pi1) * pi1) / (2 - 1)
    assert a.statistics["ac1"].mean == pytest.approx((pa - pe) / (1 - pe), abs=1e-12)
    kappa_pe = 0.8 * 0.8 + 0.2 * 0.2
    assert a.statistics["kappa"].mean == pytest.approx((pa - kappa_pe) / (1 - kappa_pe), abs=1e-12)


def test_rank_correlations_equal_scipy():
    from scipy.stats import kendalltau, spearmanr

    a = judge_agreement("m", CON_H, CON_J, resamples=500)
    assert a.kind == "continuous"
    assert a.statistics["spearman"].mean == pytest.approx(spearmanr(CON_H, CON_J)[0], abs=1e-9)
    assert a.statistics["kendall_tau_b"].mean == pytest.approx(kendalltau(CON_H, CON_J)[0], abs=1e-9)


def test_bootstrap_interval_matches_scipy_bootstrap_within_resampling_error():
    from scipy.stats import bootstrap
    from sklearn.metrics import cohen_kappa_score

    a = judge_agreement("m", BIN_H, BIN_J, resamples=4000, seed=3)
    ref = bootstrap((BIN_H, BIN_J), lambda x, y: cohen_kappa_score(x, y), paired=True, vectorized=False,
                    n_resamples=1000, method="percentile", random_state=np.random.default_rng(5)).confidence_interval
    iv = a.statistics["kappa"]
    width = iv.ci_high - iv.ci_low
    assert iv.ci_low == pytest.approx(ref.low, abs=0.1 * width)
    assert iv.ci_high == pytest.approx(ref.high, abs=0.1 * width)


def test_clustered_interval_is_wider_when_items_repeat_within_clusters():
    # each labelled pair appears 5 times in one cluster: 50 independent pairs, not 250
    h, j = np.repeat(BIN_H[:50], 5), np.repeat(BIN_J[:50], 5)
    plain = judge_agreement("m", h, j, resamples=2000).statistics["kappa"]
    clustered = judge_agreement("m", h, j, clusters=np.repeat(np.arange(50), 5), resamples=2000).statistics["kappa"]
    assert clustered.method == "cluster-percentile" and clustered.n_clusters == 50
    assert clustered.mean == plain.mean
    assert (clustered.ci_high - clustered.ci_low) > 1.8 * (plain.ci_high - plain.ci_low)  # about sqrt(5)


def test_one_class_gives_no_kappa_and_says_so():
    a = judge_agreement("m", [1, 1, 1, 1], [1, 1, 1, 1], resamples=200)
    assert a.statistics["percent_agreement"].mean == 1.0
    assert a.statistics["kappa"].mean is None and "one class" in a.statistics["kappa"].note


def test_kind_of_declared_and_refused():
    assert kind_of([0, 1], [1, 0], "ordinal") == "ordinal"
    with pytest.raises(ValueError, match="kind must be one of"):
        kind_of([0], [0], "nominalish")


def test_paired_difference_of_kappa():
    from sklearn.metrics import cohen_kappa_score

    good = BIN_J
    bad = np.where(rng.random(250) < 0.6, BIN_H, 1 - BIN_H)
    d = paired_agreement("m", BIN_H, good, bad, resamples=2000)
    assert d.statistic == "kappa"
    assert d.diff == pytest.approx(cohen_kappa_score(BIN_H, bad) - cohen_kappa_score(BIN_H, good), abs=1e-9)
    assert d.ci_high < 0 and d.p_value < 0.01
    same = paired_agreement("m", BIN_H, good, good, resamples=500)
    assert same.diff == 0 and same.p_value == 1.0


def test_labels_for_halfwidth_by_arithmetic():
    assert labels_for_halfwidth(0.2, 100, 0.1) == 100 * (0.2 / 0.1) ** 2
    assert labels_for_halfwidth(0.05, 100, 0.1) == 100  # already narrower: no more labels


# -- PPI++ --------------------------------------------------------------------------------------

def _labelled_set(seed, n=120, N=2000, p=0.7, flip=0.15, bias=0.0):
    g = np.random.default_rng(seed)
    truth = (g.random(n + N) < p).astype(float)
    judge = np.where(g.random(n + N) < flip, 1 - truth, truth)
    judge = np.where((judge == 0) & (g.random(n + N) < bias / (1 - p + 1e-12)), 1.0, judge)  # biased upwards
    return truth[:n], judge[:n], judge[n:], truth


@pytest.mark.parametrize("lam", [None, 0.0, 1.0, 0.4])
def test_ppi_mean_equals_ppi_python(lam):
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y, yh, yu, _ = _labelled_set(1)
    c = ppi_mean(y, yh, yu, lam=lam)
    assert c.mean == pytest.approx(float(ppi_mean_pointestimate(y, yh, yu, lam=lam)[0]), abs=1e-9)
    lo, hi = ppi_mean_ci(y, yh, yu, alpha=0.05, lam=lam)
    assert (c.ci_low, c.ci_high) == (pytest.approx(float(lo[0]), abs=1e-9), pytest.approx(float(hi[0]), abs=1e-9))
    assert c.bias == pytest.approx(float((yh - y).mean()), abs=1e-12)


def test_ppi_every_record_labelled_is_the_human_mean():
    y, yh, _, _ = _labelled_set(2)
    c = ppi_mean(y, yh, [])
    assert c.mean == pytest.approx(y.mean(), abs=1e-12) and c.lam == 0.0
    assert c.stderr == pytest.approx(math.sqrt(np.var(y) / len(y)), abs=1e-12)


def test_ppi_labels_for_target_halfwidth_reaches_it():
    y, yh, yu, _ = _labelled_set(3)
    c = ppi_mean(y, yh, yu)
    need = c.labels_for(0.04)
    z = 1.959963984540054
    assert z * math.sqrt(c.imputed_var / (c.n_total - c.n_labelled) + c.resid_var / need) <= 0.04
    assert z * math.sqrt(c.imputed_var / (c.n_total - c.n_labelled) + c.resid_var / (need - 1)) > 0.04


def test_ppi_clustered_standard_error_by_arithmetic():
    y, yh, yu, _ = _labelled_set(4, n=60, N=300)
    plain = ppi_mean(y, yh, yu)
    single = ppi_mean(y, yh, yu, clusters=list(range(360)))  # one record per cluster
    assert single.mean == plain.mean
    # each part corrected for its own clusters: the 60 labelled ones and the 300 unlabelled ones
    assert single.stderr == pytest.approx(math.sqrt(plain.resid_var / 60 * 60 / 59 + plain.imputed_var / 300
                                                    * 300 / 299), rel=1e-12)
    # records repeated in pairs: each cluster's contribution doubles, the cluster count halves
    yy, hh, uu = np.repeat(y, 2), np.repeat(yh, 2), np.repeat(yu, 2)
    paired = ppi_mean(yy, hh, uu, lam=plain.lam, clusters=list(np.repeat(np.arange(360), 2)))
    lam = plain.lam
    lab, rest = (y - lam * yh - (y - lam * yh).mean()) / 60, (lam * yu - (lam * yu).mean()) / 300
    assert paired.stderr == pytest.approx(math.sqrt(60 / 59 * (lab ** 2).sum() + 300 / 299 * (rest ** 2).sum()),
                                          rel=1e-12)
