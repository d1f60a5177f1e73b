"""The per-sample table a run logs: ``per_sample.json`` (MLflow's table view: no dot in a column name,
the record's fields first, long texts trimmed, the first ``tracking.table_rows`` rows) and
``per_sample.parquet`` (every record whole).

A real run (``run(cfg)`` over a JSONL of canonical records, logged to a SQLite store) writes both;
the tests read them back as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from ragexp.core.pairing import RunTable, compare_tables
from ragexp.results.columns import (ELLIPSIS, TRIM_CHARS, current_columns, detail_column, metric_keys,
                                 split_json_parts, status_column, table_columns, trim)
from ragexp.results.tables import read_parquet_columns

LONG_QUERY = "Which city is the capital of France, " + "and which river crosses it on its way to the sea? " * 8
LONG_ANSWER = "Paris, " + "the city on the Seine, " * 20
CAPITAL_OF_FRANCE = {
    "id": "q1", "query": LONG_QUERY, "answer": LONG_ANSWER, "reference_answers": ["Paris"],
    "contexts": ["Paris is the capital of France.", "Lyon is a city on the Rhone."], "context_ids": ["p1", "p2"],
    "gt_contexts": ["Paris is the capital of France.", "The Seine crosses Paris."], "gt_context_ids": ["p1", "p3"],
}
NOTHING_RETRIEVED = {
    "id": "q2", "query": "Who wrote Hamlet?", "answer": "", "reference_answers": ["Shakespeare"],
    "contexts": [], "context_ids": [], "gt_contexts": [], "gt_context_ids": [],
}
METRICS = "metric=[context_recall,exact_match]"


def split_json(columns):
    """The whole text the pieces of ``split_json_parts`` make."""
    return "".join(split_json_parts(columns))


def _read(path: Path) -> pd.DataFrame:
    if path.suffix == ".parquet":  # read as plain columns: list cells stay lists
        from ragexp.results.tables import read_parquet_columns

        columns = read_parquet_columns(path)
        return pd.DataFrame(columns, columns=list(columns))
    table = json.loads(path.read_text(encoding="utf-8"))
    return pd.DataFrame(table["data"], columns=table["columns"])


@pytest.fixture
def logged(compose, tmp_path):
    """One real run over the two records above; its results folder and MLflow run."""
    from mlflow.tracking import MlflowClient

    from ragexp.workflow.runner import run

    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (CAPITAL_OF_FRANCE, NOTHING_RETRIEVED)))
    summary = run(compose("dataset=records", f"dataset.path={path}", METRICS))
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    return Path(summary["results_folder"]), client, summary


def test_table_columns_in_reading_order_without_dots(logged):
    folder, _, _ = logged
    table = _read(folder / "per_sample.json")
    fields = ["id", "query", "answer", "reference_answers", "context_ids", "gt_context_ids", "contexts", "gt_contexts"]
    assert list(table.columns[:len(fields)]) == fields
    metric_part = [c for c in table.columns if c.startswith(("context_recall", "exact_match"))]
    assert metric_part == ["context_recall", "context_recall/status", "context_recall/detail",
                           "exact_match", "exact_match/status"]
    assert not [c for c in table.columns if "." in c]  # MLflow's table view shows a dotted column blank


def test_statuses_and_values_are_in_the_table(logged):
    folder, _, _ = logged
    table = _read(folder / "per_sample.json").set_index("id")
    assert table.loc["q1", status_column("context_recall")] == "ok"
    assert table.loc["q1", "context_recall"] == 1 / 2  # p1 of {p1, p3} retrieved
    assert table.loc["q2", status_column("context_recall")] == "undefined"  # no ground truth: no value
    assert table.loc["q2", detail_column("context_recall")]  # and the reason is said
    assert list(table[status_column("exact_match")]) == ["ok", "ok"]
    assert list(table["exact_match"]) == [0, 0]  # the long answer is not "Paris"; the empty one is a miss


def test_long_texts_trimmed_with_an_ellipsis_lists_as_one_cell(logged):
    folder, _, _ = logged
    table = _read(folder / "per_sample.json").set_index("id")
    query = table.loc["q1", "query"]
    assert len(LONG_QUERY) > TRIM_CHARS and len(query) <= TRIM_CHARS and query.endswith(ELLIPSIS)
    assert LONG_QUERY.startswith(query[:-1])
    assert table.loc["q1", "answer"].endswith(ELLIPSIS) and len(table.loc["q1", "answer"]) <= TRIM_CHARS
    assert table.loc["q2", "query"] == "Who wrote Hamlet?"  # short text untouched
    assert table.loc["q1", "context_ids"] == "p1, p2" and table.loc["q1", "gt_context_ids"] == "p1, p3"
    assert table.loc["q1", "contexts"] == "[1] Paris is the capital of France. [2] Lyon is a city on the Rhone."
    assert table.loc["q2", "context_ids"] == ""  # nothing retrieved: an empty cell, not a missing one


def test_full_artifact_holds_every_record_whole(logged):
    folder, _, _ = logged
    full = _read(folder / "per_sample.parquet").set_index("id")
    for record in (CAPITAL_OF_FRANCE, NOTHING_RETRIEVED):
        for field, value in record.items():
            if field != "id":
                assert full.loc[record["id"], field] == value, field
    # the table is exactly the full frame trimmed: same columns, same numbers and statuses
    table = json.loads((folder / "per_sample.json").read_text(encoding="utf-8"))
    assert table["columns"] == list(full.reset_index().columns)
    assert table == json.loads(split_json(table_columns(read_parquet_columns(folder / "per_sample.parquet"))))


def test_the_api_frame_is_the_full_artifact(logged, tmp_path):
    import ragexp

    folder, _, _ = logged
    records = pd.DataFrame([CAPITAL_OF_FRANCE, NOTHING_RETRIEVED])
    result = ragexp.evaluate(records, overrides=[METRICS], log=False)
    full = _read(folder / "per_sample.parquet")
    assert list(result.per_sample.columns) == list(full.columns)
    assert result.per_sample["contexts"].tolist() == full["contexts"].tolist()


def test_logged_run_has_both_tables_and_its_pictures(logged):
    folder, client, summary = logged
    run_id = summary["run_id"]
    names = {a.path for a in client.list_artifacts(run_id)}
    assert {"per_sample.json", "per_sample.parquet", "metrics.png", "histograms.png"} <= names
    tag = json.loads(client.get_run(run_id).data.tags["mlflow.loggedArtifacts"])
    assert tag == [{"path": "per_sample.json", "type": "table"}]  # only the trimmed one is the UI's table


def test_plots_can_be_switched_off(compose, tmp_path):
    from ragexp.workflow.runner import run

    path = tmp_path / "records.jsonl"
    path.write_text(json.dumps(CAPITAL_OF_FRANCE) + "\n")
    summary = run(compose("dataset=records", f"dataset.path={path}", METRICS, "tracking.plots=false"))
    folder = Path(summary["results_folder"])
    assert (folder / "per_sample.parquet").is_file() and not list(folder.glob("*.png"))


def test_trim_cuts_at_the_width_and_says_so():
    assert trim("x" * TRIM_CHARS) == "x" * TRIM_CHARS
    assert trim("x" * (TRIM_CHARS + 1)) == "x" * (TRIM_CHARS - 1) + ELLIPSIS
    assert trim(0.5) == 0.5 and trim(None) is None


def test_old_runs_with_dotted_columns_still_compare():
    old = ["id", "query", "answer", "mrr", "mrr.status", "mrr.detail", "note.status"]
    assert current_columns(old) == ["id", "query", "answer", "mrr", "mrr/status", "mrr/detail", "note.status"]
    rows_b = [[str(i), f"q{i}", "a", float(i % 2), "ok", None, "x"] for i in range(20)]
    rows_c = [[str(i), f"q{i}", "a", 1.0, "ok", None, "x"] for i in range(20)]
    new = current_columns(old)
    assert metric_keys(new) == ["mrr"]
    out = compare_tables(RunTable("old", new, rows_b), RunTable("new", new, rows_c), resamples=500)
    assert out["metrics"]["mrr"]["n"] == 20
    assert out["metrics"]["mrr"]["diff"] == pytest.approx(1 - 10 / 20)


def _same_cell(a, b) -> bool:
    """Equal cells; a float equal to pandas' 10 decimal places (its JSON writer rounds there)."""
    if isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        return b == pytest.approx(a, abs=1e-10)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_cell(x, y) for x, y in zip(a, b))
    return a == b


def test_the_cli_writes_without_pandas_what_pandas_would_write(compose):
    """The run's per-sample columns (the demo, every deterministic metric) written by ``split_json`` read
    back as the same table pandas' ``to_json(orient="split")`` writes from the frame: same columns, in
    order, and the same cells (pandas rounds floats to 10 decimals; ours keep every digit); the frame ``ragexp.evaluate`` returns is the frame of those rows."""
    from ragexp.results.columns import frame_of
    from ragexp.workflow.runner import execute

    columns = execute(compose("progress=false"), save=False, show=False).per_sample
    rows = [dict(zip(columns, row)) for row in zip(*columns.values())]
    frame = pd.DataFrame(rows)  # how the table was built before: from rows
    pd.testing.assert_frame_equal(frame_of(columns), frame)
    ours, theirs = json.loads(split_json(columns)), json.loads(frame.to_json(orient="split", index=False))
    assert ours["columns"] == theirs["columns"] and len(ours["data"]) == len(theirs["data"]) == 50
    mismatched = [(i, c) for i, (a, b) in enumerate(zip(ours["data"], theirs["data"]))
                  for c, x, y in zip(ours["columns"], a, b) if not _same_cell(x, y)]
    assert not mismatched, mismatched[:5]


def test_split_json_writes_what_json_can_hold():
    import math

    import numpy as np

    columns = {"id": ["a", "b", "c"], "v": [math.nan, math.inf, np.float32(0.5)], "k": [np.int64(3), None, True],
               "texts": [["é", "x/y"], [], None]}
    table = json.loads(split_json(columns))
    assert table == {"columns": ["id", "v", "k", "texts"],
                     "data": [["a", None, 3, ["é", "x/y"]], ["b", None, None, []], ["c", 0.5, True, None]]}
    assert "NaN" not in split_json(columns) and "\\u00e9" in split_json(columns)  # ASCII, as pandas writes it


def test_digests_are_sha256_of_each_records_fields_as_json_lines():
    """The digests hash each record's fields as ``json.dumps(..., ensure_ascii=False)`` lines, whatever the
    texts hold: quotes, backslashes, control characters, non-ASCII, empty or absent fields."""
    import hashlib

    from ragexp.common.records import to_record
    from ragexp.results.columns import OUTPUT_FIELDS, QUESTION_FIELDS, outputs_digest, questions_digest

    texts = ['say "hi"', "C:\\path", "tab\there\nnew line", "\x01\x1f\x7f", "é 中 😀 \u2028", "", "[\"a\", 1]"]
    records = [to_record({"id": f"r{i}", "query": f"q{i} {t}", "answer": t if i % 3 else None,
                          "contexts": texts[:i], "context_ids": [f"p{j}" for j in range(i)],
                          "reference_answers": [t, texts[-1 - i]], "gt_contexts": [] if i % 2 else [t]},
                         path="x", row=i + 1) for i, t in enumerate(texts)]

    def expected(fields):
        lines = "".join(json.dumps([getattr(r, f) for f in fields], ensure_ascii=False) + "\n" for r in records)
        return hashlib.sha256(lines.encode()).hexdigest()[:16]

    assert questions_digest(records) == expected(QUESTION_FIELDS)
    assert outputs_digest(records) == expected(("id", *OUTPUT_FIELDS))


def _json_lines_digest(records, fields) -> str:
    """The digests' definition as arithmetic: SHA-256 of one ``json.dumps(..., ensure_ascii=False, default=str)``
    line a record, 16 hex digits."""
    import hashlib

    lines = "".join(json.dumps([getattr(r, f) for f in fields], ensure_ascii=False, default=str) + "\n"
                    for r in records)
    return hashlib.sha256(lines.encode()).hexdigest()[:16]


#: Every code point but the surrogates in one text (also without the control characters, and ASCII alone), and
#: texts a separator or an escape could be mistaken in: quotes around commas (``","`` is orjson's list separator,
#: ``", "`` json's), backslashes before quotes and at the end, U+007F and U+2028 (neither escapes), a non-BMP
#: character, and escapes on both sides of 16- and 32-byte boundaries (an encoder may take a text in blocks).
ADVERSARIAL_TEXTS = ["".join(chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000),
                     "".join(chr(c) for c in range(32, 0x110000) if not 0xD800 <= c < 0xE000),  # no control
                     "".join(map(chr, range(128))), "".join(map(chr, range(32, 128))),  # ASCII, with and without
                     'é"', "é\\", 'é\\"', '😀","😀', 'ü", "ü', "中\\n文",
                     '","', '", "', 'a","b', 'a", "b', '["x", "y"]', '\\', '\\"', 'ends with \\', '"', '""',
                     "\x7f\u2028\u2029\x85\ufeff", "😀𝄞", "\x00\x08\t\n\x0b\x0c\r\x1b\x1f", "null", "", " ",
                     *("x" * k + esc + "y" * k for k in (7, 15, 16, 31, 32, 63) for esc in ('"', "\\", "\n", "\x01", "é"))]


def test_digests_are_json_dumps_lines_on_every_code_point_and_separator_lookalikes():
    """The three digests, whether taken one by one or in the Survey's one pass, equal SHA-256 of json.dumps lines
    on texts built to break a faster encoder: every code point, separator lookalikes, escapes at block edges."""
    from ragexp.common.records import Record
    from ragexp.results.columns import ANSWER_FIELDS, answers_digest
    from ragexp.results.columns import OUTPUT_FIELDS, QUESTION_FIELDS, outputs_digest, questions_digest
    from ragexp.workflow.steps import Survey

    t = ADVERSARIAL_TEXTS
    records = [Record(id=f"r{i}" if i % 4 else text, query=text, answer=None if i % 5 == 1 else text,
                      contexts=t[i:i + 3] if i % 6 else [], context_ids=None if i % 3 else [text, "p,1"],
                      reference_answers=[text, t[-1 - i]], gt_contexts=[t[(i * 7) % len(t)]] if i % 2 else None,
                      gt_context_ids=[f"g{i}", '","'])
               for i, text in enumerate(t)]
    assert records[0].query == t[0] and len(t[0]) == 0x110000 - 0x800
    expected = {f: _json_lines_digest(records, f) for f in (QUESTION_FIELDS, ("id", *OUTPUT_FIELDS), ANSWER_FIELDS)}
    assert questions_digest(records) == expected[QUESTION_FIELDS]
    assert outputs_digest(records) == expected[("id", *OUTPUT_FIELDS)]
    assert answers_digest(records) == expected[ANSWER_FIELDS]
    survey = Survey(3)
    for i in range(0, len(records), 3):  # chunk by chunk, as a streamed run
        survey(records[i:i + 3])
    assert [survey.questions.hexdigest(), survey.outputs.hexdigest(), survey.answers.hexdigest()] == list(
        expected.values())


def test_digests_of_values_that_are_not_texts_are_json_dumps_lines():
    """A field holding something other than None, a text or a list of texts (numbers, a mapping, a tuple, a text
    subclass, a list mixing kinds, an object json writes with ``default=str``) is hashed as json.dumps writes it;
    one field alone, or two digests over the same fields, are hashed the same way."""
    from types import SimpleNamespace

    from ragexp.results.columns import FieldsDigest, update_digests

    class Label(str):
        pass

    odd = [3, 2.5, True, {"k": ["v", 1]}, ("a", "b"), Label("sub"), ["a", 1, None], [["a"], "b"], Path("p/q"),
           [Label("x")], float("nan"), "plain", None, []]
    records = [SimpleNamespace(a=v, b=odd[-1 - i], c=f"c{i}") for i, v in enumerate(odd)]
    for fields in (("a",), ("a", "b", "c"), ("c", "a")):
        digest = FieldsDigest(fields)
        digest.update(records[:5])
        digest.update(records[5:])
        assert digest.hexdigest() == _json_lines_digest(records, fields)
    one, same, other = FieldsDigest(("b", "a")), FieldsDigest(("b", "a")), FieldsDigest(("c",))
    update_digests(records, one, same, other)
    assert one.hexdigest() == same.hexdigest() == _json_lines_digest(records, ("b", "a"))
    assert other.hexdigest() == _json_lines_digest(records, ("c",))


def test_a_lone_surrogate_in_a_digested_text_raises_as_json_does():
    """A text that is not valid UTF-8 (a lone surrogate; the readers refuse one at load) fails as
    ``json.dumps(...).encode()`` does, with UnicodeEncodeError, not orjson's error."""
    from types import SimpleNamespace

    from ragexp.results.columns import FieldsDigest

    for value in ("a\ud800b", ["ok", "\udfff"]):
        with pytest.raises(UnicodeEncodeError):
            json.dumps([value], ensure_ascii=False).encode()
        with pytest.raises(UnicodeEncodeError):
            FieldsDigest(("a",)).update([SimpleNamespace(a=value)])


def test_per_sample_columns_keep_a_field_some_record_holds_even_falsy_and_in_their_order():
    """A record field is a column when some record holds it (record.has), a label or latency when one is not None,
    even when every held value is falsy (False, 0.0, a tuple); fields all absent or empty are left out, and so are
    the run's extra columns when no record has an extra key. Columns come in their documented order."""
    from ragexp.common.records import Record
    from ragexp.metrics.base import Score
    from ragexp.results.columns import per_sample_columns

    bare = [Record(id=f"r{i}", query="q", answer="", contexts=[] if i else None, category="", human={} if i else None)
            for i in range(3)]
    scores = {"m": [Score(1.0), Score(None, "undefined", "why"), Score(0.0)]}
    assert list(per_sample_columns(bare, scores)) == ["id", "query", "answer", "m", "m/status", "m/detail"]
    falsy = [Record(id="a", query="q", gt_context_ids=(), latency_s=0.0, human={"correct": 0.0}),
             Record(id="b", query="q", label=False, extra={"pipeline_error": "", "note": 0}),
             Record(id="c", query="q", context_sources=["s"], extra={"trace_id": "t1"})]
    columns = per_sample_columns(falsy, {})
    assert list(columns) == ["id", "query", "answer", "gt_context_ids", "context_sources", "label", "human/correct",
                             "latency_s", "trace_id", "note"]
    assert columns["gt_context_ids"] == [(), None, None] and columns["label"] == [None, False, None]
    assert columns["latency_s"] == [0.0, None, None] and columns["human/correct"] == [0.0, None, None]
    assert columns["trace_id"] == [None, None, "t1"] and columns["note"] == [None, 0, None]
