"""What the uncertainty of every aggregate costs a run (ragexp.stats.intervals).

    python benchmarks/bench_intervals.py --data-dir ../shared/data

1. Real runs through the runner's own steps (load → check → pipeline → score → aggregate →
   uncertainty): the demo (strong system, ``metric=default``) and SQuAD 2.0 with BM25 top-5 and
   the extractive generator; prints the time of scoring and of the uncertainty step.
2. Synthetic: N samples × M continuous metrics (and as many 0/1 ones), 10,000 resamples:
   ``mean_intervals`` (one shared draw, a matrix product) against a baseline in the same
   process — ``scipy.stats.bootstrap`` called once per metric, vectorised, percentile — and
   checks that both give intervals within resampling error of each other.

No timing is asserted; figures are printed. The script exits 1 unless it measured what it names:
every real run scored records and gave an interval to every aggregate, and the synthetic runs gave
all 2M intervals within half a standard error of scipy's (``--broken``: a run with no metric).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


PROBLEMS: list[str] = []


def real_runs(data_dir: Path, broken: bool = False) -> None:
    from hydra import compose, initialize_config_dir

    from ragexp.core.scoring import build_metrics, check_fields, score
    from ragexp.core.tally import tally_of
    from ragexp.pipeline import build_pipeline
    from ragexp.workflow.runner import load_dataset
    from ragexp.stats.settings import stats_settings
    from ragexp.common.paths import plain

    for overrides in (["dataset.system=strong"],
                      ["dataset=squad2", "retriever=bm25", "retriever.top_k=5", "generator=extractive"]):
        with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
            cfg = compose("config", overrides=[f"data_dir={data_dir}", *overrides,
                                               *(["metric=[hit_rate]", "dataset.limit=1"] if broken else [])])
        ds = load_dataset(cfg.dataset)
        records = ds.records
        specs, all_that_apply = build_metrics(cfg.metric, cfg.matcher)
        pipeline = build_pipeline(cfg, ds)
        produced = set(pipeline.produces) if pipeline else set()
        for r in records:
            for f in produced:
                setattr(r, f, None)
        specs, _ = check_fields(specs, records, ds.name, all_that_apply, provided=produced)
        if pipeline is not None:
            records = pipeline.run(records)
        t = time.perf_counter()
        scores = score(records, specs)
        tally = tally_of(specs, scores, records)
        tally.aggregate()
        t_score = time.perf_counter() - t
        settings = stats_settings(plain(cfg.get("stats")))
        times = []
        for _ in range(3):
            t = time.perf_counter()
            intervals = tally.intervals(**{k: settings[k] for k in ("resamples", "confidence", "seed", "method")})
            times.append(time.perf_counter() - t)
        with_ci = [k for k, iv in intervals.items() if iv.ci_low is not None]
        if not records or len(with_ci) < 5:
            PROBLEMS.append(f"{ds.name}: {len(records)} records, {len(with_ci)} of {len(intervals)} aggregates with "
                            "an interval: not the run this benchmark names")
        methods = {}
        for iv in intervals.values():
            methods[iv.method] = methods.get(iv.method, 0) + 1
        print(f"{ds.name} ({' '.join(overrides)}): {len(records)} records, {len(intervals)} intervals {methods}; "
              f"score+aggregate {t_score:.3f} s, uncertainty {min(times):.3f} s (best of 3, "
              f"{settings['resamples']:,} resamples) = {min(times) / t_score:.0%} of scoring")


def synthetic(n: int, m: int, resamples: int) -> None:
    from scipy import stats

    from ragexp.stats.intervals import mean_intervals

    rng = np.random.default_rng(0)
    cont = {f"c{j}": rng.beta(0.7, 1.5, size=n) for j in range(m)}
    binary = {f"b{j}": (rng.random(n) < 0.6).astype(float) for j in range(m)}
    t = time.perf_counter()
    ours = mean_intervals({**cont, **binary}, resamples=resamples)
    t_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = {k: stats.bootstrap((v,), np.mean, n_resamples=resamples, method="percentile", vectorized=True,
                              batch=max(1, 4_000_000 // n), random_state=rng).confidence_interval
           for k, v in cont.items()}
    t_ref = time.perf_counter() - t
    if len(ours) != 2 * m or any(ours[k].ci_low is None for k in ours):
        PROBLEMS.append(f"synthetic {n}: {len(ours)} intervals, not {2 * m}")
    worst = max(max(abs(ours[k].ci_low - ref[k].low), abs(ours[k].ci_high - ref[k].high)) / stats.sem(cont[k])
                for k in cont)
    print(f"synthetic {n:,} samples x {m} continuous + {m} 0/1 metrics, {resamples:,} resamples: "
          f"ragexp {t_ours:.3f} s (all {2 * m}); scipy.stats.bootstrap per metric {t_ref:.3f} s (the {m} continuous "
          f"ones only); ratio {t_ref / t_ours:.1f}x; largest CI-end gap {worst:.3f} standard errors")
    if not worst < 0.5:
        PROBLEMS.append(f"synthetic {n}: intervals {worst:.2f} standard errors from scipy's")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    parser.add_argument("--resamples", type=int, default=10_000)
    parser.add_argument("--broken", action="store_true", help="a run with one record and one 0/1 metric: must exit 1")
    args = parser.parse_args()
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    for n, m in ((50, 20), (300, 20), (3000, 20)):
        synthetic(n, m, args.resamples)
    real_runs(Path(args.data_dir).resolve(), args.broken)
    for problem in PROBLEMS:
        print(f"bench_intervals: FAILED: {problem}", file=sys.stderr)
    return 1 if PROBLEMS else 0


if __name__ == "__main__":
    sys.exit(main())
