"""``execution=ray`` at scale: one dataset's chunks scored on a local two-node Ray cluster (bench's
ray_nodes.two_nodes: a head and a worker on 127.0.0.1, one CPU each) against the same records in one process.

    python benchmarks/bench_ray_shards.py [--n 100000] [--chunk 5000] [--broken]
    python benchmarks/bench_ray_shards.py --judge [--n 1000] [--chunk 50] [--latency 0]

The records are benchmarks/realistic_records.py's (about 5.75 KB of JSONL each). The sharded run logs to a
fresh SQLite store; the one-process run (``execution.mode=memory``) logs nothing. Printed: each run's wall
seconds, the nodes and processes that scored chunks, and whether the per-sample table, the metrics with their
intervals and the summary are identical, and whether the store holds exactly one run with one per-sample table.
It exits 1 unless all of that holds (``--broken`` scores the one-process run on a different seed of the
resampling, so the intervals differ and it must exit 1).

``--judge`` adds judge metrics (answer_similarity, retrieval_precision: six questions a record) asked of the
stand-in judge server (``ragexp.standin_judge``, in this process, each reply after ``--latency`` seconds), each
run with a fresh PostgreSQL database (tests/services.py) as its judge cache. Printed besides: the judge calls of
each run and of each node, and whether the calls equal the cache's rows plus two per unreadable verdict (no
question paid twice across nodes). The summary is compared without its ``judge`` usage (one process shares a
repeated question's verdict, the cluster's tasks find it in the cache).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ray_nodes import two_nodes  # noqa: E402
from realistic_records import write_records  # noqa: E402

import ragexp  # noqa: E402

VARYING = ("seconds", "execution", "results_folder", "run_id", "tracking_uri")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--chunk", type=int, default=5_000)
    ap.add_argument("--broken", action="store_true")
    ap.add_argument("--judge", action="store_true")
    ap.add_argument("--latency", type=float, default=0.0)
    a = ap.parse_args()
    if a.judge:
        return judged(a)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    work = Path(tempfile.mkdtemp(prefix="bench_ray_shards_"))
    os.chdir(work)
    path = write_records(work / "records.jsonl", a.n)
    common = dict(tracking={"plots": False, "traces": 0}, stats={"resamples": 2000})
    with two_nodes(work) as address:
        t0 = time.perf_counter()
        sharded = ragexp.evaluate(path, log=f"sqlite:///{work}/mlflow.db",
                                  execution={"mode": "ray", "address": address, "chunk_records": a.chunk}, **common)
        ray_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    alone = ragexp.evaluate(path, log=False, execution={"mode": "memory"},
                            **{**common, "stats": {"resamples": 2000, "seed": 1 if a.broken else 0}})
    one_s = time.perf_counter() - t0
    ex = sharded.summary["execution"]
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{work}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    tables = sorted(p.name for p in Path(sharded.summary["results_folder"]).glob("per_sample.*"))
    checks = {
        "both nodes scored chunks": ex.get("nodes") == 2,
        "per-sample table identical": sharded.per_sample.equals(alone.per_sample),
        "metrics and intervals identical": sharded.metrics.equals(alone.metrics),
        "summary identical": (json.dumps({k: v for k, v in sharded.summary.items() if k not in VARYING},
                                         sort_keys=True, default=str)
                              == json.dumps({k: v for k, v in alone.summary.items() if k not in VARYING},
                                            sort_keys=True, default=str)),
        "one MLflow run": [r.info.run_id for r in runs] == [sharded.run_id],
        "one per-sample table": tables == ["per_sample.json", "per_sample.parquet"],
        "every record scored": sharded.summary.get("n_samples") == alone.summary.get("n_samples") == a.n,
    }
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"n={a.n:,} records, chunks of {a.chunk:,}: ray on {ex.get('nodes')} nodes / {ex.get('processes')} processes "
          f"{ray_s:.1f} s wall (logged); one process {one_s:.1f} s wall (in memory, not logged); load {load}")
    for name, ok in checks.items():
        print(f"  {'yes' if ok else 'NO '}  {name}")
    print(f"(folder {work})")
    return 0 if all(checks.values()) else 1


def judged(a: argparse.Namespace) -> int:
    """The ``--judge`` case: the same records with judge metrics, one process against two nodes."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from services import Postgres

    from ragexp.offline.standin_judge import JudgeServer
    from ragexp.judge.cache import PG_TABLE

    n = a.n if a.n != 100_000 else 1_000
    chunk = a.chunk if a.chunk != 5_000 else 50
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    work = Path(tempfile.mkdtemp(prefix="bench_ray_judge_"))
    os.chdir(work)
    path = write_records(work / "records.jsonl", n)
    common = dict(metric="[default,answer_similarity,retrieval_precision]", judge="openai_compatible",
                  tracking={"plots": False, "traces": 0}, stats={"resamples": 2000})
    out = {}
    with Postgres() as pg, JudgeServer(latency=a.latency) as server, two_nodes(work) as address:
        for name, execution, log in (("one process", {"mode": "memory"}, False),
                                     ("two nodes", {"mode": "ray", "address": address, "chunk_records": chunk},
                                      f"sqlite:///{work}/mlflow.db")):
            db = pg.create_database()
            server.reset()
            t0, c0 = time.perf_counter(), time.process_time()
            result = ragexp.evaluate(path, log=log, execution=execution, **common,
                                     overrides=[f"judge.api_base={server.url}", f"judge.cache_backend={db}"])
            out[name] = (result, time.perf_counter() - t0, time.process_time() - c0, server.calls,
                         int(pg.sql(f"SELECT count(*) FROM {PG_TABLE}", database=db.rsplit("/", 1)[1])))
    (alone, one_s, one_cpu, one_calls, _), (sharded, ray_s, ray_cpu, ray_calls, stored) = out.values()
    ex, usage = sharded.summary["execution"], sharded.summary["judge"]

    def plain(r):
        return json.dumps({k: v for k, v in r.summary.items() if k not in (*VARYING, "judge")}, sort_keys=True,
                          default=str)

    def scores(r):
        return r.metrics.drop(index=[k for k in r.metrics.index if k.startswith("judge/")])

    checks = {
        "both nodes asked the judge": len(ex.get("judge_calls_per_node", [])) == 2 and min(ex["judge_calls_per_node"]) > 0,
        "per-sample table identical (values, statuses, reasons)": sharded.per_sample.equals(alone.per_sample),
        "metrics and intervals identical": scores(sharded).equals(scores(alone)),
        "summary identical (but the judge's usage)": plain(sharded) == plain(alone),
        "judge calls equal": ray_calls == one_calls == usage["judge/calls"],
        "each question paid once (calls = cache rows + 2 per unreadable verdict)":
            ray_calls == stored + 2 * usage.get("judge/failures/parse_error", 0),
        "every record scored": sharded.summary.get("n_samples") == alone.summary.get("n_samples") == n,
    }
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"n={n:,} records, chunks of {chunk:,}, judge latency {a.latency:g} s: {ray_calls:,} judge calls "
          f"({ex.get('judge_calls_per_node')} per node; one process {one_calls:,}); two nodes {ray_s:.1f} s wall "
          f"(driver CPU {ray_cpu:.1f} s, logged); one process {one_s:.1f} s wall (CPU {one_cpu:.1f} s, judge server "
          f"included, not logged); load {load}")
    for name, ok in checks.items():
        print(f"  {'yes' if ok else 'NO '}  {name}")
    print(f"(folder {work})")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
