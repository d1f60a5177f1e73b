"""What logging every sample as an MLflow trace costs: a 10,000-record run with traces off, at the
default cap (``tracking.traces`` in conf/tracking/local.yaml), at other caps (a number as a mode) and for
every sample (``all``).

    python benchmarks/bench_traces.py [--n 10000] [--modes off,default,1000,all] [--out DIR]

Workload: ``benchmarks/realistic_records.py``'s records (SQuAD v2 questions, five retrieved paragraphs,
a ground-truth paragraph, an answer sentence, references, a label), ``python -m ragexp dataset=records``
with the default metric suite (38 metric keys), each mode in a fresh process and a fresh SQLite store.
For each: wall time and CPU of the process, its peak RSS (``ru_maxrss`` of the child), the store's size
(``mlflow.db`` and ``mlruns/``), and how many traces the run has (``ragexp.traces`` tag). Ratios are
against ``off`` in the same invocation. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from realistic_records import write_records  # noqa: E402

MODES = {"off": "tracking.traces=0", "default": None, "all": "tracking.traces=null"}


def size_of(folder: Path) -> int:
    """Bytes of the store: the SQLite file and the artifact folder."""
    total = 0
    for name in ("mlflow.db", "mlruns"):
        p = folder / name
        if p.is_file():
            total += p.stat().st_size
        elif p.is_dir():
            total += sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
    return total


def timed_run(args: list[str], cwd: Path, env: dict, name: str) -> tuple[float, float, float]:
    """CPU seconds (user + system), wall seconds and peak RSS (MB, the largest child's so far) of one child
    process; its stderr's end if it fails."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: exit {proc.returncode}\n{proc.stderr[-3000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall, after.ru_maxrss / 1024


def one(mode: str, data: Path, root: Path) -> dict:
    """One run of ``mode`` in its own folder and store; its figures."""
    work = root / mode
    work.mkdir()
    args = [sys.executable, "-m", "ragexp", "dataset=records", f"dataset.path={data}", "progress=false",
            "tracking.plots=false", f"tracking.uri=sqlite:///{work / 'mlflow.db'}"]
    setting = MODES[mode] if mode in MODES else f"tracking.traces={mode}"  # a number: that cap
    if setting:
        args.append(setting)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cpu, wall, rss_mb = timed_run(args, work, env, mode)
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{work / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragexp")
    run = client.search_runs([exp.experiment_id])[0]
    return {"mode": mode, "wall": wall, "cpu": cpu, "rss_mb": rss_mb, "store_mb": size_of(work) / 1e6,
            "traces": run.data.tags.get("ragexp.traces", "0"), "failed": run.data.tags.get("ragexp.traces_failed")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--modes", default="off,default,all")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs' folders here (default: a temporary one)")
    a = ap.parse_args()
    root = Path(a.out or tempfile.mkdtemp(prefix="bench_traces_"))
    root.mkdir(parents=True, exist_ok=True)
    data = write_records(root / "records.jsonl", a.n)
    print(f"{a.n} records in {data}; load average {os.getloadavg()[0]:.1f}")
    rows = []
    for mode in a.modes.split(","):
        rows.append(_isolated(mode, data, root))
        r = rows[-1]
        print(f"{r['mode']:8} wall {r['wall']:7.1f} s  cpu {r['cpu']:7.1f} s  peak RSS {r['rss_mb']:7.0f} MB  "
              f"store {r['store_mb']:7.1f} MB  traces {r['traces']}  {r['failed'] or ''}", flush=True)
    base = rows[0]
    for r in rows[1:]:
        print(f"{r['mode']} / {base['mode']}: wall {r['wall'] / base['wall']:.2f}x  cpu {r['cpu'] / base['cpu']:.2f}x  "
              f"RSS {r['rss_mb'] / base['rss_mb']:.2f}x  store {r['store_mb'] / base['store_mb']:.1f}x")


def _isolated(mode: str, data: Path, root: Path) -> dict:
    """``one`` in a fresh Python process, so the peak RSS read is this run's alone."""
    import json

    code = (f"import sys, json; sys.path.insert(0, {str(HERE)!r}); import bench_traces as b; "
            f"print(json.dumps(b.one({mode!r}, b.Path({str(data)!r}), b.Path({str(root)!r}))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    main()
