"""Every metric value, interval, status and logged key of a fixed set of runs, to compare a refactoring's
before and after (issue 31: "behaviour is unchanged").

    python benchmarks/behaviour_snapshot.py --save /tmp/before.json     # on the old tree
    python benchmarks/behaviour_snapshot.py --compare /tmp/before.json  # on the new one: exit 1 on a difference

The runs: the demo (both systems) with the default suite; the demo with ``metric=full`` and a judge
served by tests/judge_server.py (its sensible verdicts), once with ``judge.samples=1`` and once
with ``judge.samples=3`` (two-stage intervals), and the paired comparison of the two systems of
each; held-out style records written here (empty answers, nothing retrieved, no reference, absent
fields, people's labels, a judge reply that is unreadable twice, a server error) through every
judge metric; and the ``dataset.split=test`` part of the labelled records. Each run is logged to a
throw-away MLflow file store, and its metric keys and values, params, tags and artifact names are
kept with the per-sample table (values, statuses, details) and the interval of every aggregate.
What changes from run to run (run ids, times, durations, paths) is left out.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

VOLATILE = re.compile(r"(^|/)(duration|elapsed|seconds|time|started|ended|start_time|end_time|run_id|"
                      r"artifact_uri|mlflow\.|wall|cpu|rss|throughput)|_s$|latency_s$|tracking_uri|"
                      r"output_dir|cache_path|hydra|path$|results_folder|dataset_source|api_base", re.I)


def _clean(value):
    """JSON-safe and comparable: NaN as a string, floats at full precision, volatile keys dropped."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else repr(value)
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                if not VOLATILE.search(str(k))}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


def _run(store: str, data, name: str, **kw):
    import mlflow
    import ragexp

    result = ragexp.evaluate(data, log=store, run_name=name, **kw)
    per = result.per_sample
    table = {c: [_clean(v) for v in per[c].astype(object).where(per[c].notna(), None).tolist()]
             for c in per.columns if c not in ("latency_s",)}
    metrics = {k: _clean(dict(row)) for k, row in result.metrics.astype(object).iterrows()}
    client = mlflow.tracking.MlflowClient(store)
    run = client.get_run(result.run_id)
    artifacts = sorted(a.path for a in client.list_artifacts(result.run_id))
    logged = {
        "metrics": _clean({k: v for k, v in run.data.metrics.items()}),
        "params": _clean({k: v for k, v in run.data.params.items()}),
        "tags": sorted(k for k in run.data.tags if not k.startswith("mlflow.")),
        "artifacts": artifacts,
    }
    summary = _clean({k: v for k, v in result.summary.items() if k not in ("metrics",)})
    return result, {"per_sample": table, "metrics": metrics, "logged": logged, "summary": summary}


def _held_out(path: Path) -> None:
    """Records in the style of a held-out set: every edge a judge metric defines, and people's labels."""
    rows = [
        {"id": "h1", "query": "What does a queen bee do?", "answer": "The queen lays eggs. She lives for years.",
         "contexts": ["The queen bee lays up to 2,000 eggs a day.", "Worker bees gather nectar."],
         "reference_answers": ["She lays the colony's eggs."],
         "human": {"answer_consistency_binary": 0, "answer_similarity": 4, "answer_consistency": 0.5}},
        {"id": "h2", "query": "Who built the lighthouse?", "answer": "",
         "contexts": ["The lighthouse was built by Robert Stevenson."], "reference_answers": ["Robert Stevenson"],
         "human": {"answer_consistency_binary": 0, "answer_similarity": 0}},
        {"id": "h3", "query": "Why does sourdough rise?", "answer": "Wild yeast makes gas in the dough.",
         "contexts": [], "reference_answers": ["Yeast and bacteria produce carbon dioxide."],
         "human": {"answer_consistency_binary": 0, "answer_similarity": 3}},
        {"id": "h4", "query": "How far is the Moon?", "answer": "About 384,000 km away on average.",
         "contexts": ["The Moon orbits at an average distance of 384,400 km.", ""], "reference_answers": [],
         "human": {"answer_consistency_binary": 1}},
        {"id": "h5", "query": "How do gears work on a bicycle?", "answer": "I don't know.",
         "contexts": ["Gears change the ratio between pedalling and wheel turns."],
         "reference_answers": ["They change the pedalling ratio."], "human": {"answer_consistency_binary": 1}},
        {"id": "h6", "query": "Where do pandas live?", "answer": "Pandas live in the mountains of China.",
         "contexts": ["Giant pandas live in mountain forests of central China.", "Pandas eat bamboo."],
         "reference_answers": ["In the mountains of central China."],
         "human": {"answer_consistency_binary": 1, "answer_similarity": 5, "answer_consistency": 1.0}},
        {"id": "h7", "query": "Is tea from a plant?", "answer": "UNREADABLE tea comes from Camellia sinensis.",
         "contexts": ["Tea is made from the leaves of Camellia sinensis."], "reference_answers": ["Yes, Camellia sinensis."],
         "human": {"answer_consistency_binary": 1}},
        {"id": "h8", "query": "What is a dance of bees?", "answer": "SERVERERROR bees dance to show food.",
         "contexts": ["Bees dance to tell others where food is."], "reference_answers": ["The waggle dance."]},
        {"id": "h9", "query": "What is a lighthouse lens?", "answer": "A Fresnel lens focuses the light.",
         "reference_answers": ["A Fresnel lens."]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")


def _script(request):
    from judge_server import Reply

    text = request.first_user
    if "UNREADABLE" in text and request.task in ("full_support", "relevance"):
        return Reply(text="I would rather not say.")  # unreadable, and again on the re-ask: parse_error
    if "SERVERERROR" in text and request.task == "usage":
        return Reply(status=400, text="scripted bad request")
    return None


def snapshot() -> dict:
    import ragexp
    from judge_server import JudgeServer

    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        os.chdir(tmp)  # caches and results folders go to the throw-away directory
        store = f"sqlite:///{tmp}/mlflow.db"
        quick = {"stats": {"resamples": 2000}}
        det = {}
        for system in ("strong", "weak"):
            det[system], out[f"demo/default/{system}"] = _run(store, "demo", f"det-{system}", metric="default",
                                                             overrides=[f"dataset.system={system}"], **quick)
        out["compare/default"] = _clean(ragexp.compare_results(det["weak"], det["strong"]).comparison)
        with JudgeServer() as server:
            judge = [f"judge.api_base={server.url}", "judge.cache=false"]
            for k in (1, 3):
                runs = {}
                for system in ("strong", "weak"):
                    runs[system], out[f"demo/full/samples{k}/{system}"] = _run(
                        store, "demo", f"full{k}-{system}", metric="full", judge="openai_compatible",
                        overrides=[*judge, f"judge.samples={k}", f"dataset.system={system}"], **quick)
                out[f"compare/full/samples{k}"] = _clean(ragexp.compare_results(runs["weak"], runs["strong"]).comparison)
            server.script = _script
            _held_out(tmp / "held_out.jsonl")
            for split in ("all", "test"):
                _, out[f"held_out/{split}"] = _run(
                    store, str(tmp / "held_out.jsonl"), f"held-out-{split}", metric="full", judge="openai_compatible",
                    overrides=[*judge, "judge.max_retries=0", f"dataset.split={split}", "dataset.split_fraction=0.3"],
                    **quick)
        os.chdir(HERE.parent)
    return out


def differences(before, after, where: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        lines = []
        for k in sorted(set(before) | set(after)):
            if k not in after:
                lines.append(f"{where}/{k}: only before")
            elif k not in before:
                lines.append(f"{where}/{k}: only after")
            else:
                lines += differences(before[k], after[k], f"{where}/{k}")
        return lines
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after)) for d in differences(b, a, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {str(before)[:200]} -> {str(after)[:200]}"]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    a = p.parse_args()
    snap = json.loads(json.dumps(snapshot(), default=str))
    if a.save:
        a.save.write_text(json.dumps(snap, indent=1, sort_keys=True), encoding="utf-8")
        n = sum(len(v.get("metrics", {})) for v in snap.values() if isinstance(v, dict))
        print(f"saved {len(snap)} runs/comparisons, {n} aggregate rows, to {a.save}")
        return 0
    before = json.loads(a.compare.read_text(encoding="utf-8"))
    diff = differences(before, snap)
    for line in diff[:200]:
        print(line)
    print(f"{len(diff)} differences over {len(snap)} runs/comparisons")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
