"""How sure is a mean? Standard errors and confidence intervals for a run's aggregates.

:func:`mean_interval` gives one mean its interval; :func:`mean_intervals` does the same for
many metrics over the same records at once (one resample draw, one matrix product), and
:func:`ratio_interval` covers the dataset-level metrics that are a ratio of counts
(accuracy, precision, recall and F1 of the keyword confusion; :func:`ratio_intervals` all four at once).

Which method:

- **All values 0 or 1** (hit rate, exact match, a binary judge verdict): the Wilson score
  interval, with standard error ``sqrt(p(1-p)/n)`` — closed form, no resamples needed.
- **Otherwise**: a seeded bootstrap over samples, ``percentile`` or ``bca`` (bias-corrected
  and accelerated, jackknife acceleration), with the usual standard error ``s / sqrt(n)``.
- **Large runs** (over 16M resample counts, unclustered): ``mean ± z·s/√n`` for a mean whose
  skewness moves the bootstrap's endpoints by less than half the bootstrap's own Monte-Carlo error.
- **Clusters** (several samples over one document, ``stats.cluster_by``): the clustered
  standard error of Miller (2024, "Adding Error Bars to Evals"),
  ``SE = sqrt(G / (G - 1) * sum_c (sum_{i in c} (x_i - mean))^2) / n`` with G clusters
  (the G/(G-1) factor is the usual finite-cluster correction; with one sample per cluster it
  gives exactly ``s / sqrt(n)``), and a cluster bootstrap that resamples whole clusters.

``n = 0`` gives no mean and no interval; ``n = 1`` gives the mean and no interval (there is
no spread to measure); ``note`` says so. One resample draw serves every metric of a run
(counts per sample or cluster, drawn in chunks so memory stays bounded; a metric's resampled
mean is over its own ``ok`` samples in the resample); nothing loops over resamples in Python.

    >>> iv = mean_interval([1, 0, 1, 1])          # 0/1 values: Wilson
    >>> iv.method, iv.n, iv.mean
    ('wilson', 4, 0.75)
    >>> mean_interval([0.5]).ci_low is None
    True
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any, Iterator, Mapping, Sequence

from ragexp.common.paths import conf_file
from ragexp.stats.resampling import draws, one_thread

METHODS = ("percentile", "bca")
#: the ``stats`` defaults: conf/stats/default.yaml, their one place (the run composes the same file); the keyword
#: defaults of ragexp's statistics functions are these
DEFAULTS: dict[str, Any] = conf_file("stats/default")
RESAMPLES, CONFIDENCE, SEED, METHOD = (DEFAULTS[k] for k in ("resamples", "confidence", "seed", "method"))

#: above this many resample counts (samples × resamples: 1,600 samples at 10,000 resamples) an
#: unclustered mean takes the normal interval where its skewness is small enough (:func:`_normal`)
_NORMAL_FROM_CELLS = 16_000_000

#: below this many clusters a clustered interval is flagged as rough in ``note``
FEW_CLUSTERS = 20


@dataclass(frozen=True)
class Interval:
    """A mean with its standard error and confidence interval, and how many samples it is over."""

    mean: float | None
    stderr: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    method: str | None
    confidence: float = CONFIDENCE
    n_clusters: int | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        return {k: v for k, v in d.items() if v is not None or k in ("mean", "stderr", "ci_low", "ci_high")}


def check_settings(confidence: float, method: str, resamples: int) -> None:
    """Refuse settings no interval can be computed with (ValueError saying what was expected)."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real) or not 0 < confidence < 1:
        raise ValueError(f"confidence must be a number between 0 and 1 (e.g. 0.95), got {confidence!r}")
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    if isinstance(resamples, bool) or not isinstance(resamples, numbers.Integral) or resamples < 100:
        raise ValueError(f"resamples must be a whole number of at least 100, got {resamples!r}")


def _as_array(values: Sequence[Any]):
    """The values as a new float array, None as NaN."""
    import numpy as np

    if isinstance(values, np.ndarray) and values.dtype.kind == "f":
        return np.array(values, dtype=float)  # the same floats, without a Python object per value
    return np.array([math.nan if v is None else float(v) for v in values], dtype=float)


def mean_interval(values: Sequence[float | None], *, clusters: Sequence[Any] | None = None, resamples: int = RESAMPLES,
                  confidence: float = CONFIDENCE, seed: int = SEED, method: str = METHOD) -> Interval:
    """The mean of ``values`` (None/NaN left out) with its standard error and confidence interval.

    ``clusters`` holds one cluster label per value; when given, the standard error is the
    clustered one and the bootstrap resamples clusters.

    >>> iv = mean_interval([0.2, 0.4, 0.9, 0.5], resamples=2000)
    >>> round(iv.mean, 3), iv.method, iv.n, iv.ci_low < iv.mean < iv.ci_high
    (0.5, 'percentile', 4, True)
    """
    return mean_intervals({"x": values}, clusters=clusters, resamples=resamples, confidence=confidence,
                          seed=seed, method=method)["x"]


def mean_intervals(columns: Mapping[str, Sequence[float | None]], *, clusters: Sequence[Any] | None = None,
                   resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED, method: str = METHOD
                   ) -> dict[str, Interval]:
    """:func:`mean_interval` for every column, the columns aligned on the same samples.

    Every column shares one resample draw of the samples (or clusters); a matrix product gives
    all the bootstrap means, each over the column's ``ok`` samples in the resample. A column's
    result equals what :func:`mean_interval` gives for it alone: the draw depends only on
    ``seed`` and the number of samples.
    """
    out, plan = _mean_plan(columns, clusters, resamples, confidence, seed, method)
    if plan is not None:
        out.update(_resample(seed, int(resamples), [plan])[0])
    return {k: out[k] for k in columns}


def _mean_plan(columns: Mapping[str, Sequence[float | None]], clusters: Sequence[Any] | None, resamples: int,
               confidence: float, seed: int, method: str) -> tuple[dict[str, Interval], Iterator[Any] | None]:
    """The intervals that need no resample, and the plan (:func:`_bootstrap`) of the others, or None."""
    import numpy as np

    check_settings(confidence, method, resamples)
    lengths = {len(v) for v in columns.values()}
    if len(lengths) > 1:
        raise ValueError(f"columns must have one value per sample; got lengths {sorted(lengths)}")
    # no column (every metric of a run went to the two-stage interval): nothing to align the clusters to
    n_all = lengths.pop() if lengths else (len(clusters) if clusters is not None else 0)
    if clusters is not None and len(clusters) != n_all:
        raise ValueError(f"clusters must have one label per sample ({n_all}), got {len(clusters)}")

    out: dict[str, Interval] = {}
    boot_keys: list[str] = []
    kept = {}  # the columns to resample; a column at a time otherwise (a big run's memory stays bounded)
    for key, column in columns.items():
        a = _as_array(column)
        a[~np.isfinite(a)] = np.nan  # None, NaN or ±inf: not a value to average
        ok = ~np.isnan(a)
        n = int(ok.sum())
        if n == 0:
            out[key] = Interval(None, None, None, None, 0, None, confidence, note="no sample to average")
            continue
        mean = float(math.fsum(a[ok]) / n)
        if n == 1:
            out[key] = Interval(mean, None, None, None, 1, None, confidence,
                                note="one sample: no spread to measure, no interval")
            continue
        vals = a[ok]
        if clusters is None and np.all((vals == 0) | (vals == 1)):
            out[key] = _wilson(int(vals.sum()), n, confidence)
            continue
        if clusters is None and n_all * resamples > _NORMAL_FROM_CELLS:
            out[key] = _normal(vals, mean, int(resamples), confidence, method)
            if out[key] is not None:
                continue
        boot_keys.append(key)
        kept[key] = a

    if not boot_keys:
        return out, None
    values = np.empty((n_all, len(boot_keys)))  # samples × metrics, NaN where not ok
    for j, key in enumerate(boot_keys):
        values[:, j] = kept.pop(key)
    return out, _bootstrap(boot_keys, values, units_of(clusters, n_all), clustered=clusters is not None,
                           resamples=int(resamples), confidence=confidence, seed=seed, method=method)


def units_of(clusters: Sequence[Any] | None, n: int):
    """Each sample's resampling unit: the index of its cluster (labels compared as text), or its own."""
    import numpy as np

    if clusters is None:
        return np.arange(n)
    return np.unique(np.array([str(c) for c in clusters], dtype=object), return_inverse=True)[1]


def _few_clusters(g: int) -> str:
    return (f"only {g} clusters: clustered standard errors and the cluster bootstrap need many clusters "
            f"(≥ {FEW_CLUSTERS}); this interval is rough")


def _z(confidence: float) -> float:
    # the standard library's normal quantile (Wichura's AS 241) agrees with scipy's ndtri to ~1e-15
    # and spares a run scipy's import (0.2-0.7 s) when no interval needs more than Wilson's z
    from statistics import NormalDist

    return NormalDist().inv_cdf(0.5 + confidence / 2)


def _wilson(k: int, n: int, confidence: float) -> Interval:
    """Wilson score interval for k successes in n trials (no continuity correction)."""
    z = _z(confidence)
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return Interval(p, math.sqrt(p * (1 - p) / n), max(0.0, centre - half), min(1.0, centre + half), n, "wilson",
                    confidence)


def _normal(vals, mean: float, resamples: int, confidence: float, method: str) -> Interval | None:
    """``mean ± z·s/√n`` where the bootstrap would add nothing, else None (the bootstrap is drawn).

    The bootstrap's endpoints move off the normal ones by the skewness term of the Cornish-Fisher
    expansion, ``|g1|·k/(6√n)`` standard errors (k = z² − 1 for percentile, 2z² + 1 for BCa); its
    endpoints' own Monte-Carlo error at B resamples is ``sqrt(q(1 − q)/B)/φ(z)`` standard errors.
    The normal interval is taken where the first is at most half the second (docs/uncertainty.md)."""
    import numpy as np

    n, z = len(vals), _z(confidence)
    d = vals - mean
    m2 = float(np.dot(d, d)) / n
    skew = abs(float(np.dot(d * d, d)) / n / m2 ** 1.5) if m2 > 0 else 0.0
    q = (1 - confidence) / 2
    noise = math.sqrt(q * (1 - q) / resamples) / (math.exp(-z * z / 2) / math.sqrt(2 * math.pi))
    if skew * (z * z - 1 if method == "percentile" else 2 * z * z + 1) / (6 * math.sqrt(n)) > noise / 2:
        return None
    se = math.sqrt(m2 * n / (n - 1) / n)
    return Interval(mean, se, mean - z * se, mean + z * se, n, "normal", confidence)


def _resample(seed: int, resamples: int, plans: list[Iterator[Any]]) -> list[dict[str, Interval]]:
    """Run every plan over one seeded draw: each chunk of resample counts is made once and given to
    every plan over the same number of units (plans over another number draw their own). On one BLAS
    thread (:func:`~ragexp.stats.resampling.one_thread`): the same intervals on any machine."""
    takes: dict[int, list[Any]] = {}
    results = []
    with one_thread():
        for plan in plans:
            g, take = next(plan)
            takes.setdefault(g, []).append(take)
        for g, group in takes.items():
            for start, size, c in draws(seed, g, resamples):
                for take in group:
                    take(start, size, c)
        for plan in plans:
            try:
                next(plan)
            except StopIteration as done:
                results.append(done.value)
    return results


def joint_intervals(means: Mapping[str, Sequence[float | None]],
                    ratios: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
                    clusters: Sequence[Any] | None = None, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = SEED, method: str = METHOD) -> dict[str, Interval]:
    """:func:`ratio_intervals` of ``ratios`` and :func:`mean_intervals` of ``means`` over the same records,
    from one pass over one seeded draw at any size: each chunk of resample counts is drawn once and
    given to both (the draw is never held whole, so memory stays bounded), and every interval is
    exactly what its own function gives. Ratio keys first, then the means."""
    out, plans = {}, []
    if ratios:
        ratio_out, plan = _ratio_plan_of(ratios, clusters, resamples, confidence)
        out.update(ratio_out)
        plans += [plan] if plan is not None else []
    mean_out, plan = _mean_plan(means, clusters, resamples, confidence, seed, method)
    out.update(mean_out)
    plans += [plan] if plan is not None else []
    for result in _resample(int(seed), int(resamples), plans):
        out.update(result)
    order = [*ratios, *means]
    return {k: out[k] for k in order}


def _bootstrap(keys: list[str], values, unit_of, *, clustered: bool, resamples: int, confidence: float, seed: int,
               method: str) -> Iterator[Any]:
    """Bootstrap means of every column of ``values`` (samples × metrics, NaN where a sample is not ok).

    The units resampled are the samples (or the clusters in ``unit_of``), one draw for every
    column; a column's mean in a resample is over its ok samples in that resample. A plan for
    :func:`_resample`: it yields ``(units, take)``, is given every chunk of the draw through
    ``take(start, size, counts)``, then returns the intervals.
    """
    import numpy as np

    ok = ~np.isnan(values)
    n = ok.sum(axis=0)  # per column
    exact = np.array([math.fsum(values[ok[:, j], j]) / n[j] for j in range(values.shape[1])])
    v = np.where(ok, values, 0.0)
    del values  # the caller keeps no other reference: a big run holds fewer copies at once
    g = int(unit_of.max()) + 1
    if clustered:
        sums = np.zeros((g, v.shape[1]))
        np.add.at(sums, unit_of, v)
        sizes = np.zeros((g, v.shape[1]))
        np.add.at(sizes, unit_of, ok.astype(float))
    else:  # a unit per sample: the sums np.add.at would give (0.0 + x), without a copy
        v += 0.0
        sums, sizes = v, ok
    means = v.sum(axis=0) / n

    # standard errors: s/sqrt(n), or the clustered one (Miller 2024) with the G/(G-1) correction
    if clustered:
        g_col = (sizes > 0).sum(axis=0)
        resid = sums - sizes * means
        with np.errstate(invalid="ignore", divide="ignore"):
            stderr = np.where(g_col > 1, np.sqrt(g_col / (g_col - 1) * (resid ** 2).sum(axis=0)) / n, np.nan)
        del resid
    else:
        g_col = None
        squares = v - means  # ((v - means) ** 2 * ok), computed in place
        np.square(squares, out=squares)
        squares *= ok
        stderr = np.sqrt(squares.sum(axis=0) / (n - 1)) / np.sqrt(n)
        del squares

    boot = np.empty((resamples, v.shape[1]))
    sums32 = sums.astype(np.float32)
    divide = _denominators(ok, sizes, clustered, g)
    if method == "bca":
        sizes = sizes.astype(float) if sizes.dtype == bool else sizes
    else:  # only the float32 copies are needed from here on
        del v, ok, sums, sizes

    def take(start: int, size: int, c: Any) -> None:
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[start:start + size] = (c @ sums32).astype(float) / divide(c)

    yield g, take

    alpha = (1 - confidence) / 2
    if method == "percentile":
        lo_q = np.full(len(keys), alpha)
        hi_q = np.full(len(keys), 1 - alpha)
    else:
        lo_q, hi_q = _bca_levels(boot, means, sums, sizes, alpha)
    lows, highs = _quantiles(boot, lo_q), _quantiles(boot, hi_q)

    label = f"cluster-{method}" if clustered else method
    out = {}
    for j, key in enumerate(keys):
        note = None
        units = int(g_col[j]) if clustered else None
        no_interval = clustered and units < 2
        if no_interval:
            note = "one cluster: no spread between clusters to measure, no interval"
        elif clustered and units < FEW_CLUSTERS:
            note = _few_clusters(units)
        se = None if not np.isfinite(stderr[j]) else float(stderr[j])
        lo = None if not np.isfinite(lows[j]) or no_interval else float(lows[j])
        hi = None if not np.isfinite(highs[j]) or no_interval else float(highs[j])
        out[key] = Interval(float(exact[j]), se, lo, hi, int(n[j]), label, confidence, units, note)
    return out


def _denominators(ok, sizes, clustered: bool, g: int):
    """``c ↦ c @ sizes``: how many ok samples of each column a chunk of resample counts ``c`` holds (the
    resampled means' denominators), as float64. These are sums of whole counts, exact in float32 in any
    order while below 2**24 (a resample holds at most ``g`` times the largest unit), so they are computed
    only where they vary: a column ok on every sample has ``g`` in every resample (unclustered: the counts
    of a resample sum to g) or the resample's number of samples (clustered: one product for all such
    columns); only a column with samples not ok needs its own product."""
    import numpy as np

    full = ok.all(axis=0)
    if g * int(sizes.max()) >= 2 ** 24 or not full.any():  # sums float32 might round: the one product, as before
        sizes32 = sizes.astype(np.float32)
        return lambda c: c @ sizes32
    partial = np.flatnonzero(~full)
    own32 = sizes[:, partial].astype(np.float32)
    shared32 = sizes[:, np.flatnonzero(full)[0]].astype(np.float32) if clustered else None
    columns = sizes.shape[1]

    def divide(c):
        out = np.empty((c.shape[0], columns))
        out[:, full] = (c @ shared32)[:, None] if clustered else float(g)
        if partial.size:
            out[:, partial] = c @ own32
        return out

    return divide


def _quantiles(boot, levels):
    """Column j's quantile at ``levels[j]`` (numpy's default linear rule), resamples without a value left out."""
    import numpy as np

    out = np.full(boot.shape[1], np.nan)
    for j in range(boot.shape[1]):
        col = boot[:, j]
        if np.isfinite(levels[j]):
            finite = col[np.isfinite(col)]
            if finite.size:
                out[j] = np.quantile(finite, levels[j])
    return out


def _bca_levels(boot, theta, sums, sizes, alpha: float):
    """The BCa quantile levels of every column (bias from the bootstrap, acceleration from the jackknife)."""
    import numpy as np
    from scipy.special import ndtr, ndtri

    valid = np.isfinite(boot)
    b = valid.sum(axis=0)
    # bias correction: the share of resampled means below the estimate, ties counted half (as scipy does)
    below = (((boot < theta) & valid).sum(axis=0) + ((boot <= theta) & valid).sum(axis=0)) / (2 * b)
    z0 = ndtri(below)
    # jackknife: leave one unit (sample or cluster) out, in closed form for a mean; units without
    # an ok value of the column are not part of its jackknife
    total, n = sums.sum(axis=0), sizes.sum(axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        jack = np.where(sizes > 0, (total - sums) / (n - sizes), np.nan)  # units × metrics
        d = np.nanmean(jack, axis=0) - jack
        accel = np.nansum(d ** 3, axis=0) / (6 * np.nansum(d ** 2, axis=0) ** 1.5)
        accel = np.where(np.isfinite(accel), accel, 0.0)
        za, zb = ndtri(alpha), ndtri(1 - alpha)
        lo = ndtr(z0 + (z0 + za) / (1 - accel * (z0 + za)))
        hi = ndtr(z0 + (z0 + zb) / (1 - accel * (z0 + zb)))
    # a bootstrap distribution with no spread (every value equal) has no bias to correct
    flat = np.nanmax(boot, axis=0) == np.nanmin(boot, axis=0)
    lo = np.where(flat, alpha, lo)
    hi = np.where(flat, 1 - alpha, hi)
    return lo, hi


def ratio_interval(numerators: Sequence[float], denominators: Sequence[float], *, clusters: Sequence[Any] | None = None,
                   resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED, method: str = METHOD
                   ) -> Interval:
    """Interval of ``sum(numerators) / sum(denominators)`` by resampling records (or clusters).

    For the dataset-level metrics that are a ratio of counts: each record contributes its part
    of the numerator and denominator (precision: TP → 1/1, FP → 0/1, others 0/0). ``n`` is the
    number of records in the denominator; the standard error is the bootstrap's standard
    deviation; resamples whose denominator is 0 have no value and are left out (``note`` says
    how many). ``method`` is percentile (BCa is not offered for a ratio).

    >>> iv = ratio_interval([1, 0, 1, 0, 0], [1, 1, 1, 0, 1], resamples=1000)
    >>> iv.mean == 2 / 4, iv.n
    (True, 4)
    """
    return ratio_intervals({"x": (numerators, denominators)}, clusters=clusters, resamples=resamples,
                           confidence=confidence, seed=seed, method=method)["x"]


def ratio_intervals(ratios: Mapping[str, tuple[Sequence[float], Sequence[float]]], *,
                    clusters: Sequence[Any] | None = None, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = SEED, method: str = METHOD) -> dict[str, Interval]:
    """:func:`ratio_interval` for every ``key → (numerators, denominators)``, over the same records:
    one resample draw and one matrix product per chunk of it for all of them. Each result equals
    what :func:`ratio_interval` gives for it alone (the resampled sums are sums of whole counts,
    exact in float32 whatever the order of the additions)."""
    out, plan = _ratio_plan_of(ratios, clusters, resamples, confidence)
    if plan is not None:
        out.update(_resample(seed, int(resamples), [plan])[0])
    return {k: out[k] for k in ratios}


def _ratio_plan_of(ratios: Mapping[str, tuple[Sequence[float], Sequence[float]]], clusters: Sequence[Any] | None,
                   resamples: int, confidence: float) -> tuple[dict[str, Interval], Iterator[Any] | None]:
    """The ratio intervals that need no resample, and the plan (:func:`_ratio_plan`) of the others, or None."""
    import numpy as np

    check_settings(confidence, "percentile", resamples)
    out: dict[str, Interval] = {}
    boot_keys, columns, n_of, value_of = [], [], {}, {}
    n_all = None
    for key, (numerators, denominators) in ratios.items():
        num = np.asarray(numerators, dtype=float)
        den = np.asarray(denominators, dtype=float)
        if n_all is not None and len(num) != n_all:
            raise ValueError(f"every ratio needs one part per record ({n_all}), got {len(num)} for {key!r}")
        n_all = len(num)
        n = int((den > 0).sum())
        if n == 0:
            out[key] = Interval(None, None, None, None, 0, None, confidence, note="empty denominator: no value")
            continue
        value = float(num.sum() / den.sum())
        if n == 1:
            out[key] = Interval(value, None, None, None, 1, None, confidence,
                                note="one sample: no spread to measure, no interval")
            continue
        boot_keys.append(key)
        columns += [num, den]
        n_of[key], value_of[key] = n, value
    if not boot_keys:
        return out, None
    cluster_of = units_of(clusters, n_all)
    g = int(cluster_of.max()) + 1
    parts = np.zeros((g, len(columns)))
    np.add.at(parts, cluster_of, np.stack(columns, axis=1))
    return out, _ratio_plan(boot_keys, parts, g, clusters is not None, int(resamples), confidence, n_of, value_of)


def _ratio_plan(boot_keys: list[str], parts, g: int, clustered: bool, resamples: int, confidence: float,
                n_of: dict[str, int], value_of: dict[str, float]) -> Iterator[Any]:
    """The ratio intervals as a plan for :func:`_resample` (see :func:`_bootstrap`)."""
    import numpy as np

    parts32 = parts.astype(np.float32)
    boot = np.empty((resamples, len(boot_keys)))

    def take(start: int, size: int, c: Any) -> None:
        s = (c @ parts32).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            boot[start:start + size] = s[:, 0::2] / s[:, 1::2]

    yield g, take
    out: dict[str, Interval] = {}
    alpha = (1 - confidence) / 2
    label = "cluster-percentile" if clustered else "percentile"
    for j, key in enumerate(boot_keys):
        col = boot[:, j]
        kept = col[np.isfinite(col)]
        dropped = len(col) - len(kept)
        notes = [f"{dropped} of {len(col)} resamples had an empty denominator and were left out"] if dropped else []
        if clustered and g < FEW_CLUSTERS:
            notes.append(_few_clusters(g))
        lo, hi = np.quantile(kept, [alpha, 1 - alpha])
        out[key] = Interval(value_of[key], float(kept.std(ddof=1)), float(lo), float(hi), n_of[key], label,
                            confidence, g if clustered else None, "; ".join(notes) or None)
    return out
