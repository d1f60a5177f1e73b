"""Soak: N ragexp processes (plain runs and sweeps) started together on one fresh SQLite store,
some killed with SIGKILL or SIGTERM at random moments, then one more run (which closes what the
dead left RUNNING). Not a test: it prints, for N = 2, 4, 8,

    runs expected / logged / FAILED (with a reason) / stuck RUNNING / lost / broken stores

"expected" counts the runs of the processes that were not killed (a plain run is one run, a
sweep is a parent and one child per job); every one of them must be logged FINISHED. A killed
process may have left runs too: each must be FAILED with ``ragexp.failure_reason``, none RUNNING.
"lost" is an expected run that is missing; a "broken store" is one the last run cannot log to.

    python benchmarks/soak_runs.py                      # N = 2, 4, 8, seed 0
    python benchmarks/soak_runs.py --n 8 --rounds 3 --seed 1

The judge is the scripted local server of the tests (tests/judge_server.py) with a latency, so
that runs last long enough to be killed during the judge, while saving results, or while logging.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from judge_server import JudgeServer  # noqa: E402

SWEEP_JOBS = 2  # children per sweep
#: Files whose appearance marks a stage of a process: a job started, a sweep's parent run created,
#: a job's results saved (it is logging now).
MILESTONES = {"run": [".hydra", "mlflow_run.json"],
              "sweep": [".hydra", "mlflow_parent_run.json", "mlflow_run.json"],
              "joblib": [".hydra", "mlflow_parent_run.json", "mlflow_run.json"]}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and k != "MLFLOW_TRACKING_URI"}
    return {**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}


def _command(kind: str, data_dir: Path, judge_url: str, uri: str, name: str) -> list[str]:
    base = [f"data_dir={data_dir}", "dataset=memory_eval_true", "judge=openai_compatible", f"judge.api_base={judge_url}",
            "judge.max_concurrency=2", "progress=false", f"tracking.uri={uri}"]
    if kind == "run":
        return [sys.executable, "-m", "ragexp", *base, "metric=answer_similarity", f"run_name={name}"]
    launcher = ["hydra/launcher=joblib", f"hydra.launcher.n_jobs={SWEEP_JOBS}"] if kind == "joblib" else []
    return [sys.executable, "-m", "ragexp", "-m", *base, *launcher, "metric=keyword_overlap,answer_similarity",
            f"tracking.sweep_name={name}"]


def _expected(kind: str) -> int:
    return 1 if kind == "run" else 1 + SWEEP_JOBS


def soak(n: int, data_dir: Path, rng: random.Random, work: Path, judge_url: str) -> dict[str, int | float]:
    store = work / f"store-n{n}"
    store.mkdir()
    uri = f"sqlite:///{store / 'mlflow.db'}"
    kinds = [("run", "sweep", "joblib")[i % 3] for i in range(n)]
    fates = ["live"] * n
    first = rng.randrange(2)
    for j, i in enumerate(rng.sample(range(n), k=max(1, n // 2))):  # half are killed, half of those with SIGKILL
        fates[i] = ("SIGKILL", "SIGTERM")[(first + j) % 2]
    procs = []
    started = time.monotonic()
    for i, kind in enumerate(kinds):
        cwd = work / f"n{n}-p{i}"
        cwd.mkdir()
        procs.append(subprocess.Popen(_command(kind, data_dir, judge_url, uri, f"n{n}-p{i}"), cwd=cwd, env=_env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                      start_new_session=True))
    # each doomed process is killed a random 0-3 s after a random milestone of its own: its job has
    # started (Hydra wrote .hydra/), its sweep's parent run exists, or its results are saved (logging)
    triggers = {i: (rng.choice(MILESTONES[kinds[i]]), rng.uniform(0.0, 3.0)) for i, f in enumerate(fates) if f != "live"}
    kill_at: dict[int, float] = {}
    signalled: set[int] = set()
    while any(p.poll() is None for p in procs):
        now = time.monotonic() - started
        for i, (pattern, delay) in list(triggers.items()):
            if next((work / f"n{n}-p{i}").rglob(pattern), None) is not None:
                kill_at[i] = now + delay
                del triggers[i]
        for i, at in list(kill_at.items()):
            if now >= at:
                sig = signal.SIGKILL if fates[i] == "SIGKILL" else signal.SIGTERM
                if procs[i].poll() is None:
                    signalled.add(i)
                try:  # the whole process group: a joblib sweep's workers die with their launcher
                    os.killpg(procs[i].pid, sig) if sig == signal.SIGKILL else procs[i].send_signal(sig)
                except ProcessLookupError:
                    pass
                del kill_at[i]
        time.sleep(0.1)
    errors = [p.stderr.read() for p in procs]
    missed = sum(1 for i, f in enumerate(fates) if f != "live" and i not in signalled)
    fates = [f if i in signalled else "live" for i, f in enumerate(fates)]  # it ended before its milestone
    failed_live = [(i, e.strip().splitlines()[-1:]) for i, (p, e, f) in enumerate(zip(procs, errors, fates))
                   if f == "live" and p.returncode != 0]
    elapsed = time.monotonic() - started

    last = work / f"n{n}-last"
    last.mkdir()
    final = subprocess.run([sys.executable, "-m", "ragexp", f"data_dir={data_dir}", "dataset=memory_eval_true",
                            "metric=keyword_overlap", "progress=false", f"tracking.uri={uri}", "run_name=last"],
                           cwd=last, env=_env(), capture_output=True, text=True)
    broken = int(final.returncode != 0)
    cleaned = re.search(r"marked (\d+) run\(s\) FAILED", final.stderr)

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exps = [e.experiment_id for e in client.search_experiments()]
    found = client.search_runs(exps, max_results=5000) if exps else []
    by_owner: dict[str, list] = {}
    for r in found:
        parent = r.data.tags.get("mlflow.parentRunId")
        key = r.info.run_name if parent is None else next(
            (p.info.run_name for p in found if p.info.run_id == parent), "?")
        by_owner.setdefault(str(key), []).append(r)
    expected = sum(_expected(k) for k, f in zip(kinds, fates) if f == "live")
    logged = sum(1 for i, f in enumerate(fates) if f == "live"
                 for r in by_owner.get(f"n{n}-p{i}", []) if r.info.status == "FINISHED")
    from_killed = [r for i, f in enumerate(fates) if f != "live" for r in by_owner.get(f"n{n}-p{i}", [])]
    return {
        "N": n, "sweeps": sum(k != "run" for k in kinds),
        "SIGKILL": fates.count("SIGKILL"), "SIGTERM": fates.count("SIGTERM"),
        "expected": expected, "logged": logged, "lost": expected - logged,
        "killed: FINISHED": sum(r.info.status == "FINISHED" for r in from_killed),
        "FAILED w/ reason": sum(r.info.status == "FAILED" and "ragexp.failure_reason" in r.data.tags for r in found),
        "FAILED no reason": sum(r.info.status == "FAILED" and "ragexp.failure_reason" not in r.data.tags for r in found),
        "stuck RUNNING": sum(r.info.status == "RUNNING" for r in found),
        "closed by last run": int(cleaned.group(1)) if cleaned else 0,
        "kill missed": missed, "broken": broken, "live exit!=0": len(failed_live), "seconds": round(elapsed, 1),
        "_failures": failed_live + ([("last", final.stderr.strip().splitlines()[-1:])] if broken else []),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data-dir", type=Path, default=Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data")))
    ap.add_argument("--latency", type=float, default=0.5, help="seconds the judge takes per answer")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows = []
    with JudgeServer(latency=args.latency) as judge, tempfile.TemporaryDirectory(prefix="ragexp-soak-") as tmp:
        for r in range(args.rounds):
            for n in args.n:
                work = Path(tmp) / f"round{r}-n{n}"
                work.mkdir()
                row = soak(n, args.data_dir.resolve(), rng, work, judge.url)
                rows.append(row)
                print({k: v for k, v in row.items() if not k.startswith("_")}, flush=True)
                for who, line in row["_failures"]:
                    print(f"  process {who} failed: {line}", flush=True)
    cols = [k for k in rows[0] if not k.startswith("_")]
    print()
    print(" | ".join(cols))
    print(" | ".join("---" for _ in cols))
    for row in rows:
        print(" | ".join(str(row[c]) for c in cols))
    total = {c: sum(row[c] for row in rows) for c in ("expected", "logged", "lost", "stuck RUNNING", "broken",
                                                      "FAILED no reason", "live exit!=0")}
    print(f"\ntotal: {total['expected']} runs expected, {total['logged']} logged, {total['lost']} lost, "
          f"{total['stuck RUNNING']} stuck RUNNING, {total['FAILED no reason']} FAILED without a reason, "
          f"{total['broken']} broken stores, {total['live exit!=0']} unkilled processes that failed")


if __name__ == "__main__":
    main()
