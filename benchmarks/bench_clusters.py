"""Clustered labels (stats.cluster_by): does the judge-corrected mean's interval cover, and is the labels
hint right? (docs/judge-trust.md, "How many labels?")

    python benchmarks/bench_clusters.py               # 400 simulated runs per label count
    python benchmarks/bench_clusters.py --runs 200

Each simulated run draws a fresh population shaped like ExpertQA's claims: 600 questions of 1-9 claims
(T ≈ 3,000 records), a question effect shared by its claims (people's verdict is 1 when effect + noise
> -0.5; the population mean is P(N(0, 1 + σ²) > -0.5)), and a judge that flips people's verdict on 20%
of the claims and on every claim of 15% of the questions. n labels are drawn at random among the
records, the rest keep the judge's value only.

1. **Coverage**: the share of clustered 95% intervals (``ppi_mean(clusters=question)``) holding the
   population mean at n = 150, 300, 600, 1,200 labels, beside the same intervals without clusters
   (which ignore that claims share questions).
2. **The labels hint**: for ±0.05, the hint given by runs with 300 labels (median and quartiles over the
   runs), against the labels actually needed: the n at which 1.96 × the estimator's standard deviation
   over the simulated runs (interpolated, log-log, between the label counts measured) reaches 0.05.
   The hint without clusters is shown beside it.

Exits 1 when the clustered coverage leaves 95% ± 2.5% at 300 labels or more, or the median clustered
hint is more than 20% off the labels needed.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, before numpy is imported

import argparse  # noqa: E402
import math  # noqa: E402
import sys  # noqa: E402
from statistics import NormalDist  # noqa: E402

import numpy as np  # noqa: E402

from ragexp.stats.ppi import ppi_mean  # noqa: E402

QUESTIONS, SIGMA, CUT, FLIP, FLIP_QUESTION = 600, 1.0, -0.5, 0.2, 0.15
TRUTH = 1 - NormalDist().cdf(CUT / math.sqrt(1 + SIGMA ** 2))
COUNTS = (150, 300, 600, 1200, 2000)
TARGET = 0.05


def population(rng):
    sizes = rng.integers(1, 10, size=QUESTIONS)
    cl = np.repeat(np.arange(QUESTIONS), sizes)
    effect = rng.normal(0, SIGMA, size=QUESTIONS)[cl]
    truth = (effect + rng.normal(0, 1, size=len(cl)) > CUT).astype(float)
    flip = (rng.random(len(cl)) < FLIP) | (rng.random(QUESTIONS) < FLIP_QUESTION)[cl]
    return truth, np.where(flip, 1 - truth, truth), cl


def one_run(rng, n):
    truth, judge, cl = population(rng)
    lab = np.zeros(len(cl), bool)
    lab[rng.choice(len(cl), size=min(n, len(cl) - 10), replace=False)] = True
    args = truth[lab], judge[lab], judge[~lab]
    clustered = ppi_mean(*args, clusters=list(cl[lab]) + list(cl[~lab]))
    return clustered, ppi_mean(*args)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=400)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(20261127)
    sd, bad = {}, []
    print(f"population mean {TRUTH:.4f}; {args.runs} runs per label count")
    print(f"{'labels':>7} {'sd':>7} {'clustered: covers':>18} {'mean ±':>7} {'plain: covers':>14} {'mean ±':>7}")
    hints: dict[str, list] = {"clustered": [], "plain": []}
    for n in COUNTS:
        est, cover, half, cover0, half0 = [], 0, [], 0, []
        for _ in range(args.runs):
            c, p = one_run(rng, n)
            est.append(c.mean)
            cover += c.ci_low <= TRUTH <= c.ci_high
            cover0 += p.ci_low <= TRUTH <= p.ci_high
            half.append((c.ci_high - c.ci_low) / 2), half0.append((p.ci_high - p.ci_low) / 2)
            if n == 300:
                hints["clustered"].append(c.labels_for(TARGET) or math.inf)
                hints["plain"].append(p.labels_for(TARGET) or math.inf)
        sd[n] = float(np.std(est, ddof=1))
        share = cover / args.runs
        print(f"{n:>7,} {sd[n]:>7.4f} {share:>18.1%} {np.mean(half):>7.3f} {cover0 / args.runs:>14.1%} "
              f"{np.mean(half0):>7.3f}")
        if n >= 300 and abs(share - 0.95) > 0.025:
            bad.append(f"clustered coverage {share:.1%} at {n} labels")
    z = NormalDist().inv_cdf(0.975)
    need = None
    for a, b in zip(COUNTS, COUNTS[1:]):
        if z * sd[a] >= TARGET >= z * sd[b]:  # log-log interpolation between the two counts
            t = math.log(z * sd[a] / TARGET) / math.log(sd[a] / sd[b])
            need = math.exp(math.log(a) + t * (math.log(b) - math.log(a)))
    print(f"labels actually needed for ±{TARGET}: {need:,.0f}" if need else "±0.05 not reached in the label counts")
    for kind, h in hints.items():
        q1, med, q3 = np.percentile(h, [25, 50, 75])
        off = f" ({med / need - 1:+.0%} off)" if need else ""
        print(f"hint from 300 labels, {kind:>9}: median {med:,.0f}{off}, quartiles {q1:,.0f}-{q3:,.0f}")
    med = float(np.median(hints["clustered"]))
    if need is None or abs(med / need - 1) > 0.2:
        bad.append(f"clustered hint {med:,.0f} vs needed {need}")
    for b in bad:
        print("FAIL:", b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
