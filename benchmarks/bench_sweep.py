"""Sweeps on SQuAD, this tree against a baseline tree, in the same run.

    git worktree add /work/base e33855c        # the baseline: any checkout of ragexp
    python benchmarks/bench_sweep.py --base /work/base [--dense] [--retriever-sweep]

Workload: SQuAD v2's 2,910 answerable questions, ``chunker=words``, the default metric suite.

1. The 12-job BM25 sweep ``retriever.top_k=3,5,10 × retriever.k1=0.9,1.2,1.5,1.8`` through
   ``python -m ragexp -m`` (one process, Hydra's basic launcher, logging to a fresh SQLite store),
   ``--rounds`` times (3) in each tree, the trees taking turns (the first to go changes every round)
   so the machine's load touches both alike: wall seconds (medians, and this/base per round), and
   the time before the first job's start and after the last job's logging (read from the job
   folders' file times), split by the parent run's start and end times (MLflow's) into the sweep's
   own part (parent run → first job; last job logged → parent closed: Hydra's launcher, the
   children's table, leaderboard, heat map) and what any run pays (Python's start, imports, Hydra's
   compose and the store's opening and creation before the parent run; the interpreter's exit).
2. The same 12 jobs in one Python process per tree through ``ragexp.workflow.runner.execute``, the
   trees taking turns job by job, each step timed (the runner's own step functions wrapped by
   name): per-job phases retrieve, embed (summed over the queries' ``timings``), score, intervals,
   save, log.
3. ``--dense``: three dense jobs (``retriever.top_k=3,5,10``) the same way, after one untimed job
   per tree that builds the index (and, in this tree, the query vectors): warm jobs. Each tree's
   jobs run in one process (what they load, they load once), the two trees' jobs alternating.
4. ``--retriever-sweep``: ``+experiment=retriever_sweep`` (27 jobs, 300 questions) in this tree,
   once to fill the caches, then warm (timed). ``--work DIR`` keeps the caches for a later run.
   ``--no-bm25`` skips parts 1 and 2.

It exits 1 unless every sweep ran the jobs it planned (12 / 3 / 27 finished child runs under one
parent, 2,910 samples a job) and every metric value except latencies and index timings is
identical between the two trees; ``--broken`` feeds every part a value the config refuses, so it must fail.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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
args = json.loads(sys.argv[1])  # the jobs come on stdin, one JSON list of overrides a line
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
for job in map(json.loads, sys.stdin):
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
    uri = f"sqlite:///{work / f'mlflow_{time.time_ns()}.db'}"  # a fresh store for each sweep
    args = [sys.executable, "-m", "ragexp", "-m", *(extra or COMMON), f"data_dir={DATA}", f"tracking.uri={uri}",
            f"hydra.sweep.dir={work / 'multirun' / str(time.time_ns())}", *grid]
    before = load()
    t0, r0 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(args, cwd=work, env=env_for(tree), capture_output=True, text=True)
    t1, r1 = time.time(), resource.getrusage(resource.RUSAGE_CHILDREN)
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
    bound = ("/ci_low", "/ci_high", "/stderr")  # intervals: the same where both bootstrap, else within its noise
    metrics = {name: {k: v for k, v in r.data.metrics.items() if not k.startswith(timing) and not k.endswith(bound)}
               for name, r in children.items()}
    bounds = {name: {k: v for k, v in r.data.metrics.items() if not k.startswith(timing) and k.endswith(bound)}
              for name, r in children.items()}
    parent = [r.info for r in found if "mlflow.parentRunId" not in r.data.tags][:1]
    p0, p1 = (parent[0].start_time / 1000, (parent[0].end_time or 0) / 1000) if parent else (t0, t1)
    return {"wall": t1 - t0, "cpu": r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime, "before_first": min(starts) - t0 if starts else None,
            "after_last": t1 - max(ends) if ends else None, "finished": len(finished), "metrics": metrics,
            "bounds": bounds,
            "parents": len(found) - len(children), "own": min(starts, default=p0) - p0 + p1 - max(ends, default=p1),
            "start": p0 - t0, "exit": t1 - p1, "load": f"{before} → {load()}"}


def in_process(tree: Path, work: Path, grid: list[str]) -> list[dict]:
    uri = f"sqlite:///{work / 'inproc.db'}"
    payload = {"conf": str(tree / "conf"), "common": [*COMMON, f"data_dir={DATA}", f"tracking.uri={uri}"]}
    proc = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(payload)], cwd=work, env=env_for(tree),
                          input="".join(json.dumps(j) + "\n" for j in expand(grid)), capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"bench_sweep: {tree}: the in-process jobs failed:\n{proc.stderr[-3000:]}")
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]


def alternating(trees: dict[str, Path], root: Path, grid: list[str]) -> dict[str, list[dict]]:
    """The grid's jobs in one driver process per tree, the trees taking turns job by job (the
    first to go changes every job), so the machine's load touches both alike."""
    procs = {}
    for name, tree in trees.items():
        payload = {"conf": str(tree / "conf"), "common": [*COMMON, f"data_dir={DATA}",
                                                          f"tracking.uri=sqlite:///{root / name / 'inproc.db'}"]}
        procs[name] = subprocess.Popen([sys.executable, "-c", DRIVER, json.dumps(payload)], cwd=root / name,
                                       env=env_for(tree), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                       stderr=open(root / name / "driver.err", "w"), text=True)
    out: dict[str, list[dict]] = {name: [] for name in trees}
    for i, job in enumerate(expand(grid)):
        for name in (list(trees) if i % 2 == 0 else list(trees)[::-1]):
            procs[name].stdin.write(json.dumps(job) + "\n")
            procs[name].stdin.flush()
            line = procs[name].stdout.readline()
            while line and not line.startswith("{"):
                line = procs[name].stdout.readline()
            if not line:
                raise SystemExit(f"bench_sweep: {name}: the job {job} failed: see {root / name / 'driver.err'}")
            out[name].append(json.loads(line))
            print(f"  {name} {' '.join(job)}: {out[name][-1]['wall']:.1f} s; load {load()}", flush=True)
    for p in procs.values():
        p.stdin.close()
        p.wait()
    return out


def phases_table(label: str, jobs: list[dict]) -> None:
    cols = ("wall", "retrieve", "embed", "score", "intervals", "save", "log")
    print(f"  {label}: per-job medians over {len(jobs)} jobs (s): " + ", ".join(
        f"{c} {statistics.median(j.get(c, 0.0) for j in jobs):.2f}" for c in cols))


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def interval_moves(base: dict[str, dict], this: dict[str, dict]) -> dict[str, float]:
    """How far each job's interval ends moved against the baseline's, as a share of the baseline's width."""
    keys = changed = 0
    worst = 0.0
    for job, b in base.items():
        for k, v in b.items():
            if not k.endswith(("/ci_low", "/ci_high")):
                continue
            keys += 1
            t, stem = this.get(job, {}).get(k), k.rsplit("/", 1)[0]
            width = b.get(f"{stem}/ci_high", 0.0) - b.get(f"{stem}/ci_low", 0.0)
            if t != v:
                changed += 1
                worst = max(worst, float("inf") if t is None else abs(t - v) / width if width else float("inf"))
    return {"keys": keys, "changed": changed, "worst": worst}


def check_jobs(jobs: dict[str, list[dict]], label: str, kind: str, planned: int, problems: list[str]) -> bool:
    """Print both trees' per-job phases; a problem unless each ran ``planned`` jobs of 2,910 samples.
    True when both trees' jobs gave the same metric values."""
    for name, ran in jobs.items():
        phases_table(f"{name} {label}", ran)
        if len(ran) != planned or any(j["n"] != 2910 for j in ran):
            problems.append(f"{name}: {len(ran)} {kind} jobs ran, not {planned} of 2,910 samples")
    if [j["metrics"] for j in jobs["base"]] != [j["metrics"] for j in jobs["this"]]:
        problems.append(f"the {kind} jobs' metric values differ from the baseline's")
        return False
    return True


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--base", type=Path, required=True, help="a checkout of the baseline (e.g. git worktree)")
    ap.add_argument("--dense", action="store_true")
    ap.add_argument("--retriever-sweep", action="store_true")
    ap.add_argument("--broken", action="store_true", help="a sweep value Hydra refuses: the script must exit 1")
    ap.add_argument("--skip-cli", action="store_true")
    ap.add_argument("--rounds", type=int, default=3, help="CLI sweeps per tree, the trees taking turns")
    ap.add_argument("--no-bm25", action="store_true", help="skip the BM25 sweep (parts 1 and 2)")
    ap.add_argument("--work", type=Path, help="the work folder (default: a new temporary one); kept")
    a = ap.parse_args()
    trees = {"base": a.base.resolve(), "this": HERE}
    grid = BM25 + (["retriever.k1=oops"] if a.broken else [])
    problems: list[str] = []
    root = (a.work or Path(tempfile.mkdtemp(prefix="bench_sweep_"))).resolve()
    for name in trees:
        (root / name).mkdir(parents=True, exist_ok=True)
    print(f"bench_sweep: work in {root}; load average at start {load()}")
    if not a.no_bm25:
        cli: dict[str, list[dict]] = {name: [] for name in trees}
        for r in range(0 if a.skip_cli else a.rounds):  # the trees take turns, the first to go changing each round
            for name in (list(trees) if r % 2 == 0 else list(trees)[::-1]):
                got = cli_sweep(trees[name], root / name, grid)
                cli[name].append(got)
                print(f"  round {r + 1}, {name}: 12-job BM25 sweep (CLI) {got['wall']:.1f} s wall; before the first "
                      f"job {got['before_first']:.1f} s, after the last {got['after_last']:.1f} s (the sweep's own "
                      f"{got['own']:.1f} s); load {got['load']}", flush=True)
                if got["finished"] != 12 or got["parents"] != 1:
                    problems.append(f"{name}: a CLI sweep finished {got['finished']} of 12 jobs under "
                                    f"{got['parents']} parent run(s)")
                if got["metrics"] != cli["base"][0]["metrics"] if cli["base"] else False:
                    differ = [n for n, m in cli["base"][0]["metrics"].items() if got["metrics"].get(n) != m]
                    problems.append(f"{name}: metric values differ from the baseline's in {len(differ)} jobs, "
                                    f"e.g. {differ[:2]}")
                if cli["base"] and name == "this":
                    moved = interval_moves(cli["base"][0]["bounds"], got["bounds"])
                    print(f"    intervals: {moved['changed']} of {moved['keys']} interval ends differ from the "
                          f"baseline's, at most {moved['worst']:.3f} of the interval's width (allowed 0.1: the "
                          f"normal interval of large runs, docs/uncertainty.md)")
                    if moved["worst"] > 0.1 or moved["keys"] == 0:
                        problems.append(f"{name}: intervals moved by {moved['worst']:.3f} of their width")
        check_jobs(alternating(trees, root, grid), "BM25", "in-process", 12, problems)
        if cli["this"] and not problems:
            def med(name: str, *keys: str) -> float:
                return statistics.median(sum(s[k] for k in keys) for s in cli[name])

            ratios = [t["wall"] / b["wall"] for b, t in zip(cli["base"], cli["this"])]
            print(f"BM25 sweep, medians of {a.rounds}: {med('this', 'wall'):.1f} s vs {med('base', 'wall'):.1f} s; "
                  f"this/base per round {', '.join(f'{x:.2f}' for x in ratios)}: median "
                  f"{statistics.median(ratios):.2f}x the baseline's wall; every metric of the 12 jobs identical")
            for label, keys in (("before the first job + after the last", ("before_first", "after_last")),
                                ("  the sweep's own (parent run → first job, last job → parent closed)", ("own",)),
                                ("  Python, imports, Hydra's compose, the store's opening (before the parent)",
                                 ("start",)), ("  the parent closed → exit", ("exit",))):
                print(f"{label}: {med('this', *keys):.1f} s vs {med('base', *keys):.1f} s (medians)")
    if a.dense:
        for name, tree in trees.items():  # builds the caches (unless --work kept them)
            if not (root / name / ".ragexp_cache" / "index" / "builds.log").exists():
                in_process(tree, root / name, ["retriever=dense", "retriever.top_k=5"])
        dense = alternating(trees, root, DENSE + (["retriever.top_k=oops"] if a.broken else []))
        if check_jobs(dense, "dense (warm)", "dense", 3, problems) and len(dense["base"]) == 3:
            b = statistics.median(j["wall"] for j in dense["base"])
            t = statistics.median(j["wall"] for j in dense["this"])
            print(f"warm dense job: {t:.1f} s vs {b:.1f} s = {t / b:.2f}x the baseline's (median of 3); metrics "
                  f"identical; load {load()}")
    if a.retriever_sweep:
        exp = ["+experiment=retriever_sweep", "progress=false", f"pipeline.cache_dir={root / 'rs_cache'}",
               *(["retriever.top_k=oops"] if a.broken else [])]
        (root / "rs").mkdir(exist_ok=True)
        for run in ("fill", "warm"):  # the first fills the caches (unless --work kept them); a fresh store each
            got = cli_sweep(HERE, root / "rs", [], exp)
            print(f"+experiment=retriever_sweep, {run}: {got['wall']:.1f} s wall, {got['cpu']:.1f} s CPU, "
                  f"{got['finished']} jobs finished; before the first job {got['before_first']:.1f} s, after the "
                  f"last {got['after_last']:.1f} s; load {load()}", flush=True)
            if got["finished"] != 27 or got["parents"] != 1:
                problems.append(f"retriever_sweep ({run}) finished {got['finished']} of 27 jobs")
    print(f"load average at the end {load()}")
    for p in problems:
        print(f"bench_sweep: FAILED: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
