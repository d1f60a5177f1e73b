"""Params flattening and secret redaction (SPEC §4: secrets never reach MLflow)."""

from __future__ import annotations

from ragexp.common.secrets import REDACTED, flatten, redact, scrub
from ragexp.tracking.store import resolve_uri, ui_command


def test_flatten_dotted_keys_and_redacted_secrets():
    cfg = {"judge": {"model": "gpt-4o", "api_key": "sk-live-abcdefgh", "max_tokens": 256},
           "retriever": {"top_k": 5, "name": "bm25"}, "empty": {}}
    assert flatten(cfg) == {
        "judge.model": "gpt-4o", "judge.api_key": REDACTED, "judge.max_tokens": "256",
        "retriever.top_k": "5", "retriever.name": "bm25", "empty": "{}",
    }


def test_secret_values_from_the_environment_are_scrubbed_anywhere(monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-1234567890")
    text = "calling with tok-1234567890 as bearer"
    assert scrub(text) == "calling with *** as bearer"
    assert redact({"note": ["x tok-1234567890"]}) == {"note": ["x ***"]}


def test_key_shaped_values_are_scrubbed_even_without_env():
    assert scrub("key=sk-proj-ABCDEFGHIJKLMNOP") == "key=***"


def test_ordinary_keys_are_not_mistaken_for_secrets():
    flat = flatten({"top_k": 3, "max_tokens": 10, "tokenizer": "word", "key_field": "id"})
    assert flat == {"top_k": "3", "max_tokens": "10", "tokenizer": "word", "key_field": "id"}


def test_tracking_uri_precedence(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    assert resolve_uri(None) == f"sqlite:///{tmp_path.resolve() / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://127.0.0.1:5999")
    assert resolve_uri(None) == "http://127.0.0.1:5999"
    assert resolve_uri("sqlite:///x.db") == "sqlite:///x.db"
    assert ui_command("sqlite:///x.db") == "python -m ragexp.ui tracking.uri=sqlite:///x.db"


def test_the_dataset_input_has_the_schema_and_profile_mlflow_gives_the_whole_frame():
    # the entity is made from two rows of each column's kinds of value; MLflow's from_pandas sees every row
    import json
    from pathlib import Path
    import warnings

    import pandas as pd
    from mlflow.data.pandas_dataset import from_pandas

    from ragexp.tracking.log import _dataset_input, _dataset_shape

    columns = {
        "id": [f"q{i}" for i in range(6)],
        "query": ["", "what?", "who?", "", "when?", "why?"],  # empty texts are values
        "reference_answers": [["a"], ["b", "c"], [], ["d"], ["e"], ["f"]],
        "gt_contexts": [None, ["p"], [], None, ["q"], ["r"]],  # some rows lack it
        "gt_context_ids": [[], [], [], [], [], []],  # never a value: MLflow says "any"
        "answer": ["x"] * 6,  # an output, not part of the dataset
    }
    saved = {"name": "mine", "digest": "abc123", "source": "/data/mine.jsonl", **_dataset_shape(columns)}
    assert "q0" not in json.dumps(saved)  # mlflow_run.json holds kinds of value, not the rows
    entity = _dataset_input(Path("."), json.loads(json.dumps(saved)))  # as read back from mlflow_run.json
    inputs = {k: v for k, v in columns.items() if k != "answer"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        expected = from_pandas(pd.DataFrame(inputs), name="mine", digest="abc123").to_dict()
    assert entity["schema"] == expected["schema"] and entity["profile"] == expected["profile"]
    assert {c["name"]: c["required"] for c in json.loads(entity["schema"])["mlflow_colspec"]}["gt_contexts"] is False
    assert (entity["name"], entity["digest"], entity["source_type"]) == ("mine", "abc123", "local")
    assert json.loads(entity["source"]) == {"uri": "/data/mine.jsonl"}
