"""Use the app as its users would, traced by ``mlflow.langchain.autolog()``, and label the traces.

Asks the app of ``rag_app.py`` the questions of ragexp's demo, each call one MLflow trace in the
experiment ``langchain-app`` of ``./mlflow.db``, then adds to every trace what a reviewer adds in MLflow's
UI: the expected answer (``expected_response``) and the passages that answer it
(``expected_retrieved_context``). ``python -m ragexp dataset=mlflow_traces dataset.experiment=langchain-app``
then reads them as records.

    python log_traces.py --limit 10 --k 3 --chunk-size 400
"""

from __future__ import annotations

import argparse
import json

import mlflow
from rag_app import DEMO_CORPUS, build


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions (default: all 50)")
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--chunk-size", type=int, default=400)
    parser.add_argument("--experiment", default="langchain-app")
    parser.add_argument("--tracking-uri", default="sqlite:///mlflow.db")
    args = parser.parse_args()

    questions_path = DEMO_CORPUS.with_name("questions.jsonl")
    questions = [json.loads(line) for line in questions_path.read_text(encoding="utf-8").splitlines() if line.strip()]
    passages = {p["id"]: p["text"] for p in map(json.loads, DEMO_CORPUS.read_text(encoding="utf-8").splitlines())}
    mlflow.set_tracking_uri(args.tracking_uri)
    mlflow.set_experiment(args.experiment)
    mlflow.langchain.autolog()
    chain = build(k=args.k, chunk_size=args.chunk_size)
    asked = []
    for q in questions[: args.limit]:
        chain.invoke(q["query"])
        asked.append((mlflow.get_last_active_trace_id(), q))
    mlflow.flush_trace_async_logging()
    for trace_id, q in asked:  # a reviewer's labels
        mlflow.log_expectation(trace_id=trace_id, name="expected_response", value=q["reference_answers"][0])
        mlflow.log_expectation(trace_id=trace_id, name="expected_retrieved_context",
                               value=[{"doc_uri": pid, "content": passages[pid]} for pid in q["gt_context_ids"]])
    print(f"{len(asked)} traces in experiment {args.experiment!r} of {args.tracking_uri}")


if __name__ == "__main__":
    main()
