"""How fast the ``implementation: rouge_package`` ROUGE matcher is, against continuous-eval's own
way of deciding (a loop calling the ``rouge`` package) in the same process.

    python benchmarks/bench_rouge_package.py [--data-dir ../shared/data] [--records 2000] [--baseline 100]

Workload: SQuAD v2 questions with their top-10 BM25 paragraphs (the same workload as
``bench_metrics.py``), the gold paragraph as ground truth. Prints, for the chunk matcher at
continuous-eval's settings (ROUGE-L recall >= 0.7):

1. ragexp's matcher, empty caches at the start: records per second over ``--records`` records;
2. the package loop (``Rouge().get_scores(retrieved, gt, ignore_empty=True)[0]["rouge-l"]["r"] >= 0.7``
   for every retrieved passage and ground truth, exceptions as no match) over the first
   ``--baseline`` records: records per second, the ratio, and a check that every precision and
   recall is identical.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))


def _package_relation(rouge, retrieved, truths, threshold=0.7):
    def relevant(r, g):
        try:
            return rouge.get_scores(r, g, ignore_empty=True)[0]["rouge-l"]["r"] >= threshold
        except Exception:  # noqa: BLE001 - continuous-eval's rule: any failure is no match
            return False

    distinct = list(dict.fromkeys(truths))
    hit, matching = set(), 0
    for r in retrieved:
        found = {j for j, g in enumerate(distinct) if relevant(r, g)}
        matching += bool(found)
        hit |= found
    return matching / len(retrieved), len(hit) / len(distinct)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data"))
    ap.add_argument("--records", type=int, default=2000)
    ap.add_argument("--baseline", type=int, default=100)
    args = ap.parse_args()

    from rouge import Rouge

    from bench_metrics import build_workload
    from ragexp.matchers import build_matcher

    records = build_workload(Path(args.data_dir))[: args.records]
    matcher = build_matcher({"name": "rouge_chunk", "threshold": 0.7, "inclusive": True, "implementation": "rouge_package"})
    t0 = time.perf_counter()
    ours = []
    for rec in records:
        m = matcher.match(rec.contexts, rec.gt_contexts)
        ours.append((m.precision(), m.recall()))
    t_ours = time.perf_counter() - t0

    rouge = Rouge()
    n = min(args.baseline, len(records))
    t0 = time.perf_counter()
    theirs = [_package_relation(rouge, rec.contexts, rec.gt_contexts) for rec in records[:n]]
    t_pkg = time.perf_counter() - t0

    same = sum(a == b for a, b in zip(ours[:n], theirs))
    rate_ours, rate_pkg = len(records) / t_ours, n / t_pkg
    print(f"rouge_package matcher : {len(records)} records in {t_ours:.2f} s = {rate_ours:,.0f} records/s")
    print(f"rouge package loop    : {n} records in {t_pkg:.2f} s = {rate_pkg:,.1f} records/s")
    print(f"ratio                 : {rate_ours / rate_pkg:,.0f}x; identical precision and recall on {same} of {n} records")
    if n < 1 or same != n:
        print(f"bench_rouge_package: FAILED: identical on {same} of {n} records compared", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
