"""Sweeps on SQuAD, this tree against a baseline tree, in the same run.

    git worktree add /work/base e33855c        # the baseline: any checkout of ragexp
    python benchmarks/bench_sweep.py --base /work/base [--dense] [--retriever-sweep]

Workload: SQuAD v2's 2,910 answerable questions, ``chunker=words``, the default metric suite.

1. The 12-job BM25 sweep ``retriever.top_k=3,5,10 × retriever.k1=0.9,1.2,1.5,1.8`` through
   ``python -m ragexp -m`` (one process, Hydra's basic launcher, logging to a fresh SQLite store),
   baseline and this tree in turn: wall seconds, and the sweep's own overhead (launch → first job's
   start, last job's logging → exit; read from the job folders' file times).
2. The same 12 jobs in one Python process through ``ragexp.workflow.runner.execute``, each step timed
   (the runner's own step functions wrapped by name): per-job phases retrieve, embed (summed over
   the queries' ``timings``), score, intervals, save, log.
3. ``--dense``: three dense jobs (``retriever.top_k=3,5,10``) the same way, after one untimed job
   that builds the index (and, in this tree, the query vectors): warm jobs.
4. ``--retriever-sweep``: ``+experiment=retriever_sweep`` (27 jobs, 300 questions) in this tree,
   once to fill the caches, then warm (timed).

It exits 1 unless every sweep ran the jobs it planned (12 / 3 / 27 finished child runs under one
parent, 2,910 samples a job) and every metric value except latencies and index timings is
identical between the two trees; ``--broken`` feeds it a sweep value Hydra refuses, so it must fail.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", HERE.parent / "shared" / "data")).resolve()
BM25 = ["retriever=bm25", "retriever.top_k=3,5,10", "retriever.k1=0.9,1.2,1.5,1.8"]
DENSE = ["retriever=dense", "retriever.top_k=3,5,10"]
COMMON = ["dataset=squad2", "chunker=words", "progress=false"]

#: run in the tree's own interpreter: every job's steps timed, one line of JSON per job
DRIVER = r"""
import json, sys, time
from hydra import compose, initialize_config_dir
from ragexp.workflow import runner as R
args = json.loads(sys.argv[1])
phase = {}
def timed(name, fn):
    def wrapped(*a, **k):
        t0 = time.perf_counter()
        try:
            return fn(*a, **k)
        finally:
            phase[name] = phase.get(name, 0.0) + time.perf_counter() - t0
    return wrapped
for step, name in (("pipeline_step", "pipeline"), ("score_step", "score"), ("uncertainty_step", "intervals"),
                   ("save_step", "save"), ("log_step", "log")):
    setattr(R, step, timed(name, getattr(R, step)))
for job in args["jobs"]:
    with initialize_config_dir(config_dir=args["conf"], version_base="1.3"):
        cfg = compose(config_name="config", overrides=args["common"] + job)
    phase.clear()
    t0 = time.perf_counter()
    out = R.execute(cfg, show=False)
    wall = time.perf_counter() - t0
    stage = {s: sum((r.timings or {}).get(s, 0.0) for r in out.records) for s in ("retrieve", "embed")}
    metrics = {k: v for k, v in out.summary["metrics"].items() if not k.startswith(("latency", "avg_latency"))}
    print(json.dumps({"job": job, "wall": wall, "n": out.summary["n_samples"], **stage, **phase,
                      "metrics": metrics}), flush=True)
"""


def env_for(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "LITELLM_LOCAL_MODEL_COST_MAP": "True", "RAGEXP_DATA_DIR": str(DATA)}


def expand(grid: list[str]) -> list[list[str]]:
    jobs: list[list[str]] = [[]]
    for item in grid:
        key, _, values = item.partition("=")
        jobs = [job + [f"{key}={v}"] for job in jobs for v in values.split(",")]
    return jobs


def cli_sweep(tree: Path, work: Path, grid: list[str], extra: list[str] | None = None) -> dict:
    """``python -m ragexp -m`` in ``work``: wall seconds, overhead, finished children and their metrics."""
    uri = f"sqlite:///{work / 'mlflow.db'}"
    args = [sys.executable, "-m", "ragexp", "-m", *(extra or COMMON), f"data_dir={DATA}", f"tracking.uri={uri}",
            f"hydra.sweep.dir={work / 'multirun' / str(time.time_ns())}", *grid]
    t0 = time.time()
    proc = subprocess.run(args, cwd=work, env=env_for(tree), capture_output=True, text=True)
    t1 = time.time()
    if proc.returncode != 0:
        raise SystemExit(f"bench_sweep: {tree}: the sweep exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    sweep = Path(args[-len(grid) - 1].split("=", 1)[1])
    starts = [p.stat().st_mtime for p in sweep.glob("*/.hydra/config.yaml")]
    ends = [p.stat().st_mtime for p in sweep.glob("*/mlflow_run.json")]
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("ragexp")
    found = client.search_runs([exp.experiment_id], max_results=1000)
    children = {r.info.run_name: r for r in found if "mlflow.parentRunId" in r.data.tags}
    finished = [r for r in children.values() if r.info.status == "FINISHED"]
    timing = ("latency", "avg_latency", "index/", "pipeline/")  # seconds: they differ on every run
    metrics = {name: {k: v for k, v in r.data.metrics.items() if not k.startswith(timing)}
               for name, r in children.items()}
    return {"wall": t1 - t0, "before_first": min(starts) - t0 if starts else None,
            "after_last": t1 - max(ends) if ends else None, "finished": len(finished), "metrics": metrics,
            "parents": len(found) - len(children)}


def in_process(tree: Path, work: Path, grid: list[str]) -> list[dict]:
    uri = f"sqlite:///{work / 'inproc.db'}"
    payload = {"conf": str(tree / "conf"), "jobs": expand(grid),
               "common": [*COMMON, f"data_dir={DATA}", f"tracking.uri={uri}"]}
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(payload)], cwd=work, env=env_for(tree),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench_sweep: {tree}: the in-process jobs failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def phases_table(label: str, jobs: list[dict]) -> None:
    cols = ("wall", "retrieve", "embed", "score", "intervals", "save", "log")
    print(f"  {label}: per-job medians over {len(jobs)} jobs (s): " + ", ".join(
        f"{c} {statistics.median(j.get(c, 0.0) for j in jobs):.2f}" for c in cols))


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True, help="a checkout of the baseline (e.g. git worktree)")
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--retriever-sweep", action="store_true")
    ap.add_argument("--broken", action="store_true", help="a sweep value Hydra refuses: the script must exit 1")
    ap.add_argument("--skip-cli", action="store_true")
    a = ap.parse_args()
    trees = {"base": a.base.resolve(), "this": HERE}
    grid = BM25 + (["retriever.k1=oops"] if a.broken else [])
    problems: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="bench_sweep_"))
    print(f"bench_sweep: work in {root}; load average at start {load()}")
    cli, inproc = {}, {}
    for name, tree in trees.items():  # one after the other, then compared: ratios in the same run
        work = root / name
        work.mkdir()
        if not a.skip_cli:
            cli[name] = cli_sweep(tree, work, grid)
            print(f"  {name}: 12-job BM25 sweep (CLI) {cli[name]['wall']:.1f} s wall; before the first job "
                  f"{cli[name]['before_first']:.1f} s, after the last {cli[name]['after_last']:.1f} s; "
                  f"load {load()}", flush=True)
        inproc[name] = in_process(tree, work, grid)
        phases_table(f"{name} BM25", inproc[name])
    for name in trees:
        if not a.skip_cli and (cli[name]["finished"] != 12 or cli[name]["parents"] != 1):
            problems.append(f"{name}: the CLI sweep finished {cli[name]['finished']} of 12 jobs "
                            f"under {cli[name]['parents']} parent run(s)")
        if len(inproc[name]) != 12 or any(j["n"] != 2910 for j in inproc[name]):
            problems.append(f"{name}: {len(inproc[name])} in-process jobs ran, not 12 of 2,910 samples")
    if not a.skip_cli and cli["base"]["metrics"] != cli["this"]["metrics"]:
        differ = [n for n in cli["base"]["metrics"] if cli["base"]["metrics"][n] != cli["this"]["metrics"].get(n)]
        problems.append(f"metric values differ from the baseline's in {len(differ)} jobs, e.g. {differ[:2]}")
    if [j["metrics"] for j in inproc["base"]] != [j["metrics"] for j in inproc["this"]]:
        problems.append("the in-process jobs' metric values differ from the baseline's")
    if not a.skip_cli and not problems:
        b, t = cli["base"], cli["this"]
        print(f"BM25 sweep: {t['wall']:.1f} s vs {b['wall']:.1f} s = {t['wall'] / b['wall']:.2f}x the baseline's "
              f"wall; sweep overhead {t['before_first'] + t['after_last']:.1f} s vs "
              f"{b['before_first'] + b['after_last']:.1f} s; every metric of the 12 jobs identical")
    if a.dense:
        dense = {}
        for name, tree in trees.items():
            in_process(tree, root / name, ["retriever=dense", "retriever.top_k=5"])  # builds the caches
            dense[name] = in_process(tree, root / name, DENSE)
            phases_table(f"{name} dense (warm)", dense[name])
            if len(dense[name]) != 3:
                problems.append(f"{name}: {len(dense[name])} dense jobs ran, not 3")
        if [j["metrics"] for j in dense["base"]] != [j["metrics"] for j in dense["this"]]:
            problems.append("the dense jobs' metric values differ from the baseline's")
        elif len(dense["base"]) == 3:
            b = statistics.median(j["wall"] for j in dense["base"])
            t = statistics.median(j["wall"] for j in dense["this"])
            print(f"warm dense job: {t:.1f} s vs {b:.1f} s = {t / b:.2f}x the baseline's (median of 3); metrics "
                  f"identical; load {load()}")
    if a.retriever_sweep:
        work = root / "this"
        cli_sweep(HERE, work, [], ["+experiment=retriever_sweep", "progress=false"])  # fills the caches
        warm = cli_sweep(HERE, work, [], ["+experiment=retriever_sweep", "progress=false"])
        print(f"+experiment=retriever_sweep warm: {warm['wall']:.1f} s wall, {warm['finished']} jobs finished; "
              f"load {load()}")
        if warm["finished"] != 27:
            problems.append(f"retriever_sweep finished {warm['finished']} of 27 jobs")
    print(f"load average at the end {load()}")
    for p in problems:
        print(f"bench_sweep: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
