"""Does the judge agree with people? Agreement statistics between human labels and a judge's values, by
scale (binary, ordinal, continuous), each with a seeded bootstrap interval. Definitions:
docs/judge-trust.md, "What is reported". Every statistic is a function of the (human, judge) count
table, so a resample is a table: multinomial draws of the observed cells (per cluster with
``clusters``) by :mod:`ragexp.stats.intervals`' seeded generator, every statistic computed on all
resampled tables at once; resamples where one is undefined (one class only) are counted in ``note``.

    >>> a = judge_agreement("v", human=[1, 1, 0, 0, 1, 0], judge=[1, 0, 0, 0, 1, 1], resamples=1000)
    >>> a.kind, a.n, round(a.statistics["percent_agreement"].mean, 4)
    ('binary', 6, 0.6667)
    >>> a.statistics["kappa"].mean == (4/6 - (3/6 * 3/6 + 3/6 * 3/6)) / (1 - 1/2)
    True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np

from ragexp.stats.intervals import CONFIDENCE, RESAMPLES, SEED, Interval, check_settings, units_of
from ragexp.stats.resampling import CHUNK_CELLS, draws, generator, one_thread

STATISTICS = {"binary": ("percent_agreement", "kappa", "ac1"),
              "ordinal": ("percent_agreement", "kappa_quadratic", "alpha_ordinal", "ac1"),
              "continuous": ("spearman", "kendall_tau_b")}
#: the statistic a one-line summary, the gate's default floor and a comparison lead with
HEADLINE = {"binary": "kappa", "ordinal": "kappa_quadratic", "continuous": "spearman"}
#: above this many (human value, judge value) cells the rank statistics get no bootstrap interval
MAX_CELLS = 20_000


@dataclass(frozen=True)
class Agreement:
    """One metric's agreement with people: the statistics, their intervals, the confusion table."""

    metric: str
    kind: str
    n: int
    statistics: dict[str, Interval]
    human_levels: list[float] = field(default_factory=list)
    judge_levels: list[float] = field(default_factory=list)
    confusion: list[list[int]] = field(default_factory=list)  # rows: people's levels; columns: the judge's

    @property
    def headline(self) -> str:
        return HEADLINE[self.kind]

    def as_dict(self) -> dict[str, Any]:
        return {"metric": self.metric, "kind": self.kind, "n": self.n, "headline": self.headline,
                "statistics": {k: iv.as_dict() for k, iv in self.statistics.items()},
                "human_levels": self.human_levels, "judge_levels": self.judge_levels, "confusion": self.confusion}


def kind_of(human: Sequence[float], judge: Sequence[float], declared: str | None = None) -> str:
    """``declared`` when given, else from the values: all 0/1 → binary; whole numbers (at most 11
    levels) → ordinal; anything else → continuous.

    >>> kind_of([0, 1], [1, 1]), kind_of([0, 3, 5], [4, 5, 5]), kind_of([0, 0.5], [0.25, 1])
    ('binary', 'ordinal', 'continuous')
    """
    if declared:
        if declared not in STATISTICS:
            raise ValueError(f"kind must be one of {', '.join(STATISTICS)}, got {declared!r}")
        return declared
    values = set(map(float, human)) | set(map(float, judge))
    if values <= {0.0, 1.0}:
        return "binary"
    if all(v.is_integer() for v in values) and len(values) <= 11:
        return "ordinal"
    return "continuous"


def _levels(human: np.ndarray, judge: np.ndarray, kind: str) -> tuple[np.ndarray, np.ndarray]:
    if kind == "continuous":
        return np.unique(human), np.unique(judge)
    common = np.unique(np.concatenate([human, judge, [0.0, 1.0] if kind == "binary" else []]))
    return common, common


def table_statistics(tables: np.ndarray, hv: np.ndarray, jv: np.ndarray, kind: str) -> dict[str, np.ndarray]:
    """Every statistic of ``kind`` on a batch of count tables ``tables`` (B × levels of people ×
    levels of the judge, values ``hv`` and ``jv``): one array of B values per statistic (NaN where undefined)."""
    G = np.asarray(tables, dtype=float)
    n = G.sum(axis=(1, 2))
    out: dict[str, np.ndarray] = {}
    with np.errstate(invalid="ignore", divide="ignore"):
        rows, cols = G.sum(axis=2), G.sum(axis=1)
        if kind == "continuous":
            rank_h = np.cumsum(rows, axis=1) - (rows - 1) / 2  # midranks of the levels (ties share)
            rank_j = np.cumsum(cols, axis=1) - (cols - 1) / 2
            m = (n + 1) / 2
            cov = np.einsum("bi,bij,bj->b", rank_h, G, rank_j) / n - m * m
            var_h = (rows * rank_h ** 2).sum(axis=1) / n - m * m
            var_j = (cols * rank_j ** 2).sum(axis=1) / n - m * m
            out["spearman"] = cov / np.sqrt(var_h * var_j)
            above = np.zeros_like(G)  # counts in strictly smaller rows, same column
            above[:, 1:] = np.cumsum(G, axis=1)[:, :-1]
            left = np.zeros_like(G)  # ... and strictly smaller columns
            left[:, :, 1:] = np.cumsum(above, axis=2)[:, :, :-1]
            right = np.zeros_like(G)  # ... and strictly larger columns
            right[:, :, :-1] = np.cumsum(above[:, :, ::-1], axis=2)[:, :, ::-1][:, :, 1:]
            s = (G * (left - right)).sum(axis=(1, 2))  # concordant - discordant pairs
            n0 = n * (n - 1) / 2
            n1 = (rows * (rows - 1) / 2).sum(axis=1)
            n2 = (cols * (cols - 1) / 2).sum(axis=1)
            out["kendall_tau_b"] = s / np.sqrt((n0 - n1) * (n0 - n2))
            return out
        p = G / n[:, None, None]
        r, c = rows / n[:, None], cols / n[:, None]
        diag = np.einsum("bii->b", p)
        out["percent_agreement"] = diag
        expected = np.einsum("bi,bj->bij", r, c)
        if kind == "binary":
            pe = np.einsum("bii->b", expected)
            out["kappa"] = (diag - pe) / (1 - pe)
        else:
            w = (hv[:, None] - jv[None, :]) ** 2
            out["kappa_quadratic"] = 1 - (p * w).sum(axis=(1, 2)) / (expected * w).sum(axis=(1, 2))
            o = G + G.transpose(0, 2, 1)  # coincidences of the two coders
            nc = o.sum(axis=2)
            S = np.cumsum(nc, axis=1)
            span = S[:, None, :] - (S - nc)[:, :, None]  # sum of n_g for g from c to k (c <= k)
            span = np.where(np.triu(np.ones((len(hv), len(hv)), bool)), span, span.transpose(0, 2, 1))
            delta = (span - (nc[:, :, None] + nc[:, None, :]) / 2) ** 2
            total = 2 * n
            out["alpha_ordinal"] = 1 - (total - 1) * (o * delta).sum(axis=(1, 2)) / np.einsum(
                "bc,bk,bck->b", nc, nc, delta)
        k = len(hv)
        pi = (r + c) / 2
        pe_gwet = (pi * (1 - pi)).sum(axis=1) / (k - 1)
        out["ac1"] = (diag - pe_gwet) / (1 - pe_gwet)
    return {name: out[name] for name in STATISTICS[kind]}


def _resampled(cells: list[np.ndarray], shapes: list[tuple[int, int]], unit_of: np.ndarray, clustered: bool,
               seed: int, resamples: int):
    """``(start, size, [resampled tables of each table set])`` in chunks: the table sets (one per judge)
    share each resample of the items (or clusters)."""
    sizes = [a * b for a, b in shapes]
    if clustered:
        g = int(unit_of.max()) + 1
        per = []
        for c, m in zip(cells, sizes):
            p = np.zeros((g, m), dtype=np.float32)
            np.add.at(p, (unit_of, c), 1.0)
            per.append(p)
        for start, size, counts in draws(seed, g, resamples):
            yield start, size, [(counts @ p).astype(float).reshape(size, *shape) for p, shape in zip(per, shapes)]
        return
    joint = np.zeros(len(cells[0]), dtype=np.int64)
    for c, m in zip(cells, sizes):
        joint = joint * m + c
    uniq, inverse = np.unique(joint, return_inverse=True)
    probs = np.bincount(inverse, minlength=len(uniq)) / len(joint)
    maps = []
    for m in reversed(sizes):  # each table set's cell of every distinct joint cell
        onehot = np.zeros((len(uniq), m))
        onehot[np.arange(len(uniq)), uniq % m] = 1.0
        maps.append(onehot)
        uniq = uniq // m
    maps.reverse()
    rng = generator(seed)
    chunk = max(1, CHUNK_CELLS // max(len(probs), max(sizes)))
    for start in range(0, resamples, chunk):
        size = min(chunk, resamples - start)
        counts = rng.multinomial(len(joint), probs, size=size).astype(float)
        yield start, size, [(counts @ m).reshape(size, *shape) for m, shape in zip(maps, shapes)]


def _interval(point: float, boot: np.ndarray, confidence: float, n: int, clustered: bool, units: int,
              note: str | None = None) -> Interval:
    method = "cluster-percentile" if clustered else "percentile"
    if not math.isfinite(point):
        return Interval(None, None, None, None, n, None, confidence, units if clustered else None,
                        note or "undefined on these labels (one class only, or no spread)")
    kept = boot[np.isfinite(boot)]
    notes = [note] if note else []
    if len(kept) < len(boot):
        notes.append(f"{len(boot) - len(kept)} of {len(boot)} resamples had no value and were left out")
    if len(kept) < 2:
        return Interval(point, None, None, None, n, None, confidence, units if clustered else None,
                        "; ".join(notes) or "no interval")
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(kept, [alpha, 1 - alpha])
    return Interval(point, float(kept.std(ddof=1)), float(lo), float(hi), n, method, confidence,
                    units if clustered else None, "; ".join(notes) or None)


def _tables(human, judges, kind):
    """People's levels, the judges' levels (shared by every judge), and per judge each item's cell of
    the (human value, judge value) table and that table of counts."""
    h = np.asarray(human, dtype=float)
    js = [np.asarray(j, dtype=float) for j in judges]
    for j in js:
        if h.shape != j.shape or h.ndim != 1:
            raise ValueError(f"human and judge need one value per item each, got {h.shape} and {j.shape}")
        if not (np.isfinite(h).all() and np.isfinite(j).all()):
            raise ValueError("human and judge values must be finite numbers (leave unlabelled items out)")
    hv, jv = _levels(h, np.concatenate(js), kind)
    cells = [np.searchsorted(hv, h) * len(jv) + np.searchsorted(jv, j) for j in js]
    return hv, jv, cells, [np.bincount(c, minlength=len(hv) * len(jv)).reshape(len(hv), len(jv)) for c in cells]


def judge_agreement(metric: str, human: Sequence[float], judge: Sequence[float], *, kind: str | None = None,
                    clusters: Sequence[Any] | None = None, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                    seed: int = SEED) -> Agreement:
    """The agreement of ``judge`` with ``human`` (one value each per labelled item, in the same order).

    ``kind`` (binary, ordinal, continuous) defaults to :func:`kind_of` the values; ``clusters`` (one
    label per item) makes the bootstrap resample whole clusters, as ``stats.cluster_by`` does for means.
    """
    check_settings(confidence, "percentile", resamples)
    kind = kind_of(human, judge, kind)
    hv, jv, (cells,), (table,) = _tables(human, [judge], kind)
    n, shape = len(cells), table.shape
    points = {k: float(v[0]) for k, v in table_statistics(table[None], hv, jv, kind).items()} if n else {}
    unit_of, clustered = units_of(clusters, n), clusters is not None
    units = int(unit_of.max()) + 1 if n else 0
    stats: dict[str, Interval] = {}
    if n < 2 or units < 2 or shape[0] * shape[1] > MAX_CELLS:
        note = ("fewer than two labelled items: no interval" if n < 2 else
                f"the {n} labels fall in one cluster: no spread between clusters to measure, no interval"
                if units < 2 else
                f"{shape[0] * shape[1]:,} distinct value pairs: no bootstrap interval (at most {MAX_CELLS:,})")
        for name in STATISTICS[kind]:
            value = points.get(name, math.nan)
            stats[name] = Interval(value if math.isfinite(value) else None, None, None, None, n, None, confidence,
                                   note=note)
    else:
        boot = {name: np.empty(int(resamples)) for name in STATISTICS[kind]}
        with one_thread():  # the products of the draws on one BLAS thread: the same intervals on any machine
            for start, size, (tables,) in _resampled([cells], [shape], unit_of, clustered, seed, int(resamples)):
                for name, values in table_statistics(tables, hv, jv, kind).items():
                    boot[name][start:start + size] = values
        few = (f"only {units} clusters: the cluster bootstrap needs many; this interval is rough"
               if clustered and units < 20 else None)
        for name in STATISTICS[kind]:
            stats[name] = _interval(points[name], boot[name], confidence, n, clustered, units, few)
    return Agreement(metric, kind, n, stats, [level(v) for v in hv], [level(v) for v in jv], table.tolist())


def level(v: float) -> float | int:
    """A label's value as written: ``1`` for ``1.0``, ``0.5`` as it is."""
    return int(v) if float(v).is_integer() else float(v)


@dataclass(frozen=True)
class AgreementDiff:
    """``statistic`` of candidate minus baseline, over the same labelled items, with a paired interval."""

    metric: str
    statistic: str
    n: int
    baseline: float
    candidate: float
    diff: float
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def paired_agreement(metric: str, human: Sequence[float], baseline: Sequence[float], candidate: Sequence[float], *,
                     kind: str | None = None, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                     seed: int = SEED) -> AgreementDiff:
    """Is the candidate judge's agreement with people (its headline statistic) higher than the baseline
    judge's? Both judged the same items (``human`` holds people's values for them). Each resample draws
    the items once for both judges, so the difference is paired. ``p_value`` is the two-sided bootstrap test of
    "no difference": ``min(1, 2 · min(share of resampled differences ≤ 0, share ≥ 0))`` — below
    ``1 - confidence`` exactly when the interval leaves 0 out."""
    check_settings(confidence, "percentile", resamples)
    kind = kind_of(human, list(baseline) + list(candidate), kind)
    statistic = HEADLINE[kind]
    hv, jv, cells, tables = _tables(human, [baseline, candidate], kind)
    n, shape = len(cells[0]), tables[0].shape
    a, b = (float(table_statistics(t[None], hv, jv, kind)[statistic][0]) for t in tables)
    diff = b - a
    if n < 2 or shape[0] * shape[1] > MAX_CELLS or not math.isfinite(diff):
        return AgreementDiff(metric, statistic, n, a, b, diff, None, None, None, "no interval on these labels")
    boot = np.empty(int(resamples))
    with one_thread():  # as in judge_agreement
        for start, size, (ta, tb) in _resampled(cells, [shape, shape], units_of(None, n), False, seed, int(resamples)):
            boot[start:start + size] = (table_statistics(tb, hv, jv, kind)[statistic]
                                        - table_statistics(ta, hv, jv, kind)[statistic])
    kept = boot[np.isfinite(boot)]
    alpha = (1 - confidence) / 2
    lo, hi = np.quantile(kept, [alpha, 1 - alpha])
    p = min(1.0, 2 * min(float((kept <= 0).mean()), float((kept >= 0).mean())))
    note = f"{len(boot) - len(kept)} resamples without a value left out" if len(kept) < len(boot) else None
    return AgreementDiff(metric, statistic, n, a, b, diff, float(lo), float(hi), p, note)


def labels_for_halfwidth(halfwidth: float, n: int, target: float) -> int | None:
    """Labels needed to bring an interval of half-width ``halfwidth`` over ``n`` labels down to
    ``target``, taking the half-width to shrink as ``1/sqrt(n)`` (as a bootstrap interval does).

    >>> labels_for_halfwidth(0.14, 120, 0.07)  # half the width: four times the labels
    480
    """
    if not halfwidth or not math.isfinite(halfwidth) or n < 1 or target <= 0:
        return None
    return max(n, math.ceil(n * (halfwidth / target) ** 2 - 1e-9))
