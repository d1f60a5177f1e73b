"""A record's other keys reach the per-sample table as docs/records.md says (issue 33), by a real process."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from cli import run_cli


@pytest.mark.integration
def test_extra_record_keys_are_columns_of_the_per_sample_table(tmp_path):
    rows = [{"id": "1", "query": "q1", "answer": "a", "reference_answers": ["a"], "topic": "geo", "difficulty": 3,
             "meta": {"source": "wiki"}},
            {"id": "2", "query": "q2", "answer": "b", "reference_answers": ["c"], "topic": "bio", "difficulty": "hard",
             "team.name": "x"}]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_cli("dataset=records", f"dataset.path={path}", "metric=exact_match", "progress=false",
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", cwd=tmp_path)
    table = pd.read_parquet(next(tmp_path.glob("outputs/*/*/per_sample.parquet")))
    assert list(table["topic"]) == ["geo", "bio"]
    assert list(table["difficulty"]) == ["3", "hard"]  # mixed types: each value as JSON text
    assert table["meta"][0] == '{"source": "wiki"}' and table["meta"].isna()[1]
    assert table["team_name"].isna()[0] and table["team_name"][1] == "x"  # no dot in a column name
    assert list(table["exact_match"]) == [1.0, 0.0]
