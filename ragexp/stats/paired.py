"""Paired comparison of two runs over the same samples: the difference, its paired bootstrap interval,
the p-value (exact McNemar for 0/1 values, else sign-flip permutation), wins/ties/losses, the MDE, Holm.
With ``clusters`` (``stats.cluster_by``) the interval, the p-value and the MDE are over clusters: each cluster's
total difference is resampled and sign-flipped as one unit (McNemar is not used: it assumes independent pairs).
Definitions: docs/uncertainty.md, "Comparing two runs". ``wins``/``losses`` are raw (above/below), not
direction-aware: ``ragexp.core.pairing`` turns them into better/worse. :func:`paired_compare_columns`
shares one resample-count matrix and one sign matrix across metrics (float32, in chunks).

>>> r = paired_compare([0.2, 0.4, 0.5, 0.3, 0.6], [0.5, 0.6, 0.5, 0.7, 0.9])
>>> round(r.diff, 10) == round((0.3 + 0.2 + 0.0 + 0.4 + 0.3) / 5, 10)
True
>>> r.test, (r.wins, r.ties, r.losses)
('permutation', (4, 1, 0))
>>> r.p_value == 2 * 2 / 2 ** 5  # exact: "no flip" and flipping the 0 reach the mean; two tails
True
>>> holm([0.01, 0.04, 0.03])  # sorted 0.01, 0.03, 0.04 times 3, 2, 1, kept monotone
[0.03, 0.06, 0.06]
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ragexp.stats.intervals import CONFIDENCE, RESAMPLES, SEED, check_settings, units_of
from ragexp.stats.resampling import CHUNK_CELLS, count_matrix, generator, one_thread

#: power of the minimum detectable difference
_POWER = 0.8


@dataclass(frozen=True)
class PairedResult:
    """One metric's paired comparison; ``diff`` is candidate − baseline (module docstring)."""

    n: int
    mean_baseline: float
    mean_candidate: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    test: str
    wins: int
    ties: int
    losses: int
    mde: float
    #: the number of clusters the interval and the test are over; None when the samples are independent
    clusters: int | None = None


def paired_compare(baseline: Sequence[float], candidate: Sequence[float], *, clusters: Sequence[Any] | None = None,
                   resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED) -> PairedResult:
    """Compare one metric's paired per-sample values (see the module docstring); ``clusters``: one label per pair."""
    b = np.asarray(baseline, dtype=np.float64).reshape(-1, 1)
    c = np.asarray(candidate, dtype=np.float64).reshape(-1, 1)
    if b.shape != c.shape:
        raise ValueError(f"paired values must have one length: baseline has {b.shape[0]}, "
                         f"candidate has {c.shape[0]}")
    return paired_compare_columns(b, c, clusters=clusters, resamples=resamples, confidence=confidence, seed=seed)[0]


def paired_compare_columns(baseline: np.ndarray, candidate: np.ndarray, *, clusters: Sequence[Any] | None = None,
                           resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED
                           ) -> list[PairedResult]:
    """Compare many metrics at once: column j of the two ``(n, m)`` arrays is metric j.

    Every column shares the same pairs, the same bootstrap resamples and the same sign
    patterns (seeded by ``seed``), so the result for a column equals :func:`paired_compare`
    on that column alone with the same seed.
    """
    from scipy.special import bdtr, ndtri  # binom.cdf and norm.ppf without scipy.stats' import (~1.5 s)

    b = np.asarray(baseline, dtype=np.float64)
    c = np.asarray(candidate, dtype=np.float64)
    if b.ndim != 2 or b.shape != c.shape:
        raise ValueError(f"baseline and candidate must be (samples, metrics) arrays of one shape; "
                         f"got {b.shape} and {c.shape}")
    n, m = b.shape
    if n == 0:
        raise ValueError("no paired samples to compare")
    if not (np.isfinite(b).all() and np.isfinite(c).all()):
        raise ValueError("paired values must be finite numbers (leave out samples that are not ok)")
    check_settings(confidence, "percentile", resamples)
    if clusters is not None:
        if len(clusters) != n:
            raise ValueError(f"clusters must have one label per pair ({n}), got {len(clusters)}")
        with one_thread():
            return _clustered(b, c, clusters, resamples=resamples, confidence=confidence, seed=seed)
    use_mcnemar = ((b == 0) | (b == 1)).all(axis=0) & ((c == 0) | (c == 1)).all(axis=0)

    d = c - b
    diff = d.mean(axis=0)
    wins = (d > 0).sum(axis=0)
    losses = (d < 0).sum(axis=0)
    ties = n - wins - losses

    seq_boot, seq_perm = np.random.SeedSequence(seed).spawn(2)
    alpha = 1 - confidence
    with one_thread():  # the products of the draws on one BLAS thread: the same results on any machine
        boot = _bootstrap_mean_diffs(d, resamples, generator(seq_boot))
        flipped = (_sign_flip_p_values(d[:, ~use_mcnemar], resamples, np.random.default_rng(seq_perm))
                   if (~use_mcnemar).any() else None)
    ci_low, ci_high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)

    p = np.ones(m)
    if use_mcnemar.any():
        # discordant pairs: the candidate won (0 -> 1) or lost (1 -> 0)
        won, lost = wins[use_mcnemar], losses[use_mcnemar]
        tail = bdtr(np.minimum(won, lost), won + lost, 0.5)
        p[use_mcnemar] = np.where(won + lost == 0, 1.0, np.minimum(1.0, 2 * tail))
    if flipped is not None:
        p[~use_mcnemar] = flipped

    z = ndtri(1 - alpha / 2) + ndtri(_POWER)
    sd = d.std(axis=0, ddof=1) if n > 1 else np.zeros(m)
    sd = np.where(use_mcnemar, np.sqrt((wins + losses) / n), sd)
    with np.errstate(invalid="ignore"):
        mde = np.where(sd > 0, z * sd / math.sqrt(n), np.nan)

    return [PairedResult(n=int(n), mean_baseline=float(b[:, j].mean()),
                         mean_candidate=float(c[:, j].mean()), diff=float(diff[j]),
                         ci_low=float(ci_low[j]), ci_high=float(ci_high[j]), p_value=float(p[j]),
                         test="mcnemar" if use_mcnemar[j] else "permutation",
                         wins=int(wins[j]), ties=int(ties[j]), losses=int(losses[j]),
                         mde=float(mde[j]))
            for j in range(m)]


def _clustered(b: np.ndarray, c: np.ndarray, clusters: Sequence[Any], *, resamples: int, confidence: float,
               seed: int) -> list[PairedResult]:
    """:func:`paired_compare_columns` over G clusters: with S_g a cluster's total difference and n_g its size,

    - the interval resamples whole clusters: each resample's mean difference is ``sum(S) / sum(n)`` over the
      clusters drawn (the cluster bootstrap of :mod:`ragexp.stats.intervals`);
    - the p-value flips the sign of whole clusters' totals (:func:`_sign_flip_p_values` on S: its mean is the
      mean difference times n/G, so the tails are the same), exact when 2^G is at most the resamples;
    - the MDE is (z₁₋α/₂ + z₀.₈) · SE with SE the clustered standard error of the mean difference (Miller 2024,
      with the G/(G−1) correction: with one pair per cluster it is sd / √n); empty below 2 clusters.
    """
    from scipy.special import ndtri

    d = c - b
    n, m = d.shape
    unit = units_of(clusters, n)
    g = int(unit.max()) + 1
    sums = np.zeros((g, m))
    np.add.at(sums, unit, d)
    sizes = np.bincount(unit, minlength=g).astype(np.float64)
    diff = d.mean(axis=0)
    wins, losses = (d > 0).sum(axis=0), (d < 0).sum(axis=0)

    seq_boot, seq_perm = np.random.SeedSequence(seed).spawn(2)
    alpha = 1 - confidence
    boot = _bootstrap_cluster_diffs(sums, sizes, diff, resamples, generator(seq_boot))
    ci_low, ci_high = np.percentile(boot, [100 * alpha / 2, 100 * (1 - alpha / 2)], axis=0)
    p = _sign_flip_p_values(sums, resamples, np.random.default_rng(seq_perm))

    residual = sums - sizes[:, None] * diff
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.sqrt(g / (g - 1) * (residual ** 2).sum(axis=0)) / n if g > 1 else np.zeros(m)
        mde = np.where(se > 0, (ndtri(1 - alpha / 2) + ndtri(_POWER)) * se, np.nan)
    return [PairedResult(n=int(n), mean_baseline=float(b[:, j].mean()), mean_candidate=float(c[:, j].mean()),
                         diff=float(diff[j]), ci_low=float(ci_low[j]), ci_high=float(ci_high[j]), p_value=float(p[j]),
                         test="cluster permutation", wins=int(wins[j]), ties=int(n - wins[j] - losses[j]),
                         losses=int(losses[j]), mde=float(mde[j]), clusters=g)
            for j in range(m)]


def _bootstrap_cluster_diffs(sums: np.ndarray, sizes: np.ndarray, centre: np.ndarray, resamples: int,
                             rng: np.random.Generator) -> np.ndarray:
    """``(resamples, m)`` cluster-bootstrap mean differences: clusters drawn with replacement, each resample's
    mean is its drawn clusters' total difference over their total size (centred first, as in
    :func:`_bootstrap_mean_diffs`)."""
    g, m = sums.shape
    centred = (sums - sizes[:, None] * centre).astype(np.float32)
    out = np.empty((resamples, m), dtype=np.float64)
    step = _chunk_rows(g, resamples)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        counts = count_matrix(rng, g, rows)
        out[start:start + rows] = (counts @ centred) / (counts.astype(np.float64) @ sizes)[:, None]
    out += centre
    return out


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-adjusted p-values (step-down, family-wise error), in the input's order.

    The i-th smallest of m p-values is multiplied by ``m − i + 1`` (i from 1), capped at 1 and
    made non-decreasing in that order. A NaN stays NaN and does not count in m.
    """
    p = np.asarray(p_values, dtype=np.float64)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = ok[np.argsort(p[ok], kind="stable")]
    m = len(order)
    scaled = p[order] * (m - np.arange(m))
    out[order] = np.minimum(1.0, np.maximum.accumulate(scaled)) if m else scaled
    return [float(x) for x in out]


def _chunk_rows(n: int, total: int) -> int:
    return max(1, min(total, CHUNK_CELLS // max(n, 1)))


def _bootstrap_mean_diffs(d: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """``(resamples, m)`` bootstrap means of the columns of ``d``, resampling rows jointly.

    Each resample is a row of counts (how often each pair was drawn), so the means of all
    columns are one matrix product; the columns are centred first so float32 loses nothing
    that matters (the error is relative to the spread, not to the level).
    """
    n, m = d.shape
    centre = d.mean(axis=0)
    centred = (d - centre).astype(np.float32)
    out = np.empty((resamples, m), dtype=np.float64)
    step = _chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        out[start:start + rows] = count_matrix(rng, n, rows).astype(np.float32) @ centred
    out /= n
    out += centre
    return out


def _sign_flip_p_values(d: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Two-sided sign-flip permutation p-values of the column means of ``d`` (module docstring).

    A sign pattern is a 0/1 row (1 = flip); flipping the set F turns the sum S into
    ``S − 2·sum(d[F])``, so every column's permuted statistic comes from one matrix product.
    """
    n, m = d.shape
    total = d.sum(axis=0)
    observed = total / n
    exact = n < 63 and 2 ** n <= resamples
    if exact:
        count = 2 ** n
        patterns = (np.arange(count, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)) & 1
        stats = (total - 2 * (patterns.astype(np.float64) @ d)) / n
        gamma = np.abs(observed) * np.finfo(np.float64).eps * 100  # scipy's tie tolerance
        less = (stats <= observed + gamma).sum(axis=0)
        greater = (stats >= observed - gamma).sum(axis=0)
        return np.minimum(1.0, 2 * np.minimum(less, greater) / count)

    # float32 products: a permuted mean that equals the observed one in exact arithmetic may
    # land a few float32 ulps of the sum away; count those as ties (as scipy does for float64)
    scale = np.abs(d).sum(axis=0) / n
    gamma = np.maximum(np.abs(observed) * np.finfo(np.float64).eps * 100,
                       scale * np.finfo(np.float32).eps * 4 * math.sqrt(n))
    d32 = d.astype(np.float32)
    less = np.zeros(m, dtype=np.int64)
    greater = np.zeros(m, dtype=np.int64)
    step = _chunk_rows(n, resamples)
    for start in range(0, resamples, step):
        rows = min(step, resamples - start)
        flips = np.unpackbits(rng.integers(0, 256, size=(rows, (n + 7) // 8), dtype=np.uint8),
                              axis=1, count=n)
        stats = (total - 2 * (flips.astype(np.float32) @ d32).astype(np.float64)) / n
        less += (stats <= observed + gamma).sum(axis=0)
        greater += (stats >= observed - gamma).sum(axis=0)
    return np.minimum(1.0, 2 * (np.minimum(less, greater) + 1) / (resamples + 1))
