"""How clustered are the labels, and what does that do to the labels a target half-width needs?
Definitions: docs/judge-trust.md, "How many labels?".

With ``stats.cluster_by``, a mean over n labelled records has the variance of n independent ones times
the **design effect** ``deff = (clustered variance) / (variance as if independent)``. For clusters it
grows with how many labelled records share a cluster, ``deff ≈ 1 + (m − 1)·ρ`` (Kish), where
``m = Σ m_c² / n`` is the size of the cluster an average labelled record sits in (m_c labels in
cluster c) and ρ the intra-cluster correlation. :class:`ClusterDesign` reads ρ off the design effect
the labels show now, and predicts m for more labels drawn at random among the run's records: each new
label shares a cluster with an existing one at the rate two records drawn at random do,
``Σ M_c (M_c − 1) / (T (T − 1))`` (M_c records of cluster c, T records). The variance for n labels is
then the present one scaled by ``(n_now / n) · deff(n) / deff(n_now)``, and :meth:`ClusterDesign.labels_for`
solves that for n in closed form.

    >>> d = design_of([0, 0, 1, 1, 2, 2], [0, 0, 1, 1, 2, 2, 3, 3, 4, 4], deff=1.5)
    >>> d.groups, d.size_now, round(d.rho, 3)
    (3, 2.0, 0.5)
    >>> design_of(list(range(8)), list(range(20)), deff=1.0).labels_for(0.1, 8, 0.05)  # no clustering: 4× the labels
    32
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True)
class ClusterDesign:
    """The labels' clusters now, the design effect they show, and the ρ it implies."""

    groups: int  # clusters the labels fall in
    deff: float  # design effect of the labelled part now
    size_now: float  # Σ m_c² / n over the labelled records
    pair_share: float  # Σ M_c (M_c − 1) / (T (T − 1)) over the run's records
    rho: float | None  # (deff − 1) / (size_now − 1), clipped to [0, 1]; None when every label has its own cluster

    def growth(self, n_now: int, n: float) -> float:
        """``deff(n) / deff(n_now)``: how much more (or less) clustered n labels are than the present ones."""
        if not self.rho:
            return 1.0
        later = 1 + max(0.0, self.size_now - 1 + (n - n_now) * self.pair_share) * self.rho
        return later / (1 + (self.size_now - 1) * self.rho)

    def labels_for(self, halfwidth_now: float, n_now: int, target: float, *, floor: float = 0.0) -> int | None:
        """Labels for a half-width of ``target`` when ``n_now`` labels give ``halfwidth_now``, of which
        ``floor`` (a half-width) is the part more labels do not change: solves
        ``(hw_now² − floor²) · (n_now / n) · growth(n) ≤ target² − floor²`` for n. None when no number of
        labels gets there (the clustering alone keeps the interval wider)."""
        if not (halfwidth_now > 0 and math.isfinite(halfwidth_now)) or n_now < 1 or target <= 0:
            return None
        part, room = halfwidth_now ** 2 - floor ** 2, target ** 2 - floor ** 2
        if room <= 0:
            return None
        if part <= 0:
            return n_now
        # growth(n) · n_now / n = (A / n + B) with A, B from the linear model of m above
        rho = self.rho or 0.0
        d_now = 1 + (self.size_now - 1) * rho
        a = (1 + (self.size_now - 1 - n_now * self.pair_share) * rho) * n_now / d_now
        b = self.pair_share * rho * n_now / d_now
        rest = room / part - b
        if rest <= 0:
            return None
        return max(2, math.ceil(max(a, 1e-12) / rest - 1e-9))

    def as_dict(self) -> dict[str, Any]:
        return {"clusters": self.groups, "design_effect": self.deff, "cluster_size": self.size_now,
                "icc": self.rho}


def design_of(labelled: Sequence[Any], every: Sequence[Any], *, deff: float) -> ClusterDesign:
    """The :class:`ClusterDesign` of labels in clusters ``labelled`` (one label per labelled record)
    among the run's records in clusters ``every`` (one per record, the labelled ones included), with the
    design effect ``deff`` measured on the labelled part."""
    from collections import Counter

    m = Counter(map(str, labelled))
    n = sum(m.values())
    size_now = sum(c * c for c in m.values()) / n if n else 1.0
    sizes = Counter(map(str, every))
    t = sum(sizes.values())
    pair_share = sum(c * (c - 1) for c in sizes.values()) / (t * (t - 1)) if t > 1 else 0.0
    rho = None
    if size_now > 1 and math.isfinite(deff):
        rho = min(1.0, max(0.0, (deff - 1) / (size_now - 1)))
    return ClusterDesign(len(m), float(deff), float(size_now), float(pair_share), rho)


def design_effect(values: Sequence[float], clusters: Sequence[Any]) -> float | None:
    """The clustered variance of the mean of ``values`` over its variance as if they were independent
    (both with their finite-sample corrections: G/(G−1) and n/(n−1)); None below two clusters or
    without spread.

    >>> design_effect([1, 1, 0, 0], ["a", "a", "b", "b"]) == 2 * (2 / 1) * (3 / 4)  # pairs alike, both corrections
    True
    """
    import numpy as np

    from ragexp.stats.intervals import units_of

    x = np.asarray(values, dtype=float)
    n = len(x)
    unit = units_of(clusters, n)
    g = int(unit.max()) + 1 if n else 0
    if g < 2 or n < 2:
        return None
    d = x - x.mean()
    iid = float(d @ d) / (n - 1) / n
    if iid <= 0:
        return None
    clustered = g / (g - 1) * float((np.bincount(unit, weights=d) ** 2).sum()) / n ** 2
    return clustered / iid
