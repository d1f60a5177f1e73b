"""What the default traces cost a sweep: the 12-job BM25 sweep on SQuAD of ``bench_sweep.py`` (2,910 questions a
job, ``retriever.top_k=3,5,10 x retriever.k1=0.9,1.2,1.5,1.8``) through ``python -m ragexp -m``, with the
default traces and with ``tracking.traces=0``, and any other settings given (``--also``), and the same sweep by
another checkout (``--code``: a ``git worktree`` of an older commit, its own defaults), taken in turns so the
machine's load hits each alike.

    git worktree add --detach /tmp/base 482ef3b    # the sweep before traces existed
    python benchmarks/bench_sweep_traces.py [--rounds 2] [--also "tracking.sweep_traces=null"] [--code /tmp/base]

Prints each sweep's wall and CPU (user + sys of the process and its threads), then per setting the median
wall and CPU, their ratio to ``tracking.traces=0``'s, the traces the children hold and whether every child
traced the same questions; the load average before and after. Nothing is asserted: docs/performance.md,
"Traces", has the figures.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from bench_traces import timed_run  # noqa: E402

DATA = Path(os.environ.get("RAGEXP_DATA_DIR", HERE.parents[1] / "shared" / "data")).resolve()
SWEEP = ["-m", "dataset=squad2", "chunker=words", "progress=false", "retriever=bm25", "retriever.top_k=3,5,10",
         "retriever.k1=0.9,1.2,1.5,1.8", f"data_dir={DATA}"]


def one(setting: list[str], root: Path, code: Path | None = None) -> dict:
    """One sweep with ``setting`` (by checkout ``code``, this one by default) in a fresh folder and store: wall,
    CPU, and what its children's traces are."""
    work = Path(tempfile.mkdtemp(dir=root))
    uri = f"sqlite:///{work / 'mlflow.db'}"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PYTHONPATH": str(code or HERE.parent)}
    env.pop("MLFLOW_TRACKING_URI", None)
    cpu, wall, _ = timed_run([sys.executable, "-m", "ragexp", *SWEEP, f"tracking.uri={uri}", *setting], work, env,
                             " ".join(setting) or "default")
    import mlflow

    client = mlflow.MlflowClient(uri)
    exp = client.get_experiment_by_name("ragexp").experiment_id
    children = [r for r in client.search_runs([exp], max_results=100) if "mlflow.parentRunId" in r.data.tags]
    asked = []
    for child in children:
        traces = client.search_traces(locations=[exp], run_id=child.info.run_id, max_results=1000, include_spans=False)
        asked.append(frozenset(t.info.tags.get("ragexp.record_id") for t in traces))
    return {"cpu": cpu, "wall": wall, "children": len(children), "traces": sum(len(a) for a in asked),
            "same": len(set(asked)) <= 1, "tags": sorted({c.data.tags.get("ragexp.traces", "-") for c in children})}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--also", nargs="*", default=[], help="more settings, each a space-separated list of overrides")
    ap.add_argument("--code", nargs="*", type=Path, default=[], help="other checkouts, each run with its defaults")
    args = ap.parse_args()
    settings = [[], ["tracking.traces=0"], *(a.split() for a in args.also), *([f"@{c.resolve()}"] for c in args.code)]
    load0 = os.getloadavg()
    runs: dict[str, list[dict]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            for setting in settings[r % 2:] + settings[:r % 2]:  # the first to go changes every round
                name = " ".join(setting) or "default"
                code = Path(setting[0][1:]) if setting and setting[0].startswith("@") else None
                got = one([] if code else setting, Path(tmp), code)
                runs.setdefault(name, []).append(got)
                print(f"round {r + 1} {name}: wall {got['wall']:.1f} s, CPU {got['cpu']:.1f} s, {got['children']} "
                      f"jobs, {got['traces']} traces, same questions in every job: {got['same']}, tags {got['tags']}, "
                      f"load {os.getloadavg()[0]:.1f} ({time.strftime('%H:%M:%S')})", flush=True)
    off = runs["tracking.traces=0"]
    w0, c0 = statistics.median(r["wall"] for r in off), statistics.median(r["cpu"] for r in off)
    for name, got in runs.items():
        w, c = statistics.median(r["wall"] for r in got), statistics.median(r["cpu"] for r in got)
        n = got[0]["traces"]
        per = f", {(c - c0) / n * 1000:.0f} ms CPU and {(w - w0) / n * 1000:.0f} ms wall a trace" if n else ""
        print(f"{name}: median wall {w:.1f} s ({w / w0:.2f}x traces=0), CPU {c:.1f} s ({c / c0:.2f}x){per}")
    print(f"load average before {load0[0]:.1f} {load0[1]:.1f}, after {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f}")


if __name__ == "__main__":
    main()
