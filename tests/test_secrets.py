"""Secrets never reach anything ragexp writes, logs or prints — Hydra's files in the output folder included.

Real CLI runs and multiruns (the basic launcher and joblib's worker processes) with secrets in
the environment (OPENAI_API_KEY, MY_SERVICE_TOKEN), in run_name, in an override named like a key,
and as a URL's password; then every byte of the launch directory (the SQLite store, MLflow's
artifacts, Hydra's output folders and log files) and everything printed is searched for them.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from cli import parent_and_children, run_cli, runs

OPENAI_KEY = "sk-test-OPENAIKEYVALUE-0123456789"
SERVICE_TOKEN = "tok-SERVICETOKENVALUE-42"
URL_PASSWORD = "urlpass-SECRET-77"
TYPED_KEY = "typed-KEYVALUE-5150"  # in no environment variable: known to be a secret by its key's name
SECRETS = (OPENAI_KEY, SERVICE_TOKEN, URL_PASSWORD, TYPED_KEY)
ENV = {"OPENAI_API_KEY": OPENAI_KEY, "MY_SERVICE_TOKEN": SERVICE_TOKEN}
API_BASE = f"judge.api_base=http://me:{URL_PASSWORD}@127.0.0.1:9/v1"


def _leaks(where: Path, *printed: str) -> list[str]:
    """Every file under ``where`` (and the printed text) that holds one of the secrets."""
    found = []
    for path in sorted(where.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.relative_to(where)}: {s}" for s in SECRETS if s.encode() in data]
    for i, text in enumerate(printed):
        found += [f"printed output {i}: {s}" for s in SECRETS if s in text]
    return found


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("ragexp: warning:") and "secret" in line]


@pytest.mark.integration
def test_plain_run_with_secrets_in_run_name_and_url(tmp_path, data_dir):
    proc = run_cli(f"data_dir={data_dir}", "metric=hit_rate", "progress=false", "judge=openai_compatible",
                   f"run_name={SERVICE_TOKEN}", API_BASE, f"+extra.api_key={TYPED_KEY}",
                   f"+tracking.tags.note=called with {OPENAI_KEY}", cwd=tmp_path, env=ENV)
    assert _leaks(tmp_path, proc.stdout, proc.stderr) == []
    (warning,) = _warnings(proc.stderr)  # said once, the overrides shown redacted
    assert "run_name=***" in warning and "http://***@127.0.0.1:9/v1" in warning and "+extra.api_key=***" in warning

    _, found = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (run,) = found
    assert run.info.run_name == "***"
    assert run.data.params["judge.api_base"] == "http://***@127.0.0.1:9/v1"  # the host stays readable
    assert run.data.params["extra.api_key"] == "***"
    assert run.data.tags["note"] == "called with ***"
    hydra_dir = next(tmp_path.glob("outputs/*/*/.hydra"))  # Hydra's own copies, rewritten redacted
    assert "run_name: '***'" in (hydra_dir / "config.yaml").read_text()
    assert "+extra.api_key=***" in (hydra_dir / "overrides.yaml").read_text()


@pytest.mark.integration
def test_multirun_in_joblib_workers_keeps_secrets_out_of_names_tags_tables_and_hydra_files(tmp_path, data_dir):
    proc = run_cli("-m", "hydra/launcher=joblib", "hydra.launcher.n_jobs=2", f"data_dir={data_dir}",
                   "metric=hit_rate", "progress=false", "judge=openai_compatible", "dataset.system=strong,weak",
                   API_BASE, f"+extra.api_key={TYPED_KEY}", f"+extra.note=token {SERVICE_TOKEN}",
                   f"+extra.other=x{OPENAI_KEY}", cwd=tmp_path, env=ENV)
    assert _leaks(tmp_path, proc.stdout, proc.stderr) == []
    assert len(_warnings(proc.stderr)) == 1
    assert "Launching" in proc.stdout or "launching" in proc.stdout  # Hydra's job lines were printed, redacted
    assert "+extra.api_key=***" in proc.stdout

    client, parents, children = parent_and_children(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (parent,) = parents
    assert len(children) == 2
    assert "+extra.api_key=***" in parent.data.tags["ragexp.sweep"]
    assert "judge.api_base=http://***@127.0.0.1:9/v1" in parent.data.tags["ragexp.sweep"]
    for child in children:
        # the job's overrides, as Hydra quotes them (a space as "\ "), the secrets replaced
        assert "+extra.api_key=***," in child.info.run_name and "+extra.note=token\\ ***," in child.info.run_name
    sweep = next(tmp_path.glob("multirun/*/*"))
    assert "+extra.api_key=***" in (sweep / "multirun.yaml").read_text()


@pytest.mark.integration
def test_basic_launcher_multirun_and_sweep_results(tmp_path, data_dir):
    proc = run_cli("-m", f"data_dir={data_dir}", "metric=hit_rate", "progress=false", "dataset.system=strong,weak",
                   f"run_name={OPENAI_KEY}", f"+extra.password={TYPED_KEY}", cwd=tmp_path, env=ENV)
    assert _leaks(tmp_path, proc.stdout, proc.stderr) == []
    client, parents, children = parent_and_children(f"sqlite:///{tmp_path / 'mlflow.db'}")
    (parent,) = parents
    assert [c.info.run_name for c in children] == ["***", "***"]
    path = client.download_artifacts(parent.info.run_id, "sweep_results.json", str(tmp_path / "dl"))
    text = Path(path).read_text()
    assert '"run_name": "***"' in text


def test_what_counts_as_a_secret(monkeypatch):
    from ragexp.common.secrets import RedactingFilter, scrub

    monkeypatch.setenv("MY_SERVICE_TOKEN", SERVICE_TOKEN)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "sometimes")  # a setting, not a token
    monkeypatch.setenv("PWD", "/home/someone")  # the current folder, not a password
    assert scrub(f"a {SERVICE_TOKEN} b") == "a *** b"
    assert scrub("sometimes in /home/someone") == "sometimes in /home/someone"
    assert scrub("postgresql://ragexp:hunter22@db:5432/runs") == "postgresql://***@db:5432/runs"
    assert scrub("retriever.top_k=5 metric.hit_rate.k=3 max_tokens=10 key_field=id") == (
        "retriever.top_k=5 metric.hit_rate.k=3 max_tokens=10 key_field=id")
    record = logging.LogRecord("hydra", logging.INFO, __file__, 1, "#%d : %s", (0, f"x={SERVICE_TOKEN}"), None)
    assert RedactingFilter().filter(record) and record.getMessage() == "#0 : x=***"


@pytest.mark.integration
def test_per_sample_table_cells_are_scrubbed(tmp_path, data_dir):
    """A system under test that echoes a token in its answer: per_sample.json keeps the row, not the token."""
    import json

    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in [
        {"id": "1", "query": "what is the token?", "answer": f"the token is {SERVICE_TOKEN}",
         "reference_answers": ["no token"]},
        {"id": "2", "query": "capital of France?", "answer": "Paris", "reference_answers": ["Paris"]},
    ]) + "\n")
    proc = run_cli(f"data_dir={data_dir}", "dataset=records", f"dataset.path={records}", "metric=exact_match",
                   "progress=false", cwd=tmp_path, env=ENV)
    records.unlink()  # the input itself holds the token; everything ragexp wrote must not
    assert _leaks(tmp_path, proc.stdout, proc.stderr) == []
    client, found = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    path = client.download_artifacts(found[0].info.run_id, "per_sample.json", str(tmp_path / "dl"))
    table = json.loads(Path(path).read_text())
    answers = [row[table["columns"].index("answer")] for row in table["data"]]
    assert answers == ["the token is ***", "Paris"]
