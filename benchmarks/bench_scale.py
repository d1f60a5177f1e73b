"""Big runs: 50k / 100k / 200k (up to 1M) realistic records with the default suite, this tree against a baseline tree.

    git worktree add /work/base e33855c        # the baseline: any checkout of ragexp
    python benchmarks/bench_scale.py --base /work/base [--sizes 50000,100000,200000] [--cases evaluate] [--trees this]
    python benchmarks/bench_scale.py --base . --trees this --cases evaluate --sizes 50000,200000 --rounds 2

``--rounds N`` takes the sizes in turns N times (50k, 200k, 50k, 200k: every file written first), so a change in
the machine's load hits each size alike, and prints each round's CPU ratio of the largest size to the smallest
and, at the end, the median of each size's CPU and peak RSS and their ratios (docs/performance.md, "Scale").

Workload: benchmarks/realistic_records.py (SQuAD v2 questions, five retrieved paragraphs, a sentence
answer, references, ids, latency, label: ~5.6 KB of JSONL each); one JSONL file per size. Each case runs in its own
process (``PYTHONPATH`` = the tree), one after the other, baseline then this tree:

- ``evaluate``: ``ragexp.evaluate(path, log=False)``;
- ``cli-nolog``: ``python -m ragexp dataset=mapped … tracking.enabled=false`` (results folder only);
- ``cli-log``: the same run logged to a fresh SQLite store.

Printed per case: wall seconds, CPU seconds (user + system of the process and its children),
peak RSS (the largest of the process and its children, from ``getrusage``), for ``evaluate`` the
seconds (wall and CPU) from ``evaluate`` returning to the process's exit, and the disk the run left (the results folder, the store and its artifacts). It exits 1 unless every run scored every
record (``n_samples`` equal to the size) with the same metric values in both trees;
``--broken`` gives it a file with a missing query, so it must fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from realistic_records import write_records  # noqa: E402  (benchmarks/ is not a package)
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", HERE.parent / "shared" / "data")).resolve()

EVALUATE = r"""
import json, sys
import ragexp
import resource, time
out = ragexp.evaluate(sys.argv[1], log=False, progress=False)
cpu = sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))
print("RESULT " + json.dumps({"n": out.summary["n_samples"], "metrics": out.summary["metrics"], "returned": time.time(),
                              "cpu": cpu}), flush=True)
"""


def make_records(path: Path, n: int, broken: bool = False) -> None:
    write_records(path, n, broken=broken)


def disk(*paths: Path) -> int:
    """Bytes on disk (hard links counted once)."""
    seen, total = set(), 0
    for root in paths:
        for p in ([root] if root.is_file() else root.rglob("*") if root.exists() else []):
            if p.is_file() and not p.is_symlink():
                st = p.stat()
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    total += st.st_blocks * 512
    return total


def measure(cmd: list[str], tree: Path, cwd: Path) -> tuple[dict, str]:
    """Run ``cmd`` in a child that reports its own and its children's usage: wall, CPU, peak RSS."""
    probe = ("import json, resource, subprocess, sys, time\n"
             "t = time.perf_counter()\n"
             "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
             "wall = time.perf_counter() - t\n"
             "ended = time.time()\n"
             "u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
             "sys.stderr.write(p.stderr)\n"
             "print(p.stdout)\n"
             "print('USAGE ' + json.dumps({'rc': p.returncode, 'wall': wall, 'cpu': u.ru_utime + u.ru_stime, "
             "'rss_mb': u.ru_maxrss / 1024, 'ended': ended}))\n")
    env = {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    proc = subprocess.run([sys.executable, "-c", probe, *cmd], cwd=cwd, env=env, capture_output=True, text=True)
    usage = json.loads(next(l for l in proc.stdout.splitlines() if l.startswith("USAGE "))[6:])
    return usage, proc.stdout + proc.stderr


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def ratios(seen: dict[tuple[int, str, str], list[dict]], sizes: list[int], r: int | None = None) -> str:
    """Per case and tree, the largest size's CPU and peak RSS over the smallest's: in round ``r``, or of the
    rounds' medians (None)."""
    import statistics

    out = []
    for case, name in sorted({(c, t) for _, c, t in seen}):
        small, big = (seen.get((size, case, name), []) for size in (min(sizes), max(sizes)))
        if r is not None:
            small, big = small[r:r + 1], big[r:r + 1]
        if not small or not big or any(u["rc"] for u in small + big):
            continue
        cpu = [statistics.median(u["cpu"] for u in got) for got in (small, big)]
        rss = [statistics.median(u["rss_mb"] for u in got) for got in (small, big)]
        out.append(f"{case} {name}: {max(sizes):,} / {min(sizes):,} records: CPU {cpu[1]:.1f} / {cpu[0]:.1f} s = "
                   f"{cpu[1] / cpu[0]:.2f}x, peak RSS {rss[1]:.0f} / {rss[0]:.0f} MB = {rss[1] / rss[0]:.2f}x")
    return "; ".join(out) + f" (load {load()})"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True)
    ap.add_argument("--sizes", default="50000,100000,200000")
    ap.add_argument("--cases", default="evaluate,cli-nolog,cli-log")
    ap.add_argument("--trees", default="base,this", help="which trees to run (this alone: the logging RSS ratio)")
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("--rounds", type=int, default=1, help="the sizes taken in turns this many times")
    a = ap.parse_args()
    trees = {k: v for k, v in {"base": a.base.resolve(), "this": HERE}.items() if k in a.trees.split(",")}
    root = Path(tempfile.mkdtemp(prefix="bench_scale_"))
    problems: list[str] = []
    print(f"bench_scale: work in {root}; load average at start {load()}", flush=True)
    sizes = [int(x) for x in a.sizes.split(",")]
    for n in sizes:
        make_records(root / f"records_{n}.jsonl", n, a.broken)
    seen: dict[tuple[int, str, str], list[dict]] = {}  # (size, case, tree) → its rounds' figures
    for r, n in ((r, n) for r in range(a.rounds) for n in sizes):
        data = root / f"records_{n}.jsonl"
        figures: dict[tuple[str, str], dict] = {}
        for case in a.cases.split(","):
            for name, tree in trees.items():
                work = root / f"{n}_{case}_{name}_{r}"
                work.mkdir()
                if case == "evaluate":
                    cmd = [sys.executable, "-c", EVALUATE, str(data)]
                else:
                    cmd = [sys.executable, "-m", "ragexp", "dataset=mapped", f"dataset.path={data}", "progress=false",
                           f"data_dir={DATA}", "hydra.run.dir=out",
                           "tracking.enabled=false" if case == "cli-nolog" else f"tracking.uri=sqlite:///{work}/mlflow.db"]
                usage, out = measure(cmd, tree, work)
                usage["disk_mb"] = disk(work / "out", work / "mlflow.db", work / "mlruns") / 2 ** 20
                figures[(case, name)] = usage
                seen.setdefault((n, case, name), []).append(usage)
                if usage["rc"] != 0:
                    problems.append(f"{n} {case} {name}: exit {usage['rc']}: {out.strip().splitlines()[-1:]}")
                    continue
                if case == "evaluate":
                    result = json.loads(next(l for l in out.splitlines() if l.startswith("RESULT "))[7:])
                    usage["exit_s"], usage["exit_cpu"] = usage["ended"] - result["returned"], usage["cpu"] - result["cpu"]
                else:
                    result = json.loads((work / "out" / "summary.json").read_text())
                    result = {"n": result["n_samples"], "metrics": result["metrics"]}
                usage["metrics"] = {k: v for k, v in result["metrics"].items() if not k.startswith(("latency", "avg_latency"))}
                if result["n"] != n:
                    problems.append(f"{n} {case} {name}: scored {result['n']} records, not {n}")
                print(f"  {n:>7,} {case:<9} {name:<4}: {usage['wall']:7.1f} s wall, {usage['cpu']:7.1f} s CPU, "
                      f"peak RSS {usage['rss_mb']:6.0f} MB, disk {usage['disk_mb']:6.1f} MB"
                      + (f", exit {usage['exit_s']:.2f} s ({usage['exit_cpu']:.2f} s CPU)" if "exit_s" in usage else "") + f"; load {load()}", flush=True)
            b, t = figures.get((case, "base")), figures.get((case, "this"))
            if b and t and "metrics" in b and "metrics" in t:
                if b["metrics"] != t["metrics"]:
                    problems.append(f"{n} {case}: metric values differ from the baseline's")
                print(f"  {n:>7,} {case:<9} this/base: wall {t['wall'] / b['wall']:.2f}x, CPU {t['cpu'] / b['cpu']:.2f}x, "
                      f"RSS {t['rss_mb'] / b['rss_mb']:.2f}x, disk {t['disk_mb'] / max(b['disk_mb'], 1e-9):.2f}x",
                      flush=True)
        for name in trees:
            log, nolog = figures.get(("cli-log", name)), figures.get(("cli-nolog", name))
            if log and nolog and log["rc"] == nolog["rc"] == 0:
                print(f"  {n:>7,} {name}: CLI peak RSS with logging / without: {log['rss_mb'] / nolog['rss_mb']:.2f}x")
        if a.rounds > 1 and n == sizes[-1]:
            print(f"round {r + 1}: {ratios(seen, sizes, r)}", flush=True)
    if a.rounds > 1:
        print(f"medians of {a.rounds} rounds: {ratios(seen, sizes)}")
    print(f"load average at the end {load()}")
    for p in problems:
        print(f"bench_scale: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
