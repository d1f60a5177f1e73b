"""What would people have scored? The judge's mean corrected by the labelled records: PPI++ with power
tuning (Angelopoulos, Duchi and Zrnic 2023), λ computed around the λ = 1 estimate as ppi-python's
``ppi_mean_ci`` does (tests check it against ppi-python). Definitions: docs/judge-trust.md,
"What would people have scored? Corrected means". Clustered SE: each labelled record contributes
``√k_L · (Y_i - λŶ_i - mean)/n`` and each unlabelled one ``√k_U · (λŶ_i - mean)/N``, and
``SE² = Σ_clusters (their sum)²``, where ``k = G/(G-1)`` is the finite-cluster correction of each part
with G the clusters that part's records fall in (the sandwich of statsmodels' cluster-robust
covariance of the two part means, each part corrected for its own clusters). Labels that fall in
fewer than two clusters give no interval: their spread between clusters cannot be measured.

    >>> c = ppi_mean([1, 0, 1, 1], [1, 1, 1, 1], [1, 1, 0, 1, 1, 1])
    >>> c.n_labelled, c.n_total, round(c.judge_mean, 4), round(c.bias, 4)
    (4, 10, 0.9, 0.25)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from statistics import NormalDist
from typing import Any, Sequence

import numpy as np

from ragexp.stats.design import ClusterDesign, design_of
from ragexp.stats.intervals import CONFIDENCE, units_of


@dataclass(frozen=True)
class Corrected:
    """The judge-corrected mean of one metric, with its interval and what it was computed from."""

    mean: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n_labelled: int
    n_total: int
    judge_mean: float | None
    bias: float | None
    lam: float | None
    confidence: float = CONFIDENCE
    resid_var: float | None = None  # var(Y - λŶ) over the labelled records: what more labels buy down
    imputed_var: float | None = None  # var(λŶ) over the unlabelled ones: the part labels cannot remove
    note: str | None = None
    design: ClusterDesign | None = None  # with clusters: the labels' clusters and design effect

    def as_dict(self) -> dict[str, Any]:
        d = {k: v for k, v in asdict(self).items()
             if k != "design" and (v is not None or k in ("mean", "ci_low", "ci_high"))}
        if self.design is not None:
            d["design"] = self.design.as_dict()
        return d

    def labels_for(self, halfwidth: float) -> int | None:
        """Labels needed for an interval of half-width ``halfwidth``, holding λ and the two variances:
        ``n ≥ var(Y - λŶ) / ((halfwidth / z)² - var(λŶ) / N)``; None when the unlabelled records' own
        spread is already wider than that (more labels cannot get there) or nothing is known.

        >>> Corrected(0.7, None, None, None, 100, 1100, 0.8, 0.1, 0.5, resid_var=0.2, imputed_var=0.0).labels_for(0.05)
        308
        """
        if self.resid_var is None or self.imputed_var is None or halfwidth <= 0:
            return None
        if self.design is not None:  # clustered: the labelled part's variance grows with its clusters
            if self.stderr is None:
                return None
            z = NormalDist().inv_cdf(0.5 + self.confidence / 2)
            labelled = self.design.deff * self.resid_var / self.n_labelled  # that part of stderr² now
            rest = max(0.0, self.stderr ** 2 - labelled)
            return self.design.labels_for(z * self.stderr, self.n_labelled, halfwidth, floor=z * math.sqrt(rest))
        z = NormalDist().inv_cdf(0.5 + self.confidence / 2)
        unlabelled = self.n_total - self.n_labelled
        room = (halfwidth / z) ** 2 - (self.imputed_var / unlabelled if unlabelled else 0.0)
        if room <= 0:
            return None
        return max(2, math.ceil(self.resid_var / room - 1e-9))


def ppi_mean(human: Sequence[float], judge_labelled: Sequence[float], judge_unlabelled: Sequence[float], *,
             confidence: float = CONFIDENCE, lam: float | None = None, clusters: Sequence[Any] | None = None) -> Corrected:
    """PPI++ estimate of the mean people would give over all ``n + N`` records (module docstring).
    ``lam`` fixes λ (0: human labels alone, 1: classic PPI); None tunes it."""
    y = np.asarray(human, dtype=float)
    yh = np.asarray(judge_labelled, dtype=float)
    yu = np.asarray(judge_unlabelled, dtype=float)
    n, N = len(y), len(yu)
    if len(yh) != n:
        raise ValueError(f"human and judge_labelled need one value per labelled record each, got {n} and {len(yh)}")
    judge_mean = float(np.concatenate([yh, yu]).mean()) if n + N else None
    bias = float((yh - y).mean()) if n else None
    if n < 2:
        return Corrected(None, None, None, None, n, n + N, judge_mean, bias, None, confidence,
                         note="fewer than two labelled records: no corrected mean")
    if N == 0:
        lam = 0.0  # every record labelled: the human mean is the answer
    elif lam is None:
        theta1 = yu.mean() + (y - yh).mean()
        cov = ((y - theta1) - (y - theta1).mean()) @ ((yh - theta1) - (yh - theta1).mean()) / n
        var = np.var(np.concatenate([yh, yu]), ddof=1)
        lam = float(np.clip(cov / ((1 + n / N) * var), 0, 1)) if var > 0 else 0.0
    lam = float(lam)
    resid = y - lam * yh
    theta = float((lam * yu).mean() + resid.mean()) if N else float(y.mean())
    imputed_var = float(np.var(lam * yu)) if N else 0.0
    resid_var = float(np.var(resid))
    se = math.sqrt((imputed_var / N if N else 0.0) + resid_var / n)
    note = None
    if clusters is not None:
        if len(clusters) != n + N:
            raise ValueError(f"clusters needs one label per labelled then unlabelled record ({n + N}), got {len(clusters)}")
        unit = units_of(clusters, n + N)
        g_l, g_u = len(np.unique(unit[:n])), len(np.unique(unit[n:]))
        if g_l < 2:
            return Corrected(theta, None, None, None, n, n + N, judge_mean, bias, lam, confidence, resid_var,
                             imputed_var, f"the {n} labels fall in one cluster: no spread between labelled clusters "
                                          f"to measure, no interval (label records of two clusters or more)")
        lab = (resid - resid.mean()) / n * math.sqrt(g_l / (g_l - 1))
        # unlabelled records in one cluster: their part is taken uncorrected (as it is, its spread within the cluster)
        rest = (lam * yu - (lam * yu).mean()) / N * (math.sqrt(g_u / (g_u - 1)) if g_u > 1 else 1.0) if N else []
        se = math.sqrt(float((np.bincount(unit, weights=np.concatenate([lab, rest])) ** 2).sum()))
        lab_var = float((np.bincount(unit[:n], weights=lab, minlength=int(unit.max()) + 1) ** 2).sum())
        deff = lab_var / (resid_var / n) if resid_var > 0 else 1.0
        design = design_of(unit[:n], unit, deff=deff)
        note = (f"clustered standard error: the labels fall in {g_l} clusters (design effect {deff:.2f})"
                + (f" (few: rough; ≥ 20 wanted)" if g_l < 20 else ""))
        z = NormalDist().inv_cdf(0.5 + confidence / 2)
        return Corrected(theta, se, theta - z * se, theta + z * se, n, n + N, judge_mean, bias, lam, confidence,
                         resid_var, imputed_var, note, design)
    z = NormalDist().inv_cdf(0.5 + confidence / 2)
    return Corrected(theta, se, theta - z * se, theta + z * se, n, n + N, judge_mean, bias, lam, confidence,
                     resid_var, imputed_var, note)
