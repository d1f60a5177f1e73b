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
    hydra_dir = next(tmp_path.glob("outputs/*/*/.hydra"))  # Hydra's own copies hold where the secrets are, not them
    assert "run_name: ${oc.env:RAGEXP_SECRET_OVERRIDE_" in (hydra_dir / "config.yaml").read_text()
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
    """A system under test that echoes a token in its answer and retrieves a page quoting it: the
    per-sample tables keep the row, not the token (a text cell and a list cell alike)."""
    import json

    records = tmp_path / "records.jsonl"
    records.write_text("\n".join(json.dumps(r) for r in [
        {"id": "1", "query": "what is the token?", "answer": f"the token is {SERVICE_TOKEN}",
         "reference_answers": ["no token"], "contexts": ["a page", f"a page that quotes {SERVICE_TOKEN}"]},
        {"id": "2", "query": "capital of France?", "answer": "Paris", "reference_answers": ["Paris"],
         "contexts": ["Paris is the capital of France."]},
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
    contexts = [row[table["columns"].index("contexts")] for row in table["data"]]
    assert "a page that quotes ***" in contexts[0] and "Paris is the capital of France." in contexts[1]


# --- a store's password in every form SQLAlchemy and MLflow accept --------------------------------------

PG_PASSWORD = "s3/cr:et-PGPASS"  # a '/' and a ':' (SQLAlchemy takes them unencoded, up to the '@')


@pytest.mark.parametrize("uri, password, shown", [
    ("postgresql://ragexp:s3/cr:et@db:5432/runs", "s3/cr:et", "postgresql://***@db:5432/runs"),
    ("postgresql+psycopg://u@corp:p/w@db/runs", "p/w", "postgresql+psycopg://***@db/runs"),  # '@' in the user
    ("mysql+pymysql://root:a:b/c@localhost/x", "a:b/c", "mysql+pymysql://***@localhost/x"),
    ("postgresql://u:pa%40ss@db/runs", "pa@ss", "postgresql://***@db/runs"),  # percent-encoded
    ("http://alice:pa55/w0rd@127.0.0.1:5000", None, "http://***@127.0.0.1:5000"),
    ("https://token-ABCDEF@mlflow.example.com", None, "https://***@mlflow.example.com"),
    (r"tracking.uri=postgresql\://u\:s3/cr\:et@db/runs", None, r"tracking.uri=postgresql\://***@db/runs"),  # Hydra's quoting
])
def test_url_credentials_in_every_accepted_form_are_redacted(uri, password, shown):
    from ragexp.common.secrets import redact_url, scrub

    if password is not None:  # the form is one SQLAlchemy reads this password from
        from sqlalchemy.engine import make_url

        assert make_url(uri).password == password
    assert scrub(uri) == redact_url(uri) == shown
    # a URL without credentials, or an '@' in a path, is left as it is
    assert scrub("see https://example.com/@user and sqlite:////tmp/a@b/mlflow.db") == (
        "see https://example.com/@user and sqlite:////tmp/a@b/mlflow.db")


def test_a_typed_secret_override_reaches_hydra_by_name_only():
    from ragexp.common.secrets import hide_overrides, restore_url

    env: dict[str, str] = {}
    argv = ["-m", f"tracking.uri=postgresql://u:{PG_PASSWORD}@db/runs", "judge.api_key=abcdefgh12345",
            "metric=answer", "dataset.system=weak,strong", "run_name=plain"]
    hidden = hide_overrides(argv, env)
    assert hidden == ["-m", "tracking.uri=${oc.env:RAGEXP_SECRET_OVERRIDE_1}",
                      "judge.api_key=${oc.env:RAGEXP_SECRET_OVERRIDE_2}", *argv[3:]]
    assert env == {"RAGEXP_SECRET_OVERRIDE_1": f"postgresql://u:{PG_PASSWORD}@db/runs",
                   "RAGEXP_SECRET_OVERRIDE_2": "abcdefgh12345"}
    # what a results folder keeps is restored from the environment when it is logged later
    assert restore_url("postgresql://***@db/runs", env) == f"postgresql://u:{PG_PASSWORD}@db/runs"
    assert restore_url("sqlite:////tmp/mlflow.db", {}) == "sqlite:////tmp/mlflow.db"
    from ragexp.errors import ConfigError

    with pytest.raises(ConfigError, match=r"saved without its credentials .* set MLFLOW_TRACKING_URI"):
        restore_url("postgresql://***@db/runs", {"MLFLOW_TRACKING_URI": "postgresql://u:x@other/runs"})


def _pg_leaks(postgres_cluster, database: str) -> list[str]:
    dump = postgres_cluster.sql("SELECT string_agg(key || '=' || value, ' ') FROM params", database)
    dump += postgres_cluster.sql("SELECT string_agg(key || '=' || value, ' ') FROM tags", database)
    return [PG_PASSWORD] if PG_PASSWORD in dump else []


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow
def test_a_store_password_with_slash_and_colon_reaches_no_file(tmp_path, data_dir, postgres_cluster, monkeypatch):
    import json
    import os
    import subprocess
    import sys

    import ragexp

    def store() -> tuple[str, str]:
        uri = postgres_cluster.create_database()
        return uri.rsplit("/", 1)[1], uri.replace("://ragexp@", f"://ragexp:{PG_PASSWORD}@")

    # 1. ragexp.evaluate(log="postgresql://...") in this process
    db1, uri1 = store()
    monkeypatch.chdir(tmp_path)
    result = ragexp.evaluate("demo", metric="answer", log=uri1, progress=False)
    assert result.run_id
    # 2. the command line, tracking.uri typed; 3. MLFLOW_TRACKING_URI; 4. a sweep under submitit_local
    db2, uri2 = store()
    db3, uri3 = store()
    db4, uri4 = store()
    base = [f"data_dir={data_dir}", "metric=answer", "progress=false"]
    printed = []
    for args, env in (([f"tracking.uri={uri2}"], {}), ([], {"MLFLOW_TRACKING_URI": uri3}),
                      (["-m", "hydra/launcher=submitit_local", "dataset.system=weak,strong", f"tracking.uri={uri4}"], {})):
        proc = run_cli(*args, *base, cwd=tmp_path, env=env, timeout=900)
        printed += [proc.stdout, proc.stderr]
    assert list(tmp_path.rglob("*.pkl")), "submitit wrote no job pickle: the sweep did not run under it"
    assert list(tmp_path.rglob("mlflow_parent_run.json")) and len(list(tmp_path.rglob("mlflow_run.json"))) == 5
    leaks = [x for x in _leaks(tmp_path, *printed) if PG_PASSWORD in x]
    leaks += [f.name for f in tmp_path.rglob("*") if f.is_file() and PG_PASSWORD.encode() in f.read_bytes()]
    for db in (db1, db2, db3, db4):
        leaks += _pg_leaks(postgres_cluster, db)
    assert leaks == []
    # a saved folder is logged again later: the password comes back from the environment, not the file
    folder = next(f.parent for f in tmp_path.rglob("mlflow_run.json") if "multirun" not in str(f))
    saved = json.loads((folder / "mlflow_run.json").read_text())
    assert saved["tracking_uri"].startswith("postgresql://***@127.0.0.1:")
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    up = [sys.executable, "-m", "ragexp.tracking.upload", "--again", str(folder)]
    refused = subprocess.run(up, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode == 2 and "saved without its credentials" in refused.stderr
    matching = next(u for u in (uri1, uri2, uri3) if u.rsplit("/", 1)[1] == saved["tracking_uri"].rsplit("/", 1)[1])
    done = subprocess.run(up, env={**env, "MLFLOW_TRACKING_URI": matching}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert PG_PASSWORD not in done.stdout + done.stderr


def test_the_sweeps_callback_pickled_with_each_job_holds_no_store_address(monkeypatch):
    # submitit writes the launcher's callbacks into every job's pickle; the store's address stays out
    import pickle

    from ragexp.tracking.callbacks import ParentRunCallback
    from ragexp.tracking.launch import PARENT_URI_ENV

    callback = ParentRunCallback()
    callback.run_id, callback.uri = "abc", f"postgresql://u:{PG_PASSWORD}@db/runs"
    data = pickle.dumps(callback)
    assert PG_PASSWORD.encode() not in data
    monkeypatch.setenv(PARENT_URI_ENV, callback.uri)  # the job's environment, inherited from the sweep
    assert pickle.loads(data).uri == callback.uri and pickle.loads(data).run_id == "abc"
