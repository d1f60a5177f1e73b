"""Time the SQuAD retriever sweep end to end, and what the on-disk index cache saves.

Part 1 (in process): build each index over the SQuAD corpus with an empty cache, then load it
from the cache, as a later job of a sweep does; prints seconds and the ratio.

Part 2 (as a user runs it): ``python -m ragexp -m +experiment=retriever_sweep`` in a fresh
directory (cold cache), then the same sweep again in that directory (warm cache). Prints the
wall time of each, the seconds of the jobs that had to build an index against those that
loaded one, and the sweep's result table read back from MLflow.

    python benchmarks/bench_pipeline.py                       # full sweep: 27 jobs, 300 questions
    python benchmarks/bench_pipeline.py --limit 100 --quick   # bm25,dense × top_k 1,5 × size 50,null

Figures depend on the machine; compare the ratios printed, not absolute seconds.
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

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()


def part1_index_cache() -> None:
    from ragexp.datasets.squad2 import load_squad2
    from ragexp.pipeline.cache import IndexCache
    from ragexp.pipeline.chunking import Chunker, corpus_digest
    from ragexp.pipeline.retrievers import BM25Retriever, DenseRetriever, load_encoder

    ds = load_squad2(str(DATA / "squad2" / "dev-v2.0.json"))
    chunker = Chunker(size=100, overlap=10)
    chunks = chunker.split(ds.corpus)
    key = {"corpus": corpus_digest(ds.corpus), "chunker": chunker.key()}
    load_encoder("all-MiniLM-L6-v2")  # model loading is per process, not per index: keep it out of the figures
    print(f"\n## Index cache, in process: SQuAD corpus, {len(ds.corpus)} paragraphs → {len(chunks)} chunks of ≤100 words")
    print("| index | build (empty cache), s | load (warm cache), ms | build / load |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for make in (lambda: BM25Retriever(), lambda: DenseRetriever()):
            cache = IndexCache(tmp)
            t0 = time.perf_counter()
            r = make()
            r.prepare(chunks, key, cache)
            build = time.perf_counter() - t0
            loads = []
            for _ in range(3):
                t0 = time.perf_counter()
                make().prepare(chunks, key, cache)
                loads.append(time.perf_counter() - t0)
            load = statistics.median(loads)
            print(f"| {r.name} | {build:.2f} | {1000 * load:.1f} | {build / load:,.0f}× |")


def _sweep(workdir: Path, limit: int, quick: bool) -> float:
    args = [sys.executable, "-m", "ragexp", "-m", "+experiment=retriever_sweep", f"data_dir={DATA}",
            f"dataset.limit={limit}", "progress=false"]
    if quick:
        args += ["retriever=bm25,dense", "retriever.top_k=1,5", "chunker.size=50,null"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    t0 = time.perf_counter()
    proc = subprocess.run(args, cwd=workdir, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.exit(f"sweep failed:\n{proc.stderr[-3000:]}")
    return elapsed


def _children(workdir: Path) -> tuple[str, list]:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{workdir / 'mlflow.db'}")
    exp = client.get_experiment_by_name("ragexp")
    found = client.search_runs([exp.experiment_id], max_results=5000, order_by=["attributes.start_time ASC"])
    parents = [r for r in found if "mlflow.parentRunId" not in r.data.tags]
    first = parents[0].info.run_id
    kids = [r for r in found if r.data.tags.get("mlflow.parentRunId") == first]
    for k in kids:
        path = client.download_artifacts(k.info.run_id, "summary.json", str(workdir / "dl" / k.info.run_id))
        k.seconds = json.loads(Path(path).read_text())["seconds"]  # type: ignore[attr-defined]
    return first, kids


def part2_sweep(limit: int, quick: bool, keep: Path | None) -> None:
    workdir = keep or Path(tempfile.mkdtemp(prefix="bench_pipeline_"))
    workdir.mkdir(parents=True, exist_ok=True)
    cold = _sweep(workdir, limit, quick)
    parent, kids = _children(workdir)
    warm = _sweep(workdir, limit, quick)
    built: set[tuple[str, str]] = set()
    building, loading = [], []
    for k in kids:  # jobs run in this order; a job builds the indexes no earlier job built
        size, name = k.data.params["chunker.size"], k.data.params["retriever"]
        need = {("bm25", size), ("dense", size)} if name == "hybrid" else {(name, size)}
        (building if need - built else loading).append(k.seconds)
        built |= need
    print(f"\n## SQuAD retriever sweep end to end: {len(kids)} jobs, {limit} questions each (work dir {workdir})")
    print("| run | wall time, s |")
    print("|---|---:|")
    print(f"| cold cache (indexes built during the sweep) | {cold:.1f} |")
    print(f"| warm cache (same sweep again) | {warm:.1f} |")
    print(f"| cold / warm | {cold / warm:.2f}× |")
    print(f"\nJobs that built an index: {len(building)}, mean {statistics.mean(building):.2f} s; "
          f"jobs that loaded one: {len(loading)}, mean {statistics.mean(loading):.2f} s "
          f"(ratio {statistics.mean(building) / statistics.mean(loading):.1f}×; runner seconds from summary.json)")
    print(f"\nMLflow parent run of the cold sweep: {parent}")
    print("\n| retriever | top_k | chunk size (words) | recall@k | MRR | nDCG | latency/total, ms |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    order = {"bm25": 0, "dense": 1, "hybrid": 2}
    for k in sorted(kids, key=lambda k: (order.get(k.data.params["retriever"], 9),
                                         int(k.data.params["retriever.top_k"]),
                                         float("inf") if k.data.params["chunker.size"] == "null"
                                         else int(k.data.params["chunker.size"]))):
        m, p = k.data.metrics, k.data.params
        size = "whole" if p["chunker.size"] == "null" else p["chunker.size"]
        print(f"| {p['retriever']} | {p['retriever.top_k']} | {size} | {m['recall_at_k']:.4f} | {m['mrr']:.4f} | "
              f"{m['ndcg']:.4f} | {1000 * m['latency/total']:.1f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--limit", type=int, default=300, help="questions per job (default 300, as the experiment)")
    ap.add_argument("--quick", action="store_true", help="a smaller grid (8 jobs)")
    ap.add_argument("--skip-sweep", action="store_true", help="only the in-process index cache figures")
    ap.add_argument("--workdir", type=Path, default=None, help="keep the sweep's mlflow.db and cache here")
    a = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    part1_index_cache()
    if not a.skip_sweep:
        part2_sweep(a.limit, a.quick, a.workdir)


if __name__ == "__main__":
    main()
