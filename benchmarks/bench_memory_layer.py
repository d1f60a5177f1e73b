"""The LoCoMo memory-layer sweep over recorded answers: 3 memories x 3 k, what it costs and what building each
memory once saves.

    python benchmarks/bench_memory_layer.py [--launcher basic|joblib] [--out DIR] [OVERRIDE ...]

Workload: LoCoMo's 10 conversations and 1,986 questions (``../shared/data/locomo/locomo10.json``), each
question given a recorded answer (``prediction``: its reference answer for even positions, "I don't know"
for odd ones) and a recorded retrieval (``prediction_context``: its evidence) that the memory layer replaces.
The metric suite is ``metric=locomo`` when the tree has it, else recall@k, MRR and answer token F1.

Runs, each a fresh process with its own SQLite store, one after the other:

1. ``one``: one job, ``memory_layer=turns retriever.top_k=10``, a fresh index cache (it builds its 10 memories);
2. ``sweep``: ``-m memory_layer=turns,observations,summaries retriever.top_k=5,10,25`` (9 jobs, one process), a
   fresh cache: each (conversation, kind) memory is built once, by the first job that needs it (30 builds),
   the 6 other jobs load it;
3. ``sweep_nocache``: the same sweep with ``pipeline.cache_dir=null``: every job builds its 10 memories (90).

For each (``bench_traces.timed_run``): wall seconds, CPU seconds, peak RSS (the largest process), the memories
built (``builds.log``), and
from the children's MLflow metrics the seconds spent building or loading memories (``memory/index_seconds``,
summed over the jobs). Printed: sweep / one (target at most 4), and what the cache saves (sweep_nocache -
sweep, and the index seconds of each). Say the load average beside the figures (printed before and after).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_traces import timed_run  # noqa: E402

ROOT = HERE.parent
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data")).resolve()
SWEEP = ["memory_layer=turns,observations,summaries", "retriever.top_k=5,10,25"]


def predictions(out: Path) -> Path:
    """LoCoMo with a recorded answer and a recorded retrieval per question (module docstring)."""
    data = json.loads((DATA / "locomo" / "locomo10.json").read_text())
    for sample in data:
        for i, qa in enumerate(sample["qa"]):
            reference = qa.get("answer", qa.get("adversarial_answer", ""))
            qa["prediction"] = str(reference) if i % 2 == 0 else "I don't know"
            qa["prediction_context"] = list(qa.get("evidence") or [])
    path = out / "locomo_predictions.json"
    path.write_text(json.dumps(data))
    return path


def metric_args() -> list[str]:
    return ["metric=locomo"] if (ROOT / "conf" / "metric" / "locomo.yaml").exists() else \
        ["metric=[recall_at_k,mrr,answer_token_f1]"]


def index_seconds(store: Path) -> tuple[int, float]:
    """(finished jobs, the sum over them of memory/index_seconds) from the run's MLflow store."""
    import mlflow

    client = mlflow.MlflowClient(f"sqlite:///{store}")
    exp = client.get_experiment_by_name("ragexp")
    runs = [r for r in client.search_runs([exp.experiment_id]) if "memory/index_seconds" in r.data.metrics]
    return len(runs), sum(r.data.metrics["memory/index_seconds"] for r in runs)


def case(name: str, data: Path, root: Path, launcher: str, extra: list[str]) -> dict:
    work = root / name
    work.mkdir()
    cache = "null" if name == "sweep_nocache" else str(work / "cache")
    args = [sys.executable, "-m", "ragexp", *(["-m"] if name != "one" else []), "dataset=locomo",
            f"dataset.path={data}", f"data_dir={DATA}", *metric_args(), "progress=false",
            f"tracking.uri=sqlite:///{work / 'mlflow.db'}", f"pipeline.cache_dir={cache}", *extra]
    if name == "one":
        args += ["memory_layer=turns", "retriever.top_k=10"]
    else:
        args += [*SWEEP, *([f"hydra/launcher={launcher}"] if launcher != "basic" else [])]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    cpu, wall, rss = timed_run(args, work, env, name)
    jobs, seconds = index_seconds(work / "mlflow.db")
    log = work / "cache" / "builds.log"
    builds = len(log.read_text().splitlines()) if log.exists() else None
    return {"case": name, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1), "peak_rss_mb": round(rss),
            "jobs": jobs, "memory_index_s": round(seconds, 2), "builds": builds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--launcher", default="basic", help="hydra launcher of the sweeps: basic (one process) or joblib")
    ap.add_argument("--cases", default="one,sweep,sweep_nocache")
    ap.add_argument("--out", type=Path, default=None, help="keep the runs' folders here (default: a temporary one)")
    ap.add_argument("overrides", nargs="*", help="more overrides for every run: retriever=dense, tracking.traces=0")
    a = ap.parse_args()
    root = Path(a.out or tempfile.mkdtemp(prefix="bench_memory_layer_"))
    root.mkdir(parents=True, exist_ok=True)
    data = predictions(root)
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    rows = []
    for name in a.cases.split(","):
        rows.append(case(name, data, root, a.launcher, a.overrides))
        print(json.dumps(rows[-1]), flush=True)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    by = {r["case"]: r for r in rows}
    if "one" in by and "sweep" in by:
        print(f"sweep / one job: {by['sweep']['wall_s'] / by['one']['wall_s']:.2f}x wall (target <= 4), "
              f"{by['sweep']['cpu_s'] / by['one']['cpu_s']:.2f}x CPU")
    if "sweep" in by and "sweep_nocache" in by:
        print(f"building each memory once: the sweep's wall {by['sweep']['wall_s']} s vs {by['sweep_nocache']['wall_s']} s "
              f"building in every job, CPU {by['sweep']['cpu_s']} vs {by['sweep_nocache']['cpu_s']} s; memory build/load "
              f"seconds over the 9 jobs: {by['sweep']['memory_index_s']} (once, then loaded) vs "
              f"{by['sweep_nocache']['memory_index_s']} (every job)")
    bad = [r["case"] for r in rows if r["jobs"] != (1 if r["case"] == "one" else 9)]
    if bad:
        raise SystemExit(f"runs that did not finish every job: {bad}")


if __name__ == "__main__":
    main()
