"""Speed of a paired comparison: two runs of 10,000 samples × 40 metrics, 10,000 resamples.

    python benchmarks/bench_stats.py            # one core (BLAS threads pinned to 1 before numpy loads)
    python benchmarks/bench_stats.py --broken   # status columns no reader knows: must exit 1

Times, in this process:

1. the statistics alone — ``paired_compare_columns`` (bootstrap CIs of all 40 differences,
   permutation p-values, exact McNemar for the 0/1 metrics, MDE) plus ``holm``;
2. the whole ``compare_tables`` — pairing two per-sample tables by id, status checks, the
   statistics, Holm, verdicts, the most regressed samples;
3. the statistics over clusters (``stats.cluster_by``): the same values in 500 clusters of 20 samples
   (random sign patterns) and in 10 clusters of 1,000 (every pattern enumerated), against 1;
4. a plain-Python loop doing the same resampling one metric and one resample at a time. It
   is far too slow to run in full, so it runs a few resamples of two metrics and is
   extrapolated linearly (its cost is exactly proportional to resamples × metrics); the
   printed ratio says so.

Target: the whole comparison in ≤ 2 s on one core. The script exits 1 unless the comparison
found and compared all 40 metrics it was given (a benchmark that measured nothing says so).
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core, before numpy is imported

import random  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from ragexp.core.pairing import RunTable, compare_tables  # noqa: E402
from ragexp.results.columns import status_column  # noqa: E402
from ragexp.stats.paired import holm, paired_compare_columns  # noqa: E402

N, METRICS, BINARY, RESAMPLES = 10_000, 40, 10, 10_000


def make_runs(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Baseline and candidate values: 30 continuous metrics in [0, 1], 10 hit/miss metrics."""
    rng = np.random.default_rng(seed)
    b = rng.beta(2, 3, size=(N, METRICS))
    c = np.clip(b + rng.normal(0.005, 0.15, size=(N, METRICS)), 0, 1)
    b[:, -BINARY:] = rng.random((N, BINARY)) < 0.6
    c[:, -BINARY:] = rng.random((N, BINARY)) < 0.61
    return b, c


def as_table(name: str, values: np.ndarray, broken: bool = False) -> RunTable:
    keys = [f"metric{j:02d}" for j in range(METRICS)]
    status = (lambda k: f"{k}:status") if broken else status_column
    columns = ["id", "query", "answer"] + [c for k in keys for c in (k, status(k))]
    rows = []
    for i in range(N):
        row: list = [f"q{i}", f"question {i}", "an answer"]
        for j in range(METRICS):
            row += [float(values[i, j]), "ok"]
        rows.append(row)
    return RunTable(name=name, columns=columns, rows=rows, questions_digest="same")


def loop_seconds_per_metric_resample(b: np.ndarray, c: np.ndarray, resamples: int = 10, metrics: int = 2) -> float:
    """Plain Python: one bootstrap resample and one sign-flip resample of one metric, in seconds."""
    rnd = random.Random(0)
    started = time.perf_counter()
    for j in range(metrics):
        d = [float(y - x) for x, y in zip(b[:, j], c[:, j])]
        n = len(d)
        observed = sum(d) / n
        boot, extreme = [], 0
        for _ in range(resamples):
            boot.append(sum(d[rnd.randrange(n)] for _ in range(n)) / n)
            flipped = sum(x if rnd.random() < 0.5 else -x for x in d) / n
            extreme += abs(flipped) >= abs(observed)
        boot.sort()
    return (time.perf_counter() - started) / (resamples * metrics)


def timed(fn, repeats: int = 3) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``fn()``. On one thread CPU time is what an idle core would
    take; wall time also holds waits for a core on a busy machine (both are printed)."""
    walls, cpus, out = [], [], None
    for _ in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        out = fn()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), out


def measured(out: dict, stats: list) -> str | None:
    """Why the figures would be of nothing (None when both steps compared every metric)."""
    if len(stats) != METRICS:
        return f"the statistics compared {len(stats)} metrics, not the {METRICS} given"
    got = out.get("metrics") or {}
    compared = [k for k, r in got.items() if r.get("test")]
    if len(compared) != METRICS:
        return f"compare_tables compared {len(compared)} metrics, not the {METRICS} given ({sorted(got)[:5]}…)"
    return None


def main() -> int:
    b, c = make_runs()
    paired_compare_columns(b[:50], c[:50], resamples=100)  # scipy's import and first calls, not timed
    stats_s, stats_cpu, _ = timed(lambda: holm([r.p_value for r in paired_compare_columns(b, c, resamples=RESAMPLES)]))
    stats = paired_compare_columns(b[:200], c[:200], resamples=100)
    broken = "--broken" in sys.argv[1:]
    base, cand = as_table("baseline", b, broken), as_table("candidate", c, broken)
    whole_s, whole_cpu, out = timed(lambda: compare_tables(base, cand, resamples=RESAMPLES, min_match_fraction=1.0))
    clustered = {g: timed(lambda g=g: paired_compare_columns(b, c, clusters=np.arange(N) % g, resamples=RESAMPLES))
                 for g in (500, 10)}
    wrong = measured(out, stats)
    if wrong:
        print(f"bench_stats: measured nothing worth printing: {wrong}", file=sys.stderr)
        return 1
    cpu = time.process_time()
    per = loop_seconds_per_metric_resample(b, c)
    per_cpu = (time.process_time() - cpu) / 20
    loop_s = per * RESAMPLES * METRICS
    tests = {}
    for r in out["metrics"].values():
        tests[r["test"]] = tests.get(r["test"], 0) + 1
    print(f"paired comparison: {N:,} samples × {METRICS} metrics ({tests}), {RESAMPLES:,} resamples, one core")
    loop_cpu = per_cpu * RESAMPLES * METRICS
    print(f"  statistics (bootstrap CIs + permutation/McNemar p + MDE + Holm): {stats_cpu:.2f} s CPU, "
          f"{stats_s:.2f} s wall (medians of 3)")
    print(f"  whole compare_tables (pairing by id, statuses, statistics, Holm, regressions): {whole_cpu:.2f} s CPU, "
          f"{whole_s:.2f} s wall (medians of 3; target ≤ 2 s on one core)")
    for g, (wall, cpu_s, res) in clustered.items():
        print(f"  over {g} clusters ({res[0].test}): {cpu_s:.2f} s CPU, {wall:.2f} s wall (medians of 3): "
              f"{cpu_s / stats_cpu:.2f}× the unclustered statistics' CPU")
    print(f"  plain-Python loop baseline: {per_cpu * 1e3:.2f} ms CPU per metric·resample (measured on 10 resamples "
          f"× 2 metrics, EXTRAPOLATED to {RESAMPLES:,} × {METRICS}): {loop_cpu:,.0f} s CPU, {loop_s:,.0f} s wall")
    print(f"  ratio (CPU): vectorised statistics {loop_cpu / stats_cpu:,.0f}× faster than the loop; whole "
          f"comparison {loop_cpu / whole_cpu:,.0f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
