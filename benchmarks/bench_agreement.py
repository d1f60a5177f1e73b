"""Judge trust: do the agreement and PPI intervals cover, and what do they cost? (docs/judge-trust.md)

    python benchmarks/bench_agreement.py              # one core (BLAS threads pinned to 1 before numpy loads)
    python benchmarks/bench_agreement.py --sets 500   # fewer simulated label sets (the issue's minimum)

1. **κ coverage**: ``--sets`` simulated label sets of 200 items, people's 1 with probability 0.6, the
   judge agreeing with probability 0.85 on a 1 and 0.75 on a 0; the population κ is computed from that
   joint distribution (arithmetic below). The share of 95% intervals (1,000 bootstrap resamples each)
   holding it must lie in 95% ± 2%.
2. **PPI coverage**: ``--sets`` sets of 200 labelled and 2,000 unlabelled records, people's 1 with
   probability 0.7 and the same noisy judge; the share of 95% PPI++ intervals holding 0.7 must lie in
   95% ± 2%.
3. **A judge biased by +0.1**: the same, but the judge also says 1 on a share of people's zeros that
   lifts its mean by 0.1. The plain judge mean's 95% interval (Wilson, over all 2,200 records) must
   miss the truth in most sets (coverage under 50%) while the corrected one still covers (95% ± 2%).
4. **Cost**: ``judge_trust`` (agreement with 10,000 resamples, PPI, labels hint, disagreements) on
   100,000 records with 5 judge metrics (a binary, a 0–5 ordinal and three shares), 2,000 records
   labelled, CPU seconds of this one process (target ≤ 2 s); and once more with every record labelled.

Exits 1 when a coverage lies outside its band or the cost run did not compute the 5 metrics.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, before numpy is imported

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from ragexp.stats.agreement import judge_agreement  # noqa: E402
from ragexp.stats.intervals import mean_interval  # noqa: E402
from ragexp.stats.ppi import ppi_mean  # noqa: E402

P1, AGREE1, AGREE0 = 0.6, 0.85, 0.75


def population_kappa() -> float:
    po = P1 * AGREE1 + (1 - P1) * AGREE0
    judge1 = P1 * AGREE1 + (1 - P1) * (1 - AGREE0)
    pe = P1 * judge1 + (1 - P1) * (1 - judge1)
    return (po - pe) / (1 - pe)


def noisy_judge(rng, truth, bias: float = 0.0):
    judge = np.where(truth == 1, rng.random(len(truth)) < AGREE1, rng.random(len(truth)) >= AGREE0).astype(float)
    if bias:  # say 1 on enough of the judge's zeros to lift its mean by `bias`
        zeros = judge == 0
        judge[zeros & (rng.random(len(truth)) < bias / max(zeros.mean(), 1e-9))] = 1.0
    return judge


def kappa_coverage(sets: int, seed: int = 1) -> float:
    rng = np.random.default_rng(seed)
    truth_kappa = population_kappa()
    hits = 0
    for s in range(sets):
        human = (rng.random(200) < P1).astype(float)
        iv = judge_agreement("k", human, noisy_judge(rng, human), kind="binary", resamples=1000, seed=s).statistics["kappa"]
        hits += iv.ci_low <= truth_kappa <= iv.ci_high
    return hits / sets


def ppi_coverage(sets: int, bias: float = 0.0, seed: int = 2) -> tuple[float, float]:
    """(corrected coverage, plain judge mean's coverage) of the true mean 0.7."""
    rng = np.random.default_rng(seed)
    truth, n, big = 0.7, 200, 2000
    corrected = plain = 0
    for _ in range(sets):
        human = (rng.random(n + big) < truth).astype(float)
        judge = noisy_judge(rng, human, bias)
        c = ppi_mean(human[:n], judge[:n], judge[n:])
        corrected += c.ci_low <= truth <= c.ci_high
        iv = mean_interval(judge)
        plain += iv.ci_low <= truth <= iv.ci_high
    return corrected / sets, plain / sets


def cost(labelled: int, records: int = 100_000) -> tuple[float, int]:
    from ragexp.common.records import Record
    from ragexp.core.labels import judge_trust
    from ragexp.metrics.base import Score, load_all

    rng = np.random.default_rng(3)
    registry = load_all()

    class Spec:  # what judge_trust reads of a metric spec
        def __init__(self, key):
            self.key, self.info, self.options = key, registry[key], {}

    keys = ["answer_consistency_binary", "answer_similarity", "answer_consistency", "retrieval_precision",
            "augmentation_accuracy"]
    truth = {"answer_consistency_binary": (rng.random(records) < 0.7).astype(float),
             "answer_similarity": rng.integers(0, 6, records).astype(float),
             "answer_consistency": rng.integers(0, 5, records) / 4, "retrieval_precision": rng.integers(0, 4, records) / 3,
             "augmentation_accuracy": rng.integers(0, 6, records) / 5}
    judged = {"answer_consistency_binary": noisy_judge(rng, truth["answer_consistency_binary"]),
              "answer_similarity": np.clip(truth["answer_similarity"] + rng.integers(-1, 2, records), 0, 5)}
    for k in keys[2:]:
        judged[k] = np.clip(np.round(truth[k] + rng.normal(0, 0.2, records), 1), 0, 1)
    records_ = [Record(str(i), "q", human={k: float(truth[k][i]) for k in keys} if i < labelled else None)
                for i in range(records)]
    scores = {k: [Score(float(v), "ok", "scripted") for v in judged[k]] for k in keys}
    started = time.process_time()
    trust = judge_trust([Spec(k) for k in keys], scores, records_, resamples=10_000)
    return time.process_time() - started, len(trust["agreement"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sets", type=int, default=1000)
    args = parser.parse_args()
    ok = True

    def band(name: str, value: float, lo: float, hi: float) -> None:
        nonlocal ok
        good = lo <= value <= hi
        ok &= good
        print(f"{name:<58} {100 * value:6.1f}%  (band {100 * lo:g}-{100 * hi:g}%) {'ok' if good else 'OUT OF BAND'}")

    print(f"population κ of the simulated judge: {population_kappa():.4f}; {args.sets} label sets each")
    band("κ interval covers the population κ", kappa_coverage(args.sets), 0.93, 0.97)
    covered, plain = ppi_coverage(args.sets)
    band("PPI++ interval covers the true mean (unbiased judge)", covered, 0.93, 0.97)
    print(f"{'  (the plain judge mean covers it in)':<58} {100 * plain:6.1f}%")
    covered, plain = ppi_coverage(args.sets, bias=0.1)
    band("judge biased +0.1: PPI++ interval covers the true mean", covered, 0.93, 0.97)
    band("judge biased +0.1: the plain judge mean's interval covers", plain, 0.0, 0.5)
    for labelled in (2_000, 100_000):
        seconds, metrics = cost(labelled)
        good = metrics == 5
        ok &= good
        print(f"agreement + PPI + hint, 100,000 records × 5 judge metrics, {labelled:,} labelled: "
              f"{seconds:.2f} s CPU (target ≤ 2 s){'' if good else f'; only {metrics} metrics computed'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
