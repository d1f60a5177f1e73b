"""The same 12-job BM25 sweep on SQuAD through each launcher and into each store, as a user runs it.

    python benchmarks/bench_launchers.py               # 300 questions per job
    python benchmarks/bench_launchers.py --limit 100   # quicker

The sweep: ``dataset=squad2 retriever=bm25 retriever.top_k=1,3,5,10 retriever.k1=0.9,1.2,1.5
metric=retrieval`` (12 jobs), run with the basic launcher (jobs one after another in one process),
joblib (``n_jobs=2``, worker processes) and Ray (a local instance with ``num_cpus=2``, started by
the sweep), into a SQLite file and into an ``mlflow server`` backed by PostgreSQL (started here
with tests/services.py; skipped when initdb/pg_ctl are absent). The BM25 indexes are built once
before timing (a shared ``pipeline.cache_dir``), so the figures are the launchers' and stores'
costs, not index builds. Prints wall time, seconds per job, the overhead per job over the basic
launcher with SQLite, and the ratio of wall times to that baseline.

Figures depend on the machine and its load; compare the ratios, not absolute seconds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # tests/services.py: PostgreSQL and an mlflow server on it
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()

SWEEP = ["dataset=squad2", "retriever=bm25", "retriever.top_k=1,3,5,10", "retriever.k1=0.9,1.2,1.5",
         "metric=retrieval", "progress=false"]
JOBS = 12
LAUNCHERS = {
    "basic": [],
    "joblib": ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"],
    "ray": ["hydra/launcher=ray", "hydra.launcher.ray.init.num_cpus=2"],
}


def sweep(where: Path, extra: list[str], uri: str, cache: Path, limit: int, experiment: str) -> float:
    """Seconds of one ``python -m ragexp -m ...`` from start to exit (which must be 0)."""
    where.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
           "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("MLFLOW_TRACKING_URI", None)
    cmd = [sys.executable, "-m", "ragexp", "-m", *SWEEP, *extra, f"data_dir={DATA}", f"dataset.limit={limit}",
           f"pipeline.cache_dir={cache}", f"tracking.uri={uri}", f"tracking.experiment={experiment}"]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=where, env=env, capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - t0
    if proc.returncode != 0:
        raise SystemExit(f"sweep failed ({' '.join(extra) or 'basic'} → {uri}):\n{proc.stderr[-3000:]}")
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--limit", type=int, default=300, help="SQuAD questions per job")
    args = ap.parse_args()
    from services import MISSING_POSTGRES, MlflowServer, Postgres, pg_bin_dir

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        cache = tmp / "index_cache"
        print(f"warming the index cache ({JOBS}-job sweep, basic launcher, not timed) ...", flush=True)
        sweep(tmp / "warm", [], f"sqlite:///{tmp / 'warm' / 'mlflow.db'}", cache, args.limit, "warm")

        stores: list[tuple[str, object]] = [("SQLite", None)]
        pg = server = None
        if pg_bin_dir() is not None:
            pg = Postgres().start()
            server = MlflowServer(pg, tmp / "pg_mlflow", workers=2).start()
            stores.append(("PostgreSQL server", server))
        else:
            print(f"(no PostgreSQL server: {MISSING_POSTGRES})")
        rows = []
        try:
            for store_name, srv in stores:
                for launcher, extra in LAUNCHERS.items():
                    where = tmp / f"{launcher}_{store_name.split()[0].lower()}"
                    uri = srv.uri if srv is not None else f"sqlite:///{where / 'mlflow.db'}"
                    print(f"{launcher} → {store_name} ...", flush=True)
                    rows.append((launcher, store_name, sweep(where, extra, uri, cache, args.limit,
                                                             f"bench_{launcher}")))
        finally:
            if server is not None:
                server.stop()
            if pg is not None:
                pg.close()

    base = rows[0][2]
    print(f"\n## {JOBS}-job BM25 sweep on SQuAD ({args.limit} questions per job), {os.cpu_count()} CPUs")
    print("| launcher | store | wall, s | s / job | overhead / job vs basic+SQLite, s | wall / basic+SQLite |")
    print("|---|---|---:|---:|---:|---:|")
    for launcher, store_name, took in rows:
        print(f"| {launcher} | {store_name} | {took:.1f} | {took / JOBS:.2f} | {(took - base) / JOBS:+.2f} | "
              f"{took / base:.2f} |")


if __name__ == "__main__":
    main()
