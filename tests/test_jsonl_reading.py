"""Reading a JSONL file with orjson gives json's rows, records and error lines (ragexp.datasets.base.JsonLines),
and to_record's quick way for plain rows gives the Record its field-by-field checks give (records._plain_record)."""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from ragexp.common.records import _checked_record, _plain_record, to_record
from ragexp.datasets.base import TOO_DEEP, iter_jsonl
from ragexp.datasets.mapped import load_mapped
from ragexp.datasets.records import load_records
from ragexp.errors import DataError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import record as realistic  # noqa: E402


def _same(a, b) -> bool:
    """Equal values of the same types, dict keys in the same order (repr tells 1 from 1.0 and True from 1)."""
    return repr(a) == repr(b)


def _lines_of(value) -> list:
    """The JSON values a data file holds, one a line: the value itself and every object within it."""
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [value] * isinstance(value, dict) + [item for v in inner for item in _lines_of(v)]


def test_every_row_of_the_real_data_reads_as_json_reads_it(data_dir, tmp_path):
    """Every JSON value of the shared data (SQuAD v2, LoCoMo, ExpertQA, HaluEval, …) and 2,000 realistic
    records, written as JSONL with and without escapes, read as json.loads reads each line; most by orjson."""
    values, verbatim = [], []
    for f in sorted(data_dir.rglob("*.json*")):
        text = f.read_text(encoding="utf-8-sig")
        try:
            values += _lines_of(json.loads(text))
        except json.JSONDecodeError:  # JSON lines (HaluEval's .json, the .jsonl files): each line as written too
            lines = [line for line in text.split("\n") if line.strip()]
            verbatim += [line + "\n" for line in lines]
            values += [json.loads(line) for line in lines]
    values += [realistic(i) for i in range(2000)]
    assert len(values) > 30_000 and len(verbatim) > 700
    for ascii_only in (False, True, None):
        path = tmp_path / f"all_{ascii_only}.jsonl"
        path.write_text("".join(verbatim if ascii_only is None else
                                (json.dumps(v, ensure_ascii=ascii_only) + "\n" for v in values)), encoding="utf-8")
        lines = path.read_text(encoding="utf-8").split("\n")[:-1]  # not splitlines: a text may hold U+2028
        rows, by_orjson = iter_jsonl(path), 0
        for lineno, item in rows:
            by_orjson += rows.surrogate_free(lineno)
            assert _same(item, json.loads(lines[lineno - 1])), (path, lineno)
        assert lineno == len(lines) and by_orjson == len(lines)  # none of them needed json


def test_the_records_of_realistic_rows_are_those_of_the_field_by_field_checks(tmp_path):
    rows = [realistic(i) for i in range(3000)]
    for i, raw in enumerate(rows, start=1):
        quick = _plain_record(raw, None)
        assert quick is not None and quick == _checked_record(raw, path="x.jsonl", row=i, default_id=None,
                                                              scales={})
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    expected = [_checked_record(json.loads(json.dumps(r)), path=str(path), row=i, default_id=None, scales={})
                for i, r in enumerate(rows, start=1)]
    assert load_mapped(str(path)).records == expected
    assert load_records(str(path)).records == expected


@pytest.mark.parametrize("load", [load_records, load_mapped])
def test_an_integer_past_64_bits_stays_an_integer(tmp_path, load):
    # orjson reads 18446744073709551616 (2**64) as the float 1.8446744073709552e+19; json.loads as the int
    path = tmp_path / "big.jsonl"
    path.write_text('{"id": 18446744073709551616, "query": "q", "n": -9223372036854775809, '
                    '"deep": {"v": [1, 123456789012345678901234567890]}, "top": 18446744073709551615, "f": 1e19, '
                    '"l": ["x", -100000000000000000000]}\n'
                    '{"id": "b", "query": "q", "category": 100000000000000000000}\n'
                    '{"id": "c", "query": "q", "l": ["x", 18446744073709551616]}\n', encoding="utf-8")
    first, second, third = load(str(path)).records
    assert first.id == "18446744073709551616"
    assert first.extra == {"n": -9223372036854775809, "deep": {"v": [1, 123456789012345678901234567890]},
                           "top": 18446744073709551615, "f": 1e19, "l": ["x", -100000000000000000000]}
    assert type(first.extra["n"]) is int and type(first.extra["f"]) is float
    assert second.category == "100000000000000000000"
    assert third.extra == {"l": ["x", 18446744073709551616]} and type(third.extra["l"][1]) is int
    rows = iter_jsonl(path)
    next(rows)
    assert not rows.surrogate_free(1)  # read again by json.loads


def test_nesting_json_cannot_read_is_the_same_error_and_what_it_reads_is_the_same(tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"query": "q", "x": ' + "[" * 150 + "]" * 150 + "}\n", encoding="utf-8")
    (record,) = load_records(str(path)).records
    assert _same(record.extra["x"], json.loads("[" * 150 + "]" * 150))
    # orjson reads 1,000 levels (it stops at 1,024); json runs out of stack first: the line says so
    path.write_text('{"query": "q"}\n{"query": "q", "x": ' + "[" * 1000 + "]" * 1000 + "}\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_records(str(path))
    assert str(e.value) == f"{path}, row 2: {TOO_DEEP}"


def test_a_lone_surrogate_in_a_field_written_as_json_text_is_refused(tmp_path):
    # the line itself holds no surrogate (orjson reads it: the escape sits inside a text), the decoded list does
    path = tmp_path / "s.jsonl"
    path.write_text(json.dumps({"query": "q", "contexts": json.dumps(["ok", "\udfff"])}) + "\n"
                    + json.dumps({"question": "q", "passages": json.dumps(["\ud800"])}) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_mapped(str(path))
    assert str(e.value).startswith(f"{path}, row 1, field 'contexts': holds a lone surrogate code point '\\udfff'")
    path.write_text(json.dumps({"q": "q", "c": json.dumps(["\ud800"])}) + "\n", encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_mapped(str(path), columns={"query": "q", "contexts": "c"})
    assert str(e.value).startswith(f"{path}, row 1, field 'contexts' (column 'c'): holds a lone surrogate")


@pytest.mark.parametrize("line, field", [('{"query": "q", "answer": "\\ud800"}', "answer"),
                                         ('{"query": "q", "answer": "a\\udc00"}', "answer"),
                                         ('{"query": "q", "x": [{"\\udbff": 1}]}', "x"),
                                         ('{"query": "q", "\\ud800\\ud800": 1}', "\\ud800\\ud800")])
def test_a_lone_surrogate_orjson_refuses_is_found_in_json_s_row(tmp_path, line, field):
    path = tmp_path / "s.jsonl"
    path.write_text('{"query": "fine"}\n' + line + "\n", encoding="utf-8")
    rows = iter_jsonl(path)
    next(rows), next(rows)
    assert not rows.surrogate_free(2)
    for load in (load_records, load_mapped):
        with pytest.raises(DataError) as e:
            load(str(path))
        assert str(e.value).startswith(f"{path}, row 2, field '{field}': holds a lone surrogate code point")


def test_what_json_reads_and_orjson_does_not_is_read_as_before(tmp_path):
    path = tmp_path / "nan.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"query": "q", "latency_s": NaN, "x": Infinity}\r\n\r\n'
                     b'{"query": "r", "y": -Infinity}\r\n')
    first, second = load_records(str(path)).records
    assert first.latency_s is None and first.extra["x"] == math.inf and second.extra["y"] == -math.inf
    assert [row for row, _ in iter_jsonl(path)] == [1, 3]
    path.write_text('{"query": "q"}\n{"query": "q", "human": {"answer_similarity": NaN}}\n', encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_records(str(path))
    assert str(e.value).startswith(f"{path}, row 2, field 'human.answer_similarity': expected a number, or null")


#: values of each field that the quick way must either read as the checks do or leave to them
VARIANTS = {
    "query": ["q", " q ", "", "  ", None, 1, ["q"], float("nan"), type("S", (str,), {})("q")],
    "id": ["a", "", 7, True, None, 1.5, float("nan"), ["a"]],
    "answer": ["a", "", None, 1, ["a"], float("nan")],
    "label": [True, False, None, 1, 0, "yes", 2, float("nan")],
    "latency_s": [0.5, 0.0, -0.0, -1.0, math.inf, float("nan"), 1, True, "0.5", None, 1e308],
    "contexts": [["a", "b"], [], None, "a", ["a", 1], [["a"]], ("a",), float("nan")],
    "context_ids": [["1"], [1, 2], [True], None, ["1", None]],
    "reference_answers": [["a"], "a", [], None, [1]],
    "category": [None, "multi_hop", 3, ""],
    "context_sources": [None, ["s", "t"], ["s"]],
    "timings": [None, {"retrieve": 0.1}, {}],
    "human": [None, {}, {"correctness": 3}],
}


def test_the_quick_way_gives_the_checks_record_or_leaves_the_row_to_them():
    base = {"id": "a", "query": "q", "answer": "a", "label": True, "latency_s": 0.5, "contexts": ["a", "b"],
            "context_ids": ["1", "2"], "reference_answers": ["a"], "note": {"k": 1}}
    quick = 0
    for field, values in VARIANTS.items():
        for value in values:
            for raw in ({**base, field: value}, {k: v for k, v in base.items() if k != field} | {field: value}):
                try:
                    expected = _checked_record(dict(raw), path="x.jsonl", row=3, default_id=None, scales={})
                except DataError as exc:
                    assert _plain_record(dict(raw), None) is None, (field, value)
                    with pytest.raises(DataError) as e:
                        to_record(dict(raw), path="x.jsonl", row=3, scales={})
                    assert str(e.value) == str(exc)
                    continue
                got = _plain_record(dict(raw), None)
                quick += got is not None
                assert got is None or _same(got, expected), (field, value)
                assert _same(to_record(dict(raw), path="x.jsonl", row=3, scales={}), expected)
    assert quick > 20


def test_present_fields_counts_a_falsy_value_and_not_an_absent_one():
    from ragexp.common.records import Record, present_fields

    records = [Record(id="a", query="q", contexts=[], label=False), Record(id="b", query="q", answer="", latency_s=0.0)]
    assert present_fields(records) == ["id", "query", "contexts", "answer", "label", "latency_s"]
    assert present_fields([]) == []


# --- the file read as bytes (datasets.base._json_lines): lines, blank lines, the BOM and bytes that are not UTF-8


def _as_text_mode_reads(path: Path) -> list:
    """(row, value) as the file read as text reads it (universal newlines, a BOM dropped, json.loads per line):
    how JsonLines read it before it read bytes."""
    with open(path, encoding="utf-8-sig") as fh:
        return [(n, json.loads(line)) for n, line in enumerate(fh, start=1) if line.strip()]


@pytest.mark.parametrize("end", ["\r", "\r\n", "mixed"])
def test_lines_end_where_text_mode_ends_them(tmp_path, end):
    """A file of lone \\r ends (old Mac), of \\r\\n, or of every kind at once: the same rows, each with the row
    number text mode gives it, blank lines (\\x1c, U+00A0, U+3000 are blank to str.strip) skipped."""
    values = [{"query": f"q{i}", "answer": "caf\u00e9 \u4e2d", "x": [i, 1.5]} for i in range(9)]
    blanks = ["", "  ", "\x1c", "\u00a0", "\u3000 \t"]
    ends = ["\r", "\r\n", "\n", "\r\r\n", "\n\r", "\r\r"] if end == "mixed" else [end]
    text = "\ufeff" + "".join(json.dumps(v, ensure_ascii=False) + ends[i % len(ends)] + blanks[i % len(blanks)]
                              + ends[(i + 1) % len(ends)] for i, v in enumerate(values)) + '{"query": "last"}'
    path = tmp_path / "ends.jsonl"
    path.write_bytes(text.encode("utf-8"))
    rows = list(iter_jsonl(path))
    assert _same(rows, _as_text_mode_reads(path)) and len(rows) == 10
    if end == "\r":
        assert [n for n, _ in rows] == list(range(1, 20, 2))
    (tmp_path / "bad.jsonl").write_bytes(text.replace('"q7"', '"q7\\x"').encode("utf-8"))
    with pytest.raises(DataError) as e:
        list(iter_jsonl(tmp_path / "bad.jsonl"))
    with pytest.raises(json.JSONDecodeError):
        _as_text_mode_reads(tmp_path / "bad.jsonl")
    row = next(n for n, v in _as_text_mode_reads(path) if v.get("query") == "q7")
    assert str(e.value).startswith(f"{tmp_path / 'bad.jsonl'}, row {row}: unreadable JSON line: Invalid \\escape")


#: byte sequences Python's UTF-8 decoder refuses: an encoded surrogate, overlong forms, past U+10FFFF, a lone
#: continuation byte, a sequence cut short, a 5-byte form, bytes never used in UTF-8
NOT_UTF8 = [b"\xed\xa0\x80", b"\xc0\x80", b"\xe0\x80\xaf", b"\xf4\x90\x80\x80", b"\x80", b"\xe2\x82", b"\xf0\x9f\x98",
            b"\xf8\x88\x80\x80\x80", b"\xff", b"\xfe", b"caf\xe9"]


@pytest.mark.parametrize("bad", NOT_UTF8)
@pytest.mark.parametrize("where", ["value", "key", "end"])
def test_a_byte_that_is_not_utf8_is_told_at_its_row(tmp_path, bad, where):
    """orjson refuses each line (it never reads one Python's decoder refuses); the line names the row holding
    the byte, with the reason text mode's decoder gives."""
    line = {"value": b'{"query": "' + bad + b'"}', "key": b'{"query": "q", "' + bad + b'": 1}',
            "end": b'{"query": "q"} ' + bad}[where]
    for end in (b"\n", b"\r", b"\r\n", b""):
        path = tmp_path / "bad.jsonl"
        path.write_bytes(b'{"query": "a"}\r\n\n{"query": "b"}\r' + line + end + b'{"query": "c"}\n')
        try:
            path.read_bytes().decode("utf-8")
        except UnicodeDecodeError as exc:
            reason = exc.reason
        rows = iter_jsonl(path)
        assert next(rows)[0] == 1 and next(rows)[0] == 3
        with pytest.raises(DataError) as e:
            next(rows)
        assert str(e.value) == f"{path}, row 4: unreadable: not UTF-8 text ({reason})"


def test_the_rows_before_a_byte_that_is_not_utf8_come_in_file_order(tmp_path):
    """The file is read a line at a time: a bad JSON row before the byte is told first, and dataset.limit stops
    before it (read as text, the byte was told first, its 8 KB of text decoded before any of its rows was read)."""
    path = tmp_path / "order.jsonl"
    path.write_bytes(b'{"query": "a"}\n{"query": "b"}\n{"query": "c\xff"}\n')
    for load in (load_records, load_mapped):
        assert [r.query for r in load(str(path), limit=2).records] == ["a", "b"]
        with pytest.raises(DataError) as e:
            load(str(path), limit=3)
        assert str(e.value) == f"{path}, row 3: unreadable: not UTF-8 text (invalid start byte)"
    path.write_bytes(b'{"query": "a"}\n{"query": \n{"query": "c\xff"}\n')
    with pytest.raises(DataError) as e:
        load_records(str(path))
    assert str(e.value).startswith(f"{path}, row 2: unreadable JSON line: Expecting value")


def test_a_binary_file_is_named_before_its_first_line_is_read(tmp_path):
    """A PDF's first line is UTF-8 ('%PDF-1.7'); its first byte that is not comes 20 KB on: the PDF is still named,
    not its first line's JSON; a file that starts so and is all UTF-8 is read as lines."""
    path = tmp_path / "paper.jsonl"
    path.write_bytes(b"%PDF-1.7\n" + b"%" * 20_000 + b"\n\xe2\xe3\xcf\xd3\n")
    for load in (load_records, load_mapped):
        with pytest.raises(DataError) as e:
            load(str(path))
        assert str(e.value) == (f"{path}: unreadable: a PDF file, not UTF-8 text (a table of records: dataset=mapped "
                                "reads Parquet, CSV and JSON)")
    path.write_bytes(b"%PDF-1.7\n")
    with pytest.raises(DataError) as e:
        load_records(str(path))
    assert str(e.value).startswith(f"{path}, row 1: unreadable JSON line: Expecting value")
