"""`metric=autorag` reproduces the metric values AutoRAG stored in its own result files, on every
row of the shipped ones (AutoRAG's tests' resources: a lexical retrieval node's output and the
best pipeline's generator output).

Which stored column scores which list: a result table of a later node keeps every earlier
node's metric columns. In `result_generator_best_0` the retrieved list (`retrieved_ids`, five
passages) is the passage reranker's, scored by `passage_reranker_retrieval_*`; the plain
`retrieval_*` columns there belong to the retrieval node, whose own eight-passage list the
reranker replaced and the file no longer holds; `query_expansion_retrieval_*` score the
per-module lists (`retrieved_ids_lexical`, `retrieved_ids_semantic`). AutoRAG's retrieval F1
is the harmonic mean of its precision and recall; ragexp has no such key, so it is computed
from ragexp's `precision_at_k` and `recall_at_k` (k: null). METEOR has no ragexp counterpart.
"""

from __future__ import annotations

import pandas as pd
import pytest

from ragexp.core.scoring import build_metrics, score

# result file, dataset.retrieval (None: the loader's choice), the ids column scored, its metric-column prefix
CASES = [
    ("result_lexical_retrieval_best_0", None, "retrieved_ids_lexical", ""),
    ("result_generator_best_0", None, "retrieved_ids", "passage_reranker_"),
    ("result_generator_best_0", "lexical", "retrieved_ids_lexical", "query_expansion_"),
    ("result_generator_best_0", "semantic", "retrieved_ids_semantic", "query_expansion_"),
]


def _run(compose, result: str, retrieval: str | None):
    overrides = ["metric=autorag", "dataset=autorag_result", f"dataset.result=${{data_dir}}/autorag/{result}.parquet"]
    if retrieval:
        overrides.append(f"dataset.retrieval={retrieval}")
    cfg = compose(*overrides)
    from hydra.utils import instantiate

    ds = instantiate(cfg.dataset)
    specs = build_metrics(cfg.metric, cfg.matcher)[0]
    return ds.records, score(ds.records, specs)


@pytest.mark.parametrize("result, retrieval, ids, prefix", CASES)
def test_retrieval_metrics_equal_autorags_stored_values_on_every_row(compose, data_dir, result, retrieval, ids, prefix):
    stored = pd.read_parquet(data_dir / "autorag" / f"{result}.parquet").set_index("qid")
    records, scores = _run(compose, result, retrieval)
    assert len(records) == len(stored) == 10
    for i, rec in enumerate(records):
        row = stored.loc[rec.id]
        assert list(rec.context_ids) == list(row[ids])
        p, r = scores["precision_at_k"][i].value, scores["recall_at_k"][i].value
        assert p == pytest.approx(row[f"{prefix}retrieval_precision"], abs=1e-12), rec.id
        assert r == pytest.approx(row[f"{prefix}retrieval_recall"], abs=1e-12), rec.id
        assert (2 * p * r / (p + r) if p + r else 0.0) == pytest.approx(row[f"{prefix}retrieval_f1"], abs=1e-12), rec.id


def test_bleu_and_rouge_equal_autorags_stored_values_on_every_row(compose, data_dir):
    stored = pd.read_parquet(data_dir / "autorag" / "result_generator_best_0.parquet").set_index("qid")
    records, scores = _run(compose, "result_generator_best_0", None)
    for i, rec in enumerate(records):
        row = stored.loc[rec.id]
        assert rec.answer == row["generated_texts"]
        assert scores["bleu"][i].value == pytest.approx(row["bleu"], abs=1e-9), rec.id
        assert scores["rougeL"][i].value == pytest.approx(row["rouge"], abs=1e-12), rec.id


def test_the_plain_retrieval_columns_of_a_generator_table_score_another_list(compose, data_dir):
    # why the generator table is checked against passage_reranker_*: its plain retrieval_precision
    # (1/8) is not a value of the five-passage list it holds (1/5)
    stored = pd.read_parquet(data_dir / "autorag" / "result_generator_best_0.parquet")
    assert set(stored["retrieval_precision"]) == {1 / 8} and set(stored["passage_reranker_retrieval_precision"]) == {1 / 5}
    assert {len(ids) for ids in stored["retrieved_ids"]} == {5}
