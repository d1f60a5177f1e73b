"""What the default per-sample traces cost a small run: the demo's two-job sweep
(``python -m ragexp -m dataset.system=strong,weak``, 2 x 50 samples, all of them traces: the default cap of a
single run, ``tracking.sweep_traces=null`` so each job has it)
with traces (the default) and without (``tracking.traces=0``), CPU (user + sys of the process and its
threads) and wall, rounds taken in turns so a change in the machine's load hits both alike.

    python benchmarks/bench_trace_cpu.py [--rounds 3] [--code DIR ...]

``--code`` runs each checkout given (a ``git worktree`` of an older commit, this one by default) in the same
rounds, so a change is measured before/after in one session. Prints each run, then per checkout the median
CPU with and without traces, their ratio, and the CPU a trace costs ((with - without) / 100); the load
average before and after. Nothing is asserted: docs/performance.md, "Traces", has the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_traces import timed_run  # noqa: E402

SWEEP = ["-m", "dataset.system=strong,weak", "progress=false", "tracking.plots=false", "tracking.sweep_traces=null"]
TRACES = 100  # 2 jobs x 50 demo samples, every one a trace at the default cap


def one(code: Path, traces: bool, root: Path) -> tuple[float, float]:
    """One sweep run by checkout ``code`` in a fresh folder (its own SQLite store): CPU and wall seconds."""
    work = Path(tempfile.mkdtemp(dir=root))
    env = {**os.environ, "PYTHONPATH": str(code), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    found = subprocess.run([sys.executable, "-c", "import ragexp; print(ragexp.__file__)"], env=env,
                           capture_output=True, text=True).stdout.strip()
    if not found.startswith(str(code)):
        raise SystemExit(f"PYTHONPATH={code} imports ragexp from {found}")
    args = [sys.executable, "-m", "ragexp", *SWEEP, *([] if traces else ["tracking.traces=0"])]
    cpu, wall, _ = timed_run(args, work, env, str(code))
    return cpu, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--code", nargs="*", type=Path, default=[HERE.parent])
    args = ap.parse_args()
    load0 = os.getloadavg()
    cpu: dict[tuple[Path, bool], list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for code in args.code:
                for traces in (True, False):
                    c, w = one(code.resolve(), traces, Path(tmp))
                    cpu.setdefault((code, traces), []).append(c)
                    print(f"round {r + 1} {code} traces={'default' if traces else 0}: CPU {c:.2f} s, wall {w:.2f} s, "
                          f"load {os.getloadavg()[0]:.1f}", flush=True)
    for code in args.code:
        on, off = statistics.median(cpu[(code, True)]), statistics.median(cpu[(code, False)])
        print(f"{code}: median CPU with traces {on:.2f} s, without {off:.2f} s, ratio {on / off:.2f}x, "
              f"{(on - off) / TRACES * 1000:.0f} ms CPU a trace")
    print(f"load average before {load0[0]:.1f} {load0[1]:.1f}, after {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f}")


if __name__ == "__main__":
    main()
