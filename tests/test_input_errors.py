"""Every bad input is refused before any work, in one line naming file, row, field and what was
expected — through the real config options, and once through the real command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from ragexp.errors import DataError, FieldsError
from ragexp.workflow.runner import load_dataset, run


@pytest.fixture
def load(compose):
    def _load(option: str, *overrides: str):
        return load_dataset(compose(f"dataset={option}", *overrides).dataset)

    return _load


def message(excinfo) -> str:
    text = str(excinfo.value)
    assert "\n" not in text, "a user error is one line"
    return text


def lines(*rows) -> str:
    """JSONL text: a dict is one JSON object, a string a line as it is."""
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows)


def jsonl(path: Path, *rows) -> Path:
    path.write_text(lines(*rows), encoding="utf-8")
    return path


DEEP = "[" * 100_000 + "]" * 100_000
CSV_RUN = 'question,retrieved,gold\n"q1","[""a"", ""b""]",x\n"q2","not json",y\n'
QUESTION = "dataset.columns={query: question}"
CSV_END = ' (expected a closing " before the end of the file; a " inside a quoted value is written "")'
TIMING = "expected a mapping of stage name to a finite, non-negative number of seconds"
LATENCY = "field 'latency_s': expected a finite, non-negative number of seconds, got"


def case(id, option, name, content, expected, *overrides):
    """One bad input: dataset ``option`` over the file ``name`` holding ``content`` (None: not written; a
    ``name`` of None: no dataset.path at all), with ``overrides``; ``expected`` is the whole line, ``{f}``
    standing for the file's path."""
    return pytest.param(option, name, content, overrides, expected, id=id)


CASES = [
    # --- missing and unreadable files
    case("missing_file", "records", "nope.jsonl", None,
         "{f}: dataset file not found (looked at {f}); check dataset.path, or data_dir= / $RAGEXP_DATA_DIR (the folder of the shared datasets)"),
    case("no_path_given", "records", None, None, "no dataset file given: set dataset.path=FILE"),
    case("unreadable_jsonl_line", "records", "r.jsonl", lines({"query": "fine"}, '{"query": "cut off'),
         "{f}, row 2: unreadable JSON line: Unterminated string starting at column 11; expected one JSON object per line"),
    case("unreadable_json_file", "memory_eval_true", "samples.json", '[{"query": "a"},\n {"query": }]',
         "{f}: unreadable JSON at line 2, column 12: Expecting value"),
    case("not_utf8", "records", "latin1.jsonl", '{"query": "fine"}\n{"query": "caf\u00e9"}\n'.encode("latin-1"),
         "{f}, row 2: unreadable: not UTF-8 text (invalid continuation byte)"),
    case("json_nested_100000_deep-.jsonl", "mapped", "deep.jsonl", '{"query": "q"}\n{"query": "q2", "extra": ' + DEEP + "}\n",
         "{f}, row 2: JSON nested too deeply (expected at most a few hundred levels of [ and {)"),
    case("json_nested_100000_deep-.json", "mapped", "deep.json", DEEP,
         "{f}: JSON nested too deeply (expected at most a few hundred levels of [ and {)"),
    case("json_nested_100000_deep_in_a_csv_cell", "mapped", "deep.csv", "query,contexts\nq," + DEEP + "\n",
         "{f}, row 1, field 'contexts': JSON nested too deeply (expected at most a few hundred levels of [ and {)"),
    case("columns_given_as_a_list", "mapped", "r.jsonl", lines({"query": "q"}),
         "{f}: dataset.columns must map fields to column names ({query: question, answer: output}), got list ['a', 'b']",
         "dataset.columns=[a,b]"),
    case("unterminated_csv_quote", "mapped", "run.csv", 'question,answer\nfine,8\n"never closed,x\nq3,y\n',
         "{f}: malformed CSV: the quoted value opened on line 3 is never closed" + CSV_END, QUESTION),
    case("unterminated_tsv_quote_in_the_last_column", "mapped", "run.tsv", 'question\tanswer\nq1\t"open\nq2\tb\n',
         "{f}: malformed TSV: the quoted value opened on line 2 is never closed" + CSV_END, QUESTION),
    case("ragged_tsv-3", "mapped", "run.tsv", "question\tanswer\nq1\ta\nq2\tb\textra\nq3\tc\n",
         "{f}: malformed TSV at line 3: 3 values where the header has 2 columns (expected one value per column; "
         "a tab inside a value needs quoting)", QUESTION),
    case("ragged_tsv-1", "mapped", "run.tsv", "question\tanswer\nq1\ta\nq2\nq3\tc\n",
         "{f}: malformed TSV at line 3: 1 value where the header has 2 columns (expected one value per column; "
         "a tab inside a value needs quoting)", QUESTION),
    # pandas would take the extra first value of every row as the index and shift the columns
    case("ragged_csv_every_row_one_too_many", "mapped", "run.csv", "question,answer\n1,q1,a\n2,q2,b\n",
         "{f}: malformed CSV at line 2: 3 values where the header has 2 columns (expected one value per column; "
         "a comma inside a value needs quoting)", QUESTION),
    case("empty_csv_file", "tonic_run", "run.csv", "", "{f}: unreadable CSV: the file is empty (expected a header row)"),
    case("unknown_suffix", "mapped", "data.xlsx", "x",
         "{f}: cannot tell the format from the suffix '.xlsx': expected one of .jsonl, .ndjson, .json, .csv, .tsv, "
         ".parquet, .pq (or set dataset.format)"),
    # --- bad values
    case("missing_query", "records", "r.jsonl", lines({"id": "a", "query": "fine"}, {"id": "b", "answer": "no question"}),
         "{f}, row 2, field 'query': expected a non-empty string (the user question), got NoneType None"),
    case("contexts_a_string", "records", "r.jsonl", lines({"query": "q", "contexts": "one passage, not a list"}),
         "{f}, row 1, field 'contexts': expected a list of strings, got str 'one passage, not a list'"),
    case("context_item_not_a_string", "records", "r.jsonl", lines({"query": "q", "gt_contexts": ["ok", 3.5]}),
         "{f}, row 1, field 'gt_contexts': expected a list of strings, but item 1 is float 3.5"),
    case("negative_latency", "records", "r.jsonl", lines({"query": "q"}, {"query": "q2"}, {"query": "q3", "latency_s": -0.5}),
         "{f}, row 3, " + LATENCY + " float -0.5"),
    *[case(f"infinite_latency-{written}", "records", "r.jsonl", lines({"query": "q"}, '{"query": "q2", "latency_s": %s}' % written),
           "{f}, row 2, " + LATENCY + f" {got}")
      for written, got in [("Infinity", "float inf"), ("1e400", "float inf"), ("-Infinity", "float -inf")]],
    *[case(f"non_finite_or_negative_timing-{written}", "records", "r.jsonl",
           lines('{"query": "q", "timings": {"retrieve": 0.1, "generate": %s}}' % written),
           "{f}, row 1, field 'timings': " + TIMING + f", but 'generate' is {got}")
      for written, got in [("NaN", "float nan"), ("Infinity", "float inf"), ("1e400", "float inf"), ("-0.5", "float -0.5")]],
    case("label_not_a_boolean", "records", "r.jsonl", lines({"query": "q", "label": "maybe"}),
         "{f}, row 1, field 'label': expected a boolean (true/false, 1/0), got str 'maybe'"),
    case("timings_not_a_mapping", "records", "r.jsonl", lines({"query": "q", "timings": [0.1, 0.2]}),
         "{f}, row 1, field 'timings': " + TIMING + ", got list [0.1, 0.2]"),
    case("empty_dataset", "records", "r.jsonl", "\n\n", "{f}: the dataset is empty: expected at least one record"),
    case("empty_csv_with_header_only", "mapped", "r.csv", "question,answer\n",
         "{f}: the dataset is empty: expected at least one record", QUESTION),
    case("duplicate_ids", "records", "r.jsonl", lines({"id": "a", "query": "q"}, {"id": "b", "query": "q"}, {"id": "a", "query": "q"}),
         "{f}, row 3, field 'id': duplicate id 'a' (first seen at row 1); ids must be unique"),
    # rows are the file's lines even when blank lines are skipped
    case("duplicate_ids_name_the_source_rows", "records", "r.jsonl", lines({"id": 7, "query": "q"}, "", {"id": "7", "query": "q"}),
         "{f}, row 3, field 'id': duplicate id '7' (first seen at row 1); ids must be unique"),
    case("bad_limit", "demo", None, None, "dataset.limit must be a positive integer or null, got 0", "dataset.limit=0"),
    # --- the column mapping
    case("mapping_unknown_field", "mapped", "run.csv", CSV_RUN,
         "{f}: dataset.columns names an unknown field 'contxts': expected canonical fields (id, query, contexts, "
         "context_ids, gt_contexts, gt_context_ids, answer, reference_answers, label, latency_s, timings, human, "
         "category, context_sources, or human.<metric key>) mapped to the file's column names; did you mean "
         "'contexts'?",
         "dataset.columns={query: question, contxts: retrieved}"),
    # the mapping written the other way round (column: field): said so, with the mapping to write (H8's walkthrough)
    case("mapping_the_other_way_round", "mapped", "run.csv", CSV_RUN,
         "{f}: dataset.columns names an unknown field 'question': expected canonical fields (id, query, contexts, "
         "context_ids, gt_contexts, gt_context_ids, answer, reference_answers, label, latency_s, timings, human, "
         "category, context_sources, or human.<metric key>) mapped to the file's column names; written the other "
         "way round? a field maps to your column: {query: question}",
         "dataset.columns={question: query}"),
    case("mapping_unknown_column", "mapped", "run.csv", CSV_RUN,
         "{f}, field 'contexts': column 'retreived' (mapped to field 'contexts') not found: the file's columns are "
         "question, retrieved, gold", "dataset.columns={query: question, contexts: retreived}"),
    case("mapping_names_the_users_column", "mapped", "run.csv", CSV_RUN,
         "{f}, row 2, field 'contexts' (column 'retrieved'): expected a list of strings, got str 'not json'",
         "dataset.columns={query: question, contexts: retrieved}"),
    case("mapping_json_column_that_is_not_json", "mapped", "run.csv", CSV_RUN,
         "{f}, row 2, field 'contexts' (column 'retrieved'): expected JSON text (a list), got 'not json': Expecting value",
         "dataset.columns={query: question, contexts: retrieved}", "dataset.json_fields=[contexts]"),
    # --- adapter-specific checks
    case("squad_shape", "squad2", "squad.json", '{"version": "v2.0"}',
         "{f}: expected SQuAD's JSON object with a 'data' list of articles, got dict without data"),
    case("tonic_run_missing_columns", "tonic_run", "run.csv", "reference_question,llm_answer\nq,a\n",
         "{f}: missing column 'reference_answer', 'llm_context': expected a Tonic Validate run with reference_question, "
         "reference_answer, llm_answer, llm_context; the file has reference_question, llm_answer"),
    case("tonic_run_context_not_json", "tonic_run", "run.csv",
         "reference_question,reference_answer,llm_answer,llm_context\nq,r,a,[oops\n",
         "{f}, row 1, field 'llm_context': expected a JSON list of passages, got text that is not JSON (Expecting value)",
         "dataset.qa_pairs=null"),
    case("continuous_eval_unknown_annotation", "continuous_eval_correctness", "c.jsonl",
         lines({"question": "q", "answer": "a", "ground_truths": ["a"], "annotation": "partly"}),
         "{f}, row 1, field 'annotation': unknown annotation 'partly': expected one of 'correct', 'incorrect', "
         "'refuse-to-answer' (map it with dataset.labels)"),
    case("halueval_missing_field", "halueval", "h.json",
         lines({"knowledge": "k", "question": "q", "right_answer": "r", "hallucinated_answer": "h"},
               {"knowledge": "k", "question": "q2", "right_answer": "r"}),
         "{f}, row 2, field 'hallucinated_answer': expected a string, got NoneType"),
    case("ragchecker_shape", "ragchecker", "rc.json", '[{"query": "q"}]',
         "{f}: expected RAGChecker's JSON object with a 'results' list, got list"),
    case("demo_unknown_system", "demo", None, None, "dataset.system must be one of strong, weak or null, got 'medium'",
         "dataset.system=medium"),
]


@pytest.mark.parametrize("option, name, content, overrides, expected", CASES)
def test_bad_input_is_one_line(load, tmp_path, option, name, content, overrides, expected):
    f = tmp_path / (name or "unused")
    if isinstance(content, str):
        f.write_text(content, encoding="utf-8")
    elif content is not None:
        f.write_bytes(content)
    with pytest.raises(DataError) as e:
        load(option, *([f"dataset.path={f}"] if name else []), *overrides)
    assert message(e) == expected.replace("{f}", str(f))


def test_missing_file_under_data_dir(compose, tmp_path):
    cfg = compose("dataset=squad2", f"data_dir={tmp_path}")
    with pytest.raises(DataError) as e:
        load_dataset(cfg.dataset)
    f = tmp_path / "squad2" / "dev-v2.0.json"
    assert message(e) == f"{f}: dataset file not found (looked at {f}); check dataset.path, or data_dir= / $RAGEXP_DATA_DIR (the folder of the shared datasets)"


def test_a_directory_is_not_a_file(load, tmp_path):
    with pytest.raises(DataError) as e:
        load("records", f"dataset.path={tmp_path}")
    assert message(e) == f"{tmp_path}: expected a dataset file, got a directory"


def test_unreadable_parquet(load, tmp_path):
    f = tmp_path / "qa.parquet"
    f.write_text("this is not parquet", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load("autorag", f"dataset.path={f}")
    text = message(e)
    assert text.startswith(f"{f}: unreadable Parquet: ")
    assert "magic bytes not found" in text


@pytest.mark.parametrize("fmt", ["records", "mapped"])
def test_a_file_the_system_will_not_read_is_named(load, tmp_path, fmt):
    # /proc/self/mem opens but every read at offset 0 fails with EIO, as a bad disk or a revoked
    # permission would (chmod 000 cannot stop root, who runs CI's containers)
    if not Path("/proc/self/mem").exists():
        pytest.skip("needs Linux's /proc")
    f = tmp_path / "broken.jsonl"
    f.symlink_to("/proc/self/mem")
    with pytest.raises(DataError) as e:
        load(fmt, f"dataset.path={f}")
    assert message(e) == f"{f}: cannot read the file: Input/output error"


def test_a_file_without_read_permission_is_named(load, tmp_path):
    import os

    f = jsonl(tmp_path / "private.jsonl", {"query": "q"})
    f.chmod(0)
    if os.access(f, os.R_OK):
        pytest.skip("this user reads any file (root)")
    with pytest.raises(DataError) as e:
        load("records", f"dataset.path={f}")
    assert message(e) == f"{f}: cannot read the file: Permission denied"


@pytest.mark.parametrize("where, row", [("answer", '"x\\ud800y"'), ("reference_answers", '["ok", "\\udfff"]'),
                                        ("extra", '{"note": "\\ud834"}'), ("n\\ud800", "1.5")])
def test_a_lone_surrogate_is_refused_at_load(load, tmp_path, where, row):
    # json.loads turns the escape into a lone surrogate; it used to fail only when the results were
    # written, after all the work
    f = tmp_path / "s.jsonl"
    f.write_text('{"query": "fine"}\n{"query": "q", "%s": %s}\n' % (where, row), encoding="utf-8")
    with pytest.raises(DataError) as e:
        load("records", f"dataset.path={f}")
    assert message(e).startswith(f"{f}, row 2, field '{where}': holds a lone surrogate code point '\\ud")
    assert message(e).endswith("escape without its pair): expected valid Unicode text")


def test_a_lone_surrogate_in_evaluate_is_the_same_error():
    import ragexp

    with pytest.raises(ragexp.DataError) as e:
        ragexp.evaluate([{"query": "q", "answer": "a", "reference_answers": ["a"]},
                         {"query": "q\ud800", "answer": "b", "reference_answers": ["b"]}], log=False)
    assert message(e).startswith("list of records, row 2, field 'query': holds a lone surrogate code point")


def test_the_exception_tree_is_importable_from_ragexp():
    import ragexp
    from ragexp import errors

    assert ragexp.DataError is errors.DataError and issubclass(ragexp.DataError, ragexp.RagexpError)
    from ragexp.errors import DataError as direct  # noqa: F401 - both spellings work
    from ragexp import DataError as short  # noqa: F401
    exported = {n for n in ragexp.__all__ if isinstance(getattr(ragexp, n), type) and issubclass(getattr(ragexp, n), BaseException)}
    assert exported == {
        n for n in dir(errors) if isinstance(getattr(errors, n), type) and issubclass(getattr(errors, n), BaseException)
        and getattr(errors, n).__module__ == "ragexp.errors"}
    assert all(getattr(ragexp, n) is getattr(errors, n) for n in dir(errors) if n in ragexp.__all__)


def test_mapping_decodes_json_lists(load, tmp_path):
    csv_run = tmp_path / "run.csv"
    csv_run.write_text(CSV_RUN, encoding="utf-8")
    ds = load("mapped", f"dataset.path={csv_run}", "dataset.columns={query: question, contexts: retrieved}",
              "dataset.limit=1")
    assert ds.records[0].contexts == ["a", "b"] and ds.records[0].extra == {"gold": "x"}


def test_autorag_gt_id_not_in_corpus(load, tmp_path, data_dir):
    import pandas as pd

    f = tmp_path / "qa.parquet"
    pd.DataFrame({"qid": ["x1"], "query": ["q"], "generation_gt": [["a"]], "retrieval_gt": [[["no-such-doc"]]]}).to_parquet(f)
    corpus = data_dir / "autorag" / "sample_corpus.parquet"
    with pytest.raises(DataError) as e:
        load("autorag", f"dataset.path={f}")
    assert message(e) == (f"{f}, row 1, field 'retrieval_gt': doc id 'no-such-doc' is not in the corpus ({corpus}); "
                          "expected every retrieval_gt id to be a corpus doc_id")


def test_autorag_missing_column(load, tmp_path):
    import pandas as pd

    f = tmp_path / "qa.parquet"
    pd.DataFrame({"qid": ["x1"], "query": ["q"]}).to_parquet(f)
    with pytest.raises(DataError) as e:
        load("autorag", f"dataset.path={f}")
    assert message(e) == (f"{f}: missing column 'generation_gt', 'retrieval_gt': expected AutoRAG's QA table with "
                          "qid, query, generation_gt, retrieval_gt; the file has qid, query")


# --- a metric's fields are checked before any work -----------------------------------------

def test_single_metric_missing_field_is_an_error(compose, tmp_path):
    f = jsonl(tmp_path / "r.jsonl", {"query": "q", "contexts": ["a b"], "answer": "a"})
    cfg = compose("dataset=records", f"dataset.path={f}", "metric=token_f1")
    with pytest.raises(FieldsError) as e:
        run(cfg)
    assert message(e) == ("metric 'token_f1' needs 'reference_answers'; dataset 'records' has: id, query, contexts, "
                          "answer (choose another metric or dataset, or a suite that skips what does not apply)")
    assert not (tmp_path / "mlflow.db").exists()  # refused before anything was scored or logged


def test_suite_skips_what_does_not_apply_and_says_so(compose, data_dir):
    cfg = compose("dataset=continuous_eval", "metric=default", "tracking.enabled=false", "dataset.limit=3")
    summary = run(cfg)
    assert "exact_match" not in summary["metrics"] and summary["metrics"]["context_recall"] is not None
    said = "dataset 'continuous_eval' has: id, query, contexts, gt_contexts, reference_answers"
    line = [m for m in summary["skipped_metrics"] if m.endswith(said) and "need 'answer';" in m]
    assert len(line) == 1 and "exact_match" in line[0].split(":")[0], summary["skipped_metrics"]


def test_a_suite_of_which_nothing_applies_is_an_error(compose):
    cfg = compose("dataset=squad2", "metric=answer", "metric._all_that_apply_=true", "tracking.enabled=false",
                  "dataset.limit=3")
    with pytest.raises(FieldsError) as e:
        run(cfg)
    assert message(e).startswith("none of the configured metrics applies to dataset 'squad2' (it has: id, query, ")
    assert message(e).endswith("e.g. retriever=bm25 generator=extractive")


# --- the command line ---------------------------------------------------------------------

@pytest.mark.integration
@pytest.mark.parametrize("case", ["bad_value", "missing_file"])
def test_cli_prints_one_line_and_exits_2(tmp_path, data_dir, case):
    f = tmp_path / "bad.jsonl"
    if case == "bad_value":
        jsonl(f, {"id": "a", "query": "q", "contexts": "abc"})
        expected = f"ragexp: error: {f}, row 1, field 'contexts': expected a list of strings, got str 'abc'"
    else:
        expected = f"ragexp: error: {f}: dataset file not found (looked at {f}); check dataset.path, or data_dir= / $RAGEXP_DATA_DIR (the folder of the shared datasets)"
    proc = subprocess.run([sys.executable, "-m", "ragexp", "dataset=records", f"dataset.path={f}",
                           f"data_dir={data_dir}"], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [expected]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not (tmp_path / "mlflow.db").exists()
