"""Sweeps over pipeline settings, run as a user runs them: ``python -m ragexp -m …`` in a fresh
directory, then MLflow read back (one parent run, a child per job) and the index cache checked."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from cli import parent_and_children, run_cli

from ragexp.pipeline.cache import IndexCache

ROOT = Path(__file__).resolve().parents[1]
#: the sweeps below are read for their metrics and indexes: no per-sample traces (tests/test_traces.py has those)
NO_TRACES = "tracking.traces=0"


def _uri(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'mlflow.db'}"


@pytest.mark.integration
def test_bm25_sweep_over_top_k_gives_non_decreasing_recall_under_one_parent(tmp_path, data_dir):
    run_cli("-m", f"data_dir={data_dir}", "dataset=squad2", "dataset.limit=150", "retriever=bm25",
            "retriever.top_k=1,3,5", "metric=recall_at_k", "metric.recall_at_k.k=null", "progress=false", NO_TRACES,
            cwd=tmp_path)
    _, parents, children = parent_and_children(_uri(tmp_path))
    assert len(parents) == 1 and len(children) == 3
    assert {c.data.tags["mlflow.parentRunId"] for c in children} == {parents[0].info.run_id}
    recall = {int(c.data.params["retriever.top_k"]): c.data.metrics["recall_at_k"] for c in children}
    assert sorted(recall) == [1, 3, 5]
    assert recall[1] <= recall[3] <= recall[5]
    assert recall[1] < recall[5]  # deeper lists find gold paragraphs the first hit missed
    assert all(c.data.metrics["latency/retrieve"] > 0 and "latency/total" in c.data.metrics for c in children)
    # The three jobs share one BM25 index: built by the first job, loaded by the others.
    assert len(IndexCache(tmp_path / ".ragexp_cache" / "index").builds()) == 1


@pytest.mark.integration
def test_joblib_parallel_jobs_build_the_shared_index_once(tmp_path, data_dir):
    run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"data_dir={data_dir}", "dataset=squad2",
            "dataset.limit=40", "retriever=bm25", "chunker=words", "chunker.size=40", "retriever.top_k=1,2,3,4",
            "metric=recall_at_k", "metric.recall_at_k.k=null", "progress=false", NO_TRACES, cwd=tmp_path)
    _, parents, children = parent_and_children(_uri(tmp_path))
    assert len(parents) == 1 and len(children) == 4 and all(c.info.status == "FINISHED" for c in children)
    cache = IndexCache(tmp_path / ".ragexp_cache" / "index")
    assert len(cache.builds()) == 1
    dirs = [p.name for p in cache.root.iterdir() if p.is_dir()]
    assert dirs == cache.builds()  # one finished index, no temporary directory left behind
    # each child says in MLflow whether it built the index or loaded it: one build in all
    assert sum(c.data.metrics["index/bm25/built"] for c in children) == 1
    recall = {int(c.data.params["retriever.top_k"]): c.data.metrics["recall_at_k"] for c in children}
    assert recall[1] <= recall[2] <= recall[3] <= recall[4]


@pytest.mark.integration
def test_optuna_experiment_optimises_the_objective_over_trials(tmp_path, data_dir):
    run_cli("-m", "+experiment=optuna_bm25", f"data_dir={data_dir}", "hydra.sweeper.n_trials=3", "dataset.limit=40",
            "progress=false", NO_TRACES, cwd=tmp_path)
    _, parents, children = parent_and_children(_uri(tmp_path))
    assert len(parents) == 1 and len(children) == 3
    [results] = list((tmp_path / "multirun").rglob("optimization_results.yaml"))
    best = yaml.safe_load(results.read_text())
    # Optuna's best value is the best child's objective (mrr), and its parameters are that child's.
    values = {c.info.run_id: c.data.metrics["mrr"] for c in children}
    best_child = max(children, key=lambda c: values[c.info.run_id])
    assert best["best_value"] == max(values.values())
    assert float(best_child.data.params["retriever.k1"]) == best["best_params"]["retriever.k1"]
    assert len({c.data.params["retriever.b"] for c in children}) == 3  # three different trials


@pytest.mark.integration
def test_custom_pipeline_example_runs_as_documented(tmp_path, data_dir):
    example = ROOT / "experiments" / "custom_pipeline"
    out = run_cli(f"data_dir={data_dir}", "dataset=squad2", "dataset.limit=30", "pipeline=custom",
                  "pipeline._target_=my_rag.KeywordRAG", f"+pipeline.corpus_path={data_dir}/squad2/dev-v2.0.json",
                  "metric=[recall_at_k,answer_token_f1,avg_latency]", f"tracking.uri={_uri(tmp_path)}",
                  f"hydra.run.dir={tmp_path / 'out'}", "progress=false", cwd=example)
    assert "recall_at_k/recall_at_3" in out.stdout
    _, found = __import__("cli").runs(_uri(tmp_path))
    [run] = found
    m = run.data.metrics
    assert 0 < m["recall_at_k/recall_at_1"] <= m["recall_at_k/recall_at_3"] <= 1
    assert m["avg_latency"] == m["latency/total"]
    assert m["latency/total"] >= m["latency/retrieve"]
    assert set(m) >= {"latency/retrieve", "latency/generate", "answer_token_f1"}
