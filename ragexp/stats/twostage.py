"""Judge noise: self-agreement of a judge asked k times (:func:`fleiss_kappa`, :func:`flip_share`) and
two-stage bootstrap intervals that carry its within-item variance, for a mean and for a paired
difference. Definitions: docs/judge-trust.md, "Judge noise" (:func:`_parts` says how the within-item
variance is counted once).

    >>> fleiss_kappa([[1, 1, 1], [0, 0, 0], [1, 0, 1], [0, 0, 1]])  # doctest: +ELLIPSIS
    0.333...
    >>> flip_share([[1, 1, 1], [0, 0, 0], [1, 0, 1], [0, 0, 1]])
    0.5
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ragexp.stats.intervals import CONFIDENCE, RESAMPLES, SEED, Interval
from ragexp.stats.resampling import CHUNK_CELLS


def _matrix(samples: Sequence[Sequence[float | None]]):
    """(values n × k with NaN for a missing verdict, verdicts per item) of the items with at least one."""
    import numpy as np

    k = max((len(s) for s in samples), default=0)
    v = np.full((len(samples), max(k, 1)), np.nan)
    for i, s in enumerate(samples):
        row = [x for x in s if x is not None and not (isinstance(x, float) and math.isnan(x))]
        v[i, :len(row)] = row
    counts = (~np.isnan(v)).sum(axis=1)
    return v, counts


def fleiss_kappa(samples: Sequence[Sequence[float | None]]) -> float | None:
    """Fleiss' κ of the k verdicts per item, each distinct value a category; items with fewer verdicts
    than the most any item has are left out (κ needs the same number per item). None below 2 items or
    2 verdicts, or when every verdict is the same value (no chance agreement to correct)."""
    import numpy as np

    v, counts = _matrix(samples)
    k = v.shape[1]
    v = v[counts == k]
    if len(v) < 2 or k < 2:
        return None
    cats = np.unique(v)
    table = (v[:, :, None] == cats[None, None, :]).sum(axis=1)  # items × categories
    p_i = ((table ** 2).sum(axis=1) - k) / (k * (k - 1))
    p_j = table.sum(axis=0) / (len(v) * k)
    p_e = float((p_j ** 2).sum())
    if p_e >= 1.0:
        return None
    return (float(p_i.mean()) - p_e) / (1 - p_e)


def flip_share(samples: Sequence[Sequence[float | None]]) -> float | None:
    """The share of items (with two verdicts or more) whose verdicts are not all the same."""
    import numpy as np

    v, counts = _matrix(samples)
    v = v[counts >= 2]
    if not len(v):
        return None
    lo, hi = np.nanmin(v, axis=1), np.nanmax(v, axis=1)
    return float((hi > lo).mean())


def _item_values(v, counts, binary: bool):
    import numpy as np

    s = np.nansum(v, axis=-1)
    if binary:  # the majority of 0/1 verdicts; a tie is 0
        return (s > counts / 2).astype(float)
    return s / counts


def _draw_items(rng, n: int, resamples: int, clusters: Sequence[Any] | None):
    """Item indices of each resample (B × m): n items with replacement, or every item of G clusters drawn
    with replacement (each resample padded to the largest size by repeating its own draw)."""
    import numpy as np

    if clusters is None:
        return rng.integers(0, n, size=(resamples, n)), None
    by_label: dict[Any, list[int]] = {}
    for i, c in enumerate(clusters):
        by_label.setdefault(c, []).append(i)
    members = list(by_label.values())  # in order of first appearance
    g = len(members)
    draws = rng.integers(0, g, size=(resamples, g))
    rows = [np.concatenate([members[c] for c in row]) for row in draws]
    width = max(len(r) for r in rows)
    idx = np.stack([np.resize(r, width) if len(r) < width else r for r in rows])
    weights = np.stack([np.r_[np.ones(len(r)), np.zeros(width - len(r))] for r in rows])
    return idx, (g, weights)


def _parts(v, counts, binary: bool):
    """What stage one and stage two draw from: (item values, within-item deviations).

    Drawing items and then raw verdicts with replacement counts the judge's within-item variance twice
    (once in the spread of the item means, once in the redraw). As Davison & Hinkley (1997, §3.8)
    do for two-stage sampling, stage one draws the item means shrunk towards the grand mean so that
    their spread is the between-item variance alone, and stage two the item's deviations from its
    mean scaled by sqrt(k/(k-1)), whose mean then varies as the judge's noise does (s²/k). A binary
    metric's value is the majority of its k verdicts, itself the item's value: its items are drawn,
    and stage two keeps each drawn item's majority (redrawing 0/1 verdicts would count the wobble twice).
    """
    import numpy as np

    if binary:
        return _item_values(v, counts, True), np.zeros_like(v)
    means = np.nansum(v, axis=1) / counts
    dev = v - means[:, None]
    multi = counts >= 2
    within = float(np.nansum(dev[multi] ** 2) / (counts[multi] - 1).sum()) if multi.any() else 0.0
    spread = float(means.var(ddof=1)) if len(means) > 1 else 0.0
    k_eff = len(counts) / float((1.0 / counts).sum())  # harmonic mean of the verdicts per item
    between = max(0.0, spread - within / k_eff)
    c = math.sqrt(between / spread) if spread > 0 else 0.0
    g = float(means.mean())
    scale = np.where(multi, np.sqrt(counts / np.maximum(counts - 1, 1)), 0.0)
    return g + c * (means - g), np.nan_to_num(dev * scale[:, None], nan=np.nan)


def _boot_means(v, counts, rng, idx, weights, binary: bool):
    import numpy as np

    centre, draw_from = _parts(v, counts, binary)
    k = v.shape[1]
    resamples, m = idx.shape
    out = np.empty(resamples)
    step = max(1, CHUNK_CELLS // max(1, m * k))
    for start in range(0, resamples, step):
        sl = slice(start, min(resamples, start + step))
        i = idx[sl]
        kk = counts[i]
        inner = np.floor(rng.random(i.shape + (k,)) * kk[..., None]).astype(int)
        drawn = np.where(np.arange(k) < kk[..., None], draw_from[i[..., None], inner], np.nan)
        vals = centre[i] + np.nansum(drawn, axis=-1) / kk
        if weights is None:
            out[sl] = vals.mean(axis=1)
        else:
            w = weights[sl]
            out[sl] = (vals * w).sum(axis=1) / w.sum(axis=1)
    return out


def two_stage_interval(samples: Sequence[Sequence[float | None]], *, binary: bool = False,
                       clusters: Sequence[Any] | None = None, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                       seed: int = SEED) -> Interval:
    """The mean over items of each item's value (mean of its verdicts, or majority when ``binary``), with
    a percentile interval from the two-stage bootstrap. Items without a verdict are left out."""
    import numpy as np

    v, counts = _matrix(samples)
    keep = counts > 0
    v, counts = v[keep], counts[keep]
    if clusters is not None:
        clusters = [c for c, ok in zip(clusters, keep) if ok]
    n = len(v)
    if n == 0:
        return Interval(None, None, None, None, 0, None, confidence, note="no sample")
    mean = float(_item_values(v, counts, binary).mean())
    if n == 1:
        return Interval(mean, None, None, None, 1, None, confidence, note="one sample: no spread to measure")
    rng = np.random.default_rng(seed)
    idx, cl = _draw_items(rng, n, resamples, clusters)
    boot = _boot_means(v, counts, rng, idx, None if cl is None else cl[1], binary)
    alpha = 1 - confidence
    lo, hi = np.quantile(boot, [alpha / 2, 1 - alpha / 2])
    return Interval(mean, float(boot.std(ddof=1)), float(lo), float(hi), n, "two_stage", confidence,
                    n_clusters=None if cl is None else cl[0])


def two_stage_paired(baseline: Sequence[Sequence[float | None]], candidate: Sequence[Sequence[float | None]], *,
                     resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                     seed: int = SEED) -> dict[str, float | int | None]:
    """Candidate minus baseline on the items both have a verdict for: the mean difference, its two-stage
    bootstrap interval (one item draw for both runs, each run's verdicts redrawn within the item) and the
    two-sided bootstrap p-value of no difference. Not for a 0/1 majority metric: its items' draw is the
    one-stage one (module docstring)."""
    import numpy as np

    vb, cb = _matrix(baseline)
    vc, cc = _matrix(candidate)
    both = (cb > 0) & (cc > 0)
    vb, cb, vc, cc = vb[both], cb[both], vc[both], cc[both]
    n = len(vb)
    out: dict[str, float | int | None] = {"n": n, "diff": None, "ci_low": None, "ci_high": None, "p_value": None}
    if n == 0:
        return out
    out["diff"] = float((_item_values(vc, cc, False) - _item_values(vb, cb, False)).mean())
    if n == 1:
        return out
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(resamples, n))
    d = _boot_means(vc, cc, rng, idx, None, False) - _boot_means(vb, cb, rng, idx, None, False)
    alpha = 1 - confidence
    out["ci_low"], out["ci_high"] = (float(x) for x in np.quantile(d, [alpha / 2, 1 - alpha / 2]))
    # a resampling p-value is never 0: (count + 1) / (resamples + 1), as stats.paired does
    out["p_value"] = float(min(1.0, 2 * (min((d <= 0).sum(), (d >= 0).sum()) + 1) / (resamples + 1)))
    return out
