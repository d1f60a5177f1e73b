"""Redaction by value is exact (issue 33): ordinary words are never rewritten, known secrets always are.

One real CLI run with a judge against tests/judge_server.py, with a password that is a common word
(``POSTGRES_PASSWORD=mlflow``) in the environment and that word all over the data, the store's path
and a user-name-only URL; the judge's key in a variable whose name does not look secret
(``judge.api_key_env=JUDGE_AUTH``) echoed back by the server in a 400; a provider-shaped key quoted in
a judge reply. Nothing ragexp writes or prints may hold a secret, and no data, path or config value may
be rewritten.
"""

from __future__ import annotations

import json
import sqlite3

import pandas as pd
import pytest
from cli import run_cli

from judge_server import JudgeServer, Reply

JUDGE_KEY = "jk-7Qx2-JUDGEAUTHVALUE"
QUOTED_KEY = "sk-proj-QUOTEDINREPLY0123456789"


class EchoingJudge(JudgeServer):
    """A judge that answers a 400 quoting the request's Authorization header for prompts marked [echo]."""

    def _handle(self, handler, body):
        if "[echo]" in json.dumps(body):
            msg = f"bad request (you sent Authorization: {handler.headers.get('Authorization')})"
            handler._send(400, json.dumps({"error": {"message": msg, "type": "invalid_request_error"}}).encode())
            return
        super()._handle(handler, body)


def _reply(request):
    if request.task == "relevance":  # a verdict whose reason quotes a provider-shaped key
        return Reply(text=json.dumps({"relevant": True, "reason": f"it names the key {QUOTED_KEY}"}))
    return None


@pytest.mark.integration
def test_common_word_password_and_unusual_key_variable(tmp_path):
    records = tmp_path / "mlflow-data" / "records.jsonl"
    records.parent.mkdir()
    rows = [{"id": f"q{i}", "query": f"Which tool tracks runs? {'[echo]' if i == 2 else ''}".strip(),
             "answer": "mlflow tracks runs; admin can log in", "reference_answers": ["mlflow"],
             "contexts": ["mlflow is a tracking server.", "postgresql://mlflow@db/runs is its store"]}
            for i in range(4)]
    records.write_text("".join(json.dumps(r) + "\n" for r in rows))
    before = records.read_bytes()
    store = tmp_path / "mlflow-project" / "mlflow.db"
    store.parent.mkdir()
    with EchoingJudge(script=_reply) as server:
        proc = run_cli("dataset=records", f"dataset.path={records}", "metric=retrieval_precision",
                       "judge=openai_compatible", f"judge.api_base={server.url}", "judge.api_key_env=JUDGE_AUTH",
                       f"judge.cache_path={tmp_path / 'cache.sqlite'}", f"tracking.uri=sqlite:///{store}",
                       "progress=false", "+tracking.tags.owner=postgresql://mlflow@db/runs", cwd=tmp_path,
                       env={"POSTGRES_PASSWORD": "mlflow", "JUDGE_AUTH": JUDGE_KEY, "ADMIN_PASSWORD": "admin"},
                       check=False, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert records.read_bytes() == before  # the data file is never altered
    assert str(store) in out and "***" not in out  # the printed path and UI command whole; nothing to redact
    folder = next(tmp_path.glob("outputs/*/*"))
    table = pd.read_parquet(folder / "per_sample.parquet")
    assert list(table["answer"]) == [r["answer"] for r in rows]
    assert [list(c) for c in table["contexts"]] == [r["contexts"] for r in rows]
    details = " ".join(str(v) for v in table.filter(like="detail").to_numpy().ravel())
    assert "Authorization: Bearer ***" in details  # the echoed key, redacted where it appears as a secret
    assert "mlflow" in (folder / "config.yaml").read_text() and "'***'" not in (folder / "config.yaml").read_text()
    everything = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p != records)
    assert JUDGE_KEY.encode() not in everything and QUOTED_KEY.encode() not in everything
    assert JUDGE_KEY not in out and QUOTED_KEY not in out
    cached = sqlite3.connect(tmp_path / "cache.sqlite").execute("SELECT text FROM replies").fetchall()
    assert cached and all(QUOTED_KEY not in t for (t,) in cached)
    assert any("it names the key ***" in t for (t,) in cached)  # scrubbed like the tables, still a verdict
