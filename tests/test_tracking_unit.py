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
