"""``ragexp.evaluate`` / ``ragexp.compare_results``: the library API agrees with ``python -m ragexp``, says the
same one line on a bad row, works inside a running event loop with the judge, writes nothing with
``log=False`` and logs a real MLflow run with ``log=True``; the README's "Python API" section runs."""

from __future__ import annotations

import asyncio
import dataclasses
import doctest
import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import ragexp
from ragexp.errors import ConfigError, DataError

from cli import ROOT, run_cli
from judge_server import JudgeServer

#: canonical field → the foreign column name the tests' DataFrame uses
FOREIGN = {"query": "question", "contexts": "retrieved", "context_ids": "retrieved_ids",
           "gt_contexts": "gold_passages", "gt_context_ids": "gold_ids", "answer": "response",
           "reference_answers": "truths", "label": "human_label", "latency_s": "seconds"}


def demo_frame(system: str = "strong") -> pd.DataFrame:
    """The bundled demo's 50 records (6 Chinese) as a DataFrame with foreign column names."""
    from ragexp.datasets.demo import load_demo

    rows = []
    for r in load_demo(system=system).records:
        d = dataclasses.asdict(r)
        row = {FOREIGN.get(k, k): v for k, v in d.items() if k != "extra"}
        row["lang"] = d.get("extra", {}).get("lang")
        rows.append(row)
    return pd.DataFrame(rows)


def columns_override() -> str:
    return "dataset.columns={" + ", ".join(f"{f}: {c}" for f, c in FOREIGN.items()) + "}"


def read_table(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":  # read as plain columns: list cells stay lists
        from ragexp.results.tables import read_parquet_columns

        columns = read_parquet_columns(path)
        return pd.DataFrame(columns, columns=list(columns))
    table = json.loads(path.read_text(encoding="utf-8"))
    return pd.DataFrame(table["data"], columns=table["columns"])


def cell(v):
    """A table cell with pandas' missing values as None (a list cell, such as contexts, as it is)."""
    return v if isinstance(v, list) else None if pd.isna(v) else v


def same(a, b) -> bool:
    missing_a = a is None or (isinstance(a, float) and math.isnan(a))
    missing_b = b is None or (isinstance(b, float) and math.isnan(b))
    if missing_a or missing_b:
        return missing_a and missing_b
    return a == pytest.approx(b, rel=1e-9, abs=1e-10)  # per_sample.json keeps 10 decimals (pandas' to_json)


@pytest.mark.integration
def test_dataframe_with_foreign_columns_gives_the_clis_per_sample_values(tmp_path, data_dir):
    df = demo_frame()
    path = tmp_path / "foreign.jsonl"
    df.to_json(path, orient="records", lines=True, force_ascii=False)
    run_cli(f"data_dir={data_dir}", "dataset=mapped", f"dataset.path={path}", columns_override(),
            f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "progress=false", cwd=tmp_path)
    (cli_table,) = (tmp_path / "outputs").glob("*/*/per_sample.parquet")  # per_sample.json is trimmed for the UI
    cli = read_table(cli_table)
    cli_summary = json.loads((cli_table.parent / "summary.json").read_text())

    result = ragexp.evaluate(df, columns={f: c for f, c in FOREIGN.items()}, log=False)
    api = result.per_sample

    assert list(api["id"]) == list(df["id"]) == list(cli["id"])  # input order
    keys = [k for k in result.summary["metrics"] if k in cli.columns]
    assert len(keys) >= 35 and set(result.summary["metrics"]) == set(cli_summary["metrics"])
    for key in keys:
        for i, (a, c) in enumerate(zip(api[key], cli[key])):
            assert same(a, c), (key, i, a, c)
    for col in cli.columns:  # every other column the CLI's table has (statuses, details) agrees too
        if col in api.columns and col not in keys and col not in ("query", "answer"):
            assert [cell(v) for v in api[col]] == [cell(v) for v in cli[col]], col
    for key, value in cli_summary["metrics"].items():
        assert same(result.summary["metrics"][key], value), key
        assert same(result.metrics.loc[key, "value"], value), key
        assert result.metrics.loc[key, "n"] == cli_summary["intervals"][key]["n"]
        assert same(result.metrics.loc[key, "ci_low"], cli_summary["intervals"][key]["ci_low"])


@pytest.mark.integration
def test_a_bad_row_is_the_same_one_line_data_error_as_the_cli(tmp_path, data_dir):
    df = pd.DataFrame({"question": pd.Series(["What is RAG?", "Who wrote it?", None, "When?"], dtype=object),
                       "response": ["Retrieval.", "Someone.", "Nobody.", "Now."]})
    path = tmp_path / "bad.csv"
    df.to_csv(path, index=False)
    proc = run_cli(f"data_dir={data_dir}", "dataset=mapped", f"dataset.path={path}",
                   "dataset.columns={query: question, answer: response}",
                   f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert line.startswith(f"ragexp: error: {path}, row 3, field 'query' (column 'question'): ")

    columns = {"query": "question", "answer": "response"}
    with pytest.raises(DataError) as from_file:
        ragexp.evaluate(str(path), columns=columns, log=False)
    assert f"ragexp: error: {from_file.value}" == line
    with pytest.raises(DataError) as from_frame:
        ragexp.evaluate(df, columns=columns, log=False)
    assert f"ragexp: error: {from_frame.value}" == line.replace(str(path), "DataFrame")
    with pytest.raises(DataError) as from_list:
        ragexp.evaluate([{"question": q, "response": a} for q, a in zip(df["question"], df["response"])],
                        columns=columns, log=False)
    assert str(from_list.value) == str(from_frame.value).replace("DataFrame", "list of records")
    assert len(str(from_frame.value).splitlines()) == 1


def test_config_mistakes_are_one_line_config_errors():
    rows = [{"query": "q", "answer": "a", "reference_answers": ["a"]}]
    with pytest.raises(ConfigError, match="no option 'no_such_suite' in group 'metric'; the options are: answer, "):
        ragexp.evaluate(rows, metric="no_such_suite", log=False)
    with pytest.raises(ConfigError, match="stats.resampels: unknown key"):
        ragexp.evaluate(rows, metric="answer", stats={"resampels": 100}, log=False)
    with pytest.raises(ConfigError, match="neither a file nor a dataset config name"):
        ragexp.evaluate("no_such_dataset", log=False)


def _judge_call(server: JudgeServer, data_dir: Path, *extra: str):
    return ragexp.evaluate("memory_eval_true", metric="judge", judge="openai_compatible", data_dir=str(data_dir),
                           overrides=[f"judge.api_base={server.url}", *extra], log=False)


def test_the_judge_works_inside_asyncio_run_and_from_a_running_loop(tmp_path, data_dir):
    with JudgeServer() as server:
        plain = _judge_call(server, data_dir, f"judge.cache_path={tmp_path / 'judge.sqlite'}")
        asked = server.calls
        assert asked > 0

        async def notebook_cell():  # a cell runs synchronous code while the kernel's loop is running
            assert asyncio.get_running_loop().is_running()
            return _judge_call(server, data_dir, "judge.cache=false")

        inside = asyncio.run(notebook_cell())
        assert server.calls == 2 * asked  # asked again (no cache), from inside the running loop

        async def twice_concurrently():  # a script awaiting it in a thread while its loop serves others
            return await asyncio.gather(asyncio.to_thread(_judge_call, server, data_dir, "judge.cache=false"),
                                        asyncio.sleep(0.01))

        threaded, _ = asyncio.run(twice_concurrently())
    for result in (inside, threaded):
        assert list(result.per_sample["id"]) == list(plain.per_sample["id"])
        for key in ("answer_similarity", "retrieval_precision", "answer_consistency", "overall_score"):
            assert result.summary["status_counts"][key] == {"ok": 8}
            assert [same(a, b) for a, b in zip(result.per_sample[key], plain.per_sample[key])] == [True] * 8
        assert result.run_id is None


@pytest.mark.integration
def test_log_false_writes_nothing_and_imports_no_mlflow(tmp_path):
    """A fresh process in an empty directory with a private temp dir: after evaluate(log=False) the
    directory is still empty, and the temp dir holds at most jieba's dictionary cache."""
    cwd, tmp = tmp_path / "cwd", tmp_path / "tmp"
    cwd.mkdir()
    tmp.mkdir()
    frame = tmp_path / "frame.pkl"
    demo_frame().to_pickle(frame)
    script = textwrap.dedent(f"""
        import sys
        import pandas as pd
        import ragexp
        result = ragexp.evaluate(pd.read_pickle({str(frame)!r}), columns={FOREIGN!r}, log=False)
        assert len(result.per_sample) == 50 and result.run_id is None
        print(sorted(m for m in ("mlflow", "litellm", "torch") if m in sys.modules))
    """)
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    env.update(TMPDIR=str(tmp), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run([sys.executable, "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[]"
    assert list(cwd.rglob("*")) == []
    assert [p.name for p in tmp.rglob("*")] in ([], ["jieba.cache"])


def test_log_true_and_log_uri_give_a_run_with_the_metrics(tmp_path, monkeypatch):
    from mlflow.tracking import MlflowClient

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    df = demo_frame()
    result = ragexp.evaluate(df, columns=FOREIGN, metric="answer", run_name="api-answer")
    assert result.run_id and (tmp_path / "mlflow.db").is_file()  # the configured store: ./mlflow.db
    assert list((tmp_path / "ragexp_results").glob("*/per_sample.json"))  # the results folder first
    run = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}").get_run(result.run_id)
    assert run.info.run_name == "api-answer" and run.info.status == "FINISHED"
    for key in ("exact_match", "answer_token_f1", "bleu", "rougeL"):
        assert run.data.metrics[key] == pytest.approx(result.metrics.loc[key, "value"], rel=1e-12)
        assert run.data.metrics[f"{key}/n"] == result.metrics.loc[key, "n"] == 50

    other = tmp_path / "elsewhere" / "store.db"
    other.parent.mkdir()
    logged = ragexp.evaluate(df, columns=FOREIGN, metric="answer", log=f"sqlite:///{other}")
    run = MlflowClient(f"sqlite:///{other}").get_run(logged.run_id)
    assert run.data.metrics["answer_token_f1"] == pytest.approx(logged.metrics.loc["answer_token_f1", "value"])
    assert logged.tracking_uri == f"sqlite:///{other}"


def test_compare_pairs_two_results_and_two_logged_runs_alike(tmp_path):
    weak = ragexp.evaluate("demo", dataset={"system": "weak"}, metric="answer", log=False)
    strong = ragexp.evaluate("demo", metric="answer", log=False)
    c = ragexp.compare_results(weak, strong)
    assert c.comparison["samples"]["matched"] == 50
    b, s = weak.per_sample["answer_token_f1"], strong.per_sample["answer_token_f1"]
    assert c.metrics.loc["answer_token_f1", "diff"] == pytest.approx(sum(s) / 50 - sum(b) / 50, abs=1e-12)
    assert c.metrics.loc["answer_token_f1", "verdict"] == "better"
    assert "answer_token_f1" in repr(c) and "<table>" in c._repr_html_()

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    weak_run = ragexp.evaluate("demo", dataset={"system": "weak"}, metric="answer", log=uri).run_id
    strong_run = ragexp.evaluate("demo", metric="answer", log=uri).run_id
    by_id = ragexp.compare_results(weak_run, strong_run, tracking_uri=uri)
    for key in ("answer_token_f1", "bleu", "exact_match"):
        for col in ("diff", "ci_low", "ci_high", "p_holm", "n"):
            assert by_id.metrics.loc[key, col] == pytest.approx(c.metrics.loc[key, col], rel=1e-9), (key, col)

    with pytest.raises(DataError, match="different questions"):
        ragexp.compare_results(strong, ragexp.evaluate(demo_frame().head(40), columns=FOREIGN, metric="answer", log=False))


def test_result_shows_a_table_in_repr_and_in_jupyter():
    result = ragexp.evaluate("demo", metric="answer", log=False)
    text = repr(result)
    assert text.splitlines()[0] == "ragexp · demo · 50 samples · not logged"
    assert "95% CI" in text and "answer_token_f1" in text and " 50" in text
    page = result._repr_html_()
    assert page.count("<tr>") == len(result.metrics) + 1 and "answer_token_f1" in page
    assert set(ragexp.__all__) >= {"evaluate", "compare_results", "EvaluationResult", "ComparisonResult"}


def readme_section(title: str = "## Python API") -> tuple[str, int]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index(title)
    end = text.find("\n## ", start + len(title))
    return text[start:end if end != -1 else len(text)], text[:start].count("\n")


def test_readme_python_api_examples_run_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    section, line = readme_section()
    test = doctest.DocTestParser().get_doctest(section, {}, "README.md: Python API", str(ROOT / "README.md"), line)
    assert len(test.examples) >= 6
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    runner.run(test)
    assert runner.failures == 0, f"{runner.failures} README example(s) failed (see the output above)"


def test_a_judge_that_fails_every_sample_raises_with_each_samples_reason(data_dir):
    from judge_server import Reply

    from ragexp.errors import JudgeFailed

    with JudgeServer(script=lambda r: Reply(status=400, text="this model cannot do that")) as server:
        with pytest.raises(JudgeFailed) as failed:
            _judge_call(server, data_dir, "judge.cache=false")
    assert "the exception's .result.per_sample" in str(failed.value) and len(str(failed.value).splitlines()) == 1
    table = failed.value.result.per_sample
    assert len(table) == 8 and failed.value.result.run_id is None
    assert failed.value.result.summary["status_counts"]["answer_similarity"] == {"api_error": 8}
    assert table["answer_similarity"].isna().all()  # no silent 0
