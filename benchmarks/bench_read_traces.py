"""Reading traces into records (``dataset=mlflow_traces``) against MLflow's own search of the same traces.

N traces shaped like a traced RAG app's (a root span with the question and the answer, a RETRIEVER span
returning five documents with ids and scores, an EMBEDDING span inside it, an LLM span, an expectation
on every tenth) are written once to a SQLite store (kept in ``--store`` for the next run), then, taking
turns, timed: ``MlflowClient.search_traces`` paging through them all (the baseline: what reading costs
in MLflow itself), and ``load_mlflow_traces`` (the same search plus ragexp's mapping into checked
records). Printed: wall seconds, traces per second, the ratio to the baseline, peak RSS of the process.

    python benchmarks/bench_read_traces.py --n 10000 --store /tmp/traces_10k
    python benchmarks/bench_read_traces.py --broken   # a store with no such experiment: exits 1

It exits 1 unless every trace became a record with its five contexts and ids.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
EXPERIMENT = "bench-app"


def write_traces(uri: str, n: int) -> float:
    import mlflow

    mlflow.set_tracking_uri(uri)
    mlflow.set_experiment(EXPERIMENT)
    t0 = time.perf_counter()
    for i in range(n):
        with mlflow.start_span(name="app", span_type="CHAIN") as root:
            root.set_inputs({"question": f"question number {i} about the passages?"})
            with mlflow.start_span(name="retrieve", span_type="RETRIEVER") as ret:
                ret.set_inputs({"query": f"question number {i}"})
                with mlflow.start_span(name="embed", span_type="EMBEDDING") as emb:
                    emb.set_inputs({"text": f"question number {i}"})
                ret.set_outputs([{"page_content": f"passage {i % 997}-{j}: " + "words of a passage " * 12,
                                  "id": f"p{(i + j) % 997}", "metadata": {"score": 1.0 / (j + 1)}} for j in range(5)])
            with mlflow.start_span(name="llm", span_type="LLM") as llm:
                llm.set_inputs({"prompt": "answer from the context"})
                llm.set_outputs("an answer")
            root.set_outputs({"answer": f"answer {i}"})
        if (i + 1) % 500 == 0:
            mlflow.flush_trace_async_logging()
            print(f"  wrote {i + 1} traces ({time.perf_counter() - t0:.0f} s)", file=sys.stderr, flush=True)
    mlflow.flush_trace_async_logging()
    return time.perf_counter() - t0


def baseline(uri: str, experiment_id: str) -> int:
    from mlflow import MlflowClient

    client, token, count = MlflowClient(tracking_uri=uri), None, 0
    while True:
        page = client.search_traces(locations=[experiment_id], max_results=500, order_by=["timestamp_ms ASC"],
                                    page_token=token)
        count += len(page)
        token = page.token
        if not token:
            return count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--store", default="/tmp/ragexp_bench_traces")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--broken", action="store_true")
    args = parser.parse_args()

    from mlflow import MlflowClient

    from ragexp.datasets.mlflow_traces import load_mlflow_traces
    from ragexp.errors import DataError

    folder = Path(args.store)
    folder.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{folder / f'traces_{args.n}.db'}"
    if args.broken:
        try:
            load_mlflow_traces("no-such-experiment", tracking_uri=uri)
        except DataError as exc:
            print(f"broken: {exc}")
        return 1
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(EXPERIMENT)
    if exp is None or baseline(uri, exp.experiment_id) != args.n:
        print(f"writing {args.n} traces to {uri} (once) ...", file=sys.stderr)
        print(f"wrote {args.n} traces in {write_traces(uri, args.n):.1f} s")
        exp = client.get_experiment_by_name(EXPERIMENT)

    base, ours, records = [], [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        assert baseline(uri, exp.experiment_id) == args.n
        base.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        records = load_mlflow_traces(EXPERIMENT, tracking_uri=uri).records
        ours.append(time.perf_counter() - t0)
    b, o = min(base), min(ours)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{args.n} traces, best of {args.rounds}: MLflow search_traces {b:.1f} s ({args.n / b:.0f} traces/s); "
          f"load_mlflow_traces {o:.1f} s ({args.n / o:.0f} traces/s), {o / b:.2f}x the search; peak RSS {rss:.0f} MB")
    good = len(records) == args.n and all(len(r.contexts or []) == 5 and len(r.context_ids or []) == 5
                                          and r.extra["trace_status"] == "ok" for r in records)
    print("every trace became a record with its 5 contexts and ids" if good else "RECORDS INCOMPLETE")
    return 0 if good else 1


if __name__ == "__main__":
    sys.exit(main())
