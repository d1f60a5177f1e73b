"""A streamed run's ``result.per_sample`` is read a column at a time from its Parquet file
(ragexp/results/sample_table.py; docs/api.md, "What it returns"): one column without the texts,
the same values as the run in memory, the whole DataFrame only when asked for."""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa
import pytest

import ragexp
from ragexp.results.sample_table import SampleTable

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import write_records  # noqa: E402


def test_streamed_per_sample_reads_one_column(tmp_path):
    path = write_records(tmp_path / "records.jsonl", 300)
    metric = "[answer_token_f1,exact_match,context_recall]"
    streamed = ragexp.evaluate(path, metric=metric, log=False, overrides=["execution.mode=stream",
                                                                           "execution.chunk_records=100"])
    memory = ragexp.evaluate(path, metric=metric, log=False, overrides=["execution.mode=memory"])
    assert streamed.summary["execution"]["mode"] == "stream"
    table = streamed.per_sample
    assert isinstance(table, SampleTable) and not table.loaded
    assert table.shape == memory.per_sample.shape and list(table.columns) == list(memory.per_sample.columns)
    f1 = table["answer_token_f1"]
    assert f1.tolist() == memory.per_sample["answer_token_f1"].tolist() and f1.dtype == memory.per_sample["answer_token_f1"].dtype
    assert table[["id", "exact_match/status"]].equals(memory.per_sample[["id", "exact_match/status"]])
    assert isinstance(table.to_arrow(["answer"]), pa.Table) and table.to_arrow(["answer"]).num_rows == 300
    assert table.head(3).equals(memory.per_sample.head(3))
    with pytest.raises(KeyError, match="no_such_metric"):
        table["no_such_metric"]
    assert not table.loaded  # none of the above read the whole table
    assert table.equals(memory.per_sample) and table.loaded  # a DataFrame's own method: the whole table, once
    assert table.loc[2, "id"] == memory.per_sample.loc[2, "id"]
