"""What a user waits for before ragexp does anything, and what a short run costs end to end.

    python benchmarks/bench_startup.py            # 5 fresh processes per case (--repeat N)

Each case is a fresh ``python`` subprocess, timed wall-clock from start to exit; the cases are run
round-robin (one of each, then the next round) so a change in the machine's load touches all of
them alike, and the median of each is printed with its ratio to the two baselines measured in the
same rounds:

- ``python -c "pass"`` (the interpreter alone) and ``python -c "import mlflow"`` (MLflow's import);
- ``python -m ragexp --help``;
- the demo run (``python -m ragexp``: the bundled demo data, every deterministic metric, logging on)
  into an existing ``mlflow.db`` (the second and later runs), and into a fresh folder (the first
  run, which creates the store's schema);
- the demo run without the run's two pictures (``tracking.plots=false``: no matplotlib);
- the demo run without logging (``tracking.enabled=false``: no MLflow anywhere, the results folder
  still written): the run without MLflow.

Then ``ragexp.evaluate(df, log=False)`` on 1,000 demo-like records (the 50 demo records of the
``strong`` system repeated 20 times with their own ids; the default suite) in a fresh process:
records per second of the call, including its own overhead (composing the config, jieba's
dictionary, the intervals), and of a second call in the same process. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
ENV.pop("MLFLOW_TRACKING_URI", None)

EVALUATE = r"""
import json, sys, time
t0 = time.perf_counter()
import ragexp
from ragexp.datasets.demo import load_demo
records = load_demo(system="strong").records
rows = []
for copy in range(20):
    for r in records:
        row = {f: getattr(r, f) for f in ("id", "query", "contexts", "context_ids", "gt_contexts", "gt_context_ids",
                                          "answer", "reference_answers", "label", "latency_s", "timings")
               if r.has(f)}
        row["id"] = f"{row.get('id')}-{copy}"
        rows.append(row)
import pandas as pd
df = pd.DataFrame(rows)
t1 = time.perf_counter()
result = ragexp.evaluate(df, log=False, progress=False)
t2 = time.perf_counter()
again = ragexp.evaluate(df, log=False, progress=False)
t3 = time.perf_counter()
print(json.dumps({"n": len(result.per_sample), "prepare_s": t1 - t0, "first_s": t2 - t1, "second_s": t3 - t2}))
"""


def _timed(cmd: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one fresh process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    took = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5, help="fresh processes per case (the median is printed)")
    args = ap.parse_args()
    py = sys.executable
    work = Path(tempfile.mkdtemp(prefix="ragexp_bench_startup_"))
    existing = work / "existing"
    existing.mkdir()
    _timed([py, "-m", "ragexp", "progress=false"], existing, ENV)  # the store the "existing" cases log into
    cases: dict[str, tuple[list[str], str | None, dict[str, str]]] = {
        'python -c "pass"': ([py, "-c", "pass"], None, ENV),
        'python -c "import mlflow"': ([py, "-c", "import mlflow"], None, ENV),
        "python -m ragexp --help": ([py, "-m", "ragexp", "--help"], None, ENV),
        "demo run, existing store": ([py, "-m", "ragexp", "progress=false"], "existing", ENV),
        "demo run, fresh store": ([py, "-m", "ragexp", "progress=false"], "fresh", ENV),
        "demo run, existing store, no plots": ([py, "-m", "ragexp", "progress=false", "tracking.plots=false"],
                                               "existing", ENV),
        "demo run, no logging": ([py, "-m", "ragexp", "progress=false", "tracking.enabled=false"], "fresh", ENV),
    }
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpu: dict[str, list[float]] = {name: [] for name in cases}
    print(f"load average before: {os.getloadavg()[0]:.2f} ({os.cpu_count()} cores); {args.repeat} rounds")
    for i in range(args.repeat):
        for name, (cmd, where, env) in cases.items():
            if where == "fresh":
                cwd = Path(tempfile.mkdtemp(prefix="fresh_", dir=work))
            else:
                cwd = existing if where == "existing" else work
            wall, used = _timed(cmd, cwd, env)
            times[name].append(wall)
            cpu[name].append(used)
    print(f"load average after: {os.getloadavg()[0]:.2f}\n")
    median = {name: statistics.median(ts) for name, ts in times.items()}
    base, mlflow = median['python -c "pass"'], median['python -c "import mlflow"']
    print(f"{'case (wall-clock; fresh store = the first run)':<48} {'median s':>9} {'min s':>7} {'max s':>7} "
          f"{'÷ import mlflow':>16} {'÷ pass':>8} {'CPU s':>6}")
    for name, ts in times.items():
        print(f"{name:<48} {median[name]:>9.2f} {min(ts):>7.2f} {max(ts):>7.2f} {median[name] / mlflow:>16.2f} "
              f"{median[name] / base:>8.1f} {statistics.median(cpu[name]):>6.2f}")

    import json

    try:
        import ragexp

        has_evaluate = callable(getattr(ragexp, "evaluate", None))
    except ImportError:
        has_evaluate = False
    if not has_evaluate:
        print("\nragexp.evaluate is not there yet: no records/s figure")
        return
    rates = []
    for _ in range(max(1, args.repeat // 2)):
        out = subprocess.run([py, "-c", EVALUATE], cwd=work, env=ENV, capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"ragexp.evaluate failed:\n{out.stderr[-2000:]}")
        rates.append(json.loads(out.stdout.strip().splitlines()[-1]))
    first = statistics.median(r["n"] / r["first_s"] for r in rates)
    second = statistics.median(r["n"] / r["second_s"] for r in rates)
    prep = statistics.median(r["prepare_s"] for r in rates)
    print(f"\nragexp.evaluate(df, log=False), {rates[0]['n']:,} demo-like records, default suite, "
          f"median of {len(rates)} fresh processes:")
    first_s = statistics.median(r["first_s"] for r in rates)
    print(f"  first call in the process: {first:,.0f} records/s (its own overhead included: {first_s:.2f} s)")
    print(f"  second call:               {second:,.0f} records/s")
    print(f"  (import ragexp, pandas and building the frame before the call: {prep:.2f} s)")


if __name__ == "__main__":
    main()
