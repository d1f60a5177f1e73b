"""How fast ``ragexp.evaluate(df, log=False)`` is on 1,000 records, against the bare metric loop.

    python benchmarks/bench_api.py [--data-dir ../shared/data] [--repeats 5]

Workload: HaluEval QA's 500 items as its 1,000 records (each item's right and hallucinated
answer, labelled), as a pandas DataFrame with foreign column names — ``full``: every field the
adapter gives (query, knowledge passage as contexts and ground truth, answer, reference, label:
42 metric keys of the ``default`` suite); ``answers``: only question, response and reference
(the answer metrics and keyword overlap, 7 keys). For each, in this one process:

1. the first ``evaluate`` call (config composition, the metric modules' lazy imports and jieba's
   dictionary load included; ``import ragexp, pandas`` and reading the data not);
2. the median of ``--repeats`` further calls, split into the runner's steps (score, uncertainty:
   the intervals of every aggregate at ``stats.resamples``, the rest: composition, reading the
   frame, summary, per-sample table, result);
3. the baseline: the same metrics through ``build_metrics → check_fields → score → aggregate``
   alone (what ``bench_metrics.py`` times), median of the same number of calls; and evaluate
   with ``stats={"resamples": 1000}`` to show what the bootstrap costs.

Prints records per second and the ratio of each to the baseline, from wall time and from this
process's CPU time (on a machine shared with other jobs, CPU time is what an idle machine's wall
time would be: one thread, ``OMP_NUM_THREADS=1``). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[1]
FOREIGN = {"query": "question", "contexts": "knowledge", "gt_contexts": "gold_passages", "answer": "response",
           "reference_answers": "truth", "label": "human_label"}


def workload(data_dir: Path):
    import pandas as pd

    from ragexp.datasets.halueval import load_halueval

    records = load_halueval(str(data_dir / "halueval" / "qa_one-turn_data.json")).records
    rows = [{FOREIGN.get(k, k): v for k, v in r.to_dict().items() if k != "extra"} for r in records]
    full = pd.DataFrame(rows)
    answers = full[["id", "question", "response", "truth"]].copy()
    return {"full": (full, FOREIGN), "answers": (answers, {k: FOREIGN[k] for k in ("query", "answer",
                                                                                     "reference_answers")})}


class Steps:
    """Wall time of the runner's score and uncertainty steps within each call."""

    def __init__(self):
        from ragexp import runner

        self.times: dict[str, float] = {}
        for name in ("score_step", "uncertainty_step"):
            original = getattr(runner, name)

            def timed(*args, _original=original, _name=name, **kwargs):
                t = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.times[_name] = self.times.get(_name, 0.0) + time.perf_counter() - t

            setattr(runner, name, timed)


def bare_scoring(frame, columns) -> tuple[float, float]:
    """The metrics alone over the same records (no config composition, no intervals, no tables)."""
    from ragexp.api import _compose
    from ragexp.datasets.mapped import load_in_memory
    from ragexp.scoring import aggregate, build_metrics, check_fields, score

    cfg = _compose(("dataset=mapped",))
    records = load_in_memory(frame, columns=columns).records
    clock = Clock()
    specs, all_that_apply = build_metrics(cfg.metric, cfg.matcher)
    specs, _ = check_fields(specs, records, "halueval", all_that_apply)
    scores = score(records, specs)
    aggregate(specs, scores, records)
    return clock.stop()


class Clock:
    """Wall and CPU seconds since it was made."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _median(pairs) -> tuple[float, float]:
    pairs = list(pairs)
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import ragexp

    loads = workload(args.data_dir)
    steps = Steps()
    print(f"ragexp.evaluate(df, log=False), HaluEval 1,000 records, {args.repeats} repeats, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; figures: wall / CPU")
    for name, (frame, columns) in loads.items():
        n = len(frame)

        def call(**options):
            clock = Clock()
            result = ragexp.evaluate(frame, columns=columns, log=False, **options)
            return clock.stop(), result

        steps.times.clear()
        first, result = call()
        keys = len(result.metrics)
        runs, parts = [], []
        for _ in range(args.repeats):
            steps.times.clear()
            runs.append(call()[0])
            parts.append(dict(steps.times))
        wall, cpu = _median(runs)
        score_s = statistics.median(p["score_step"] for p in parts)
        unc_s = statistics.median(p["uncertainty_step"] for p in parts)
        few = _median(call(stats={"resamples": 1000})[0] for _ in range(args.repeats))
        bare = _median(bare_scoring(frame, columns) for _ in range(args.repeats))

        def line(label, t):
            return (f"  {label:<22}{t[0]:6.3f} / {t[1]:5.3f} s  {n / t[0]:7,.0f} / {n / t[1]:7,.0f} rec/s")

        print(f"\n{name}: {n} records, {keys} aggregate keys")
        print(line("first call", first))
        print(line("evaluate (median)", (wall, cpu)) + f"  = {wall / bare[0]:4.2f}x / {cpu / bare[1]:4.2f}x the bare metrics")
        print(f"    score step          {score_s:6.3f} s wall")
        print(f"    uncertainty step    {unc_s:6.3f} s wall (10,000 resamples)")
        print(f"    the rest            {wall - score_s - unc_s:6.3f} s wall (compose, read the frame, summary, tables)")
        print(line("resamples=1000", few))
        print(line("baseline: bare metrics", bare))
    return 0


if __name__ == "__main__":
    sys.exit(main())
