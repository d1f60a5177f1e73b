"""What every dataset adapter returns, and the helpers they share.

An adapter is a function ``load_<format>(path, *, name, limit, label, ...) -> Dataset`` named
by ``_target_`` in ``conf/dataset/<name>.yaml``. It reads the file, maps each item to the
canonical fields (docs/records.md#fields), and validates every record through
:func:`ragexp.common.records.to_record`, so a bad value is reported with its file, row and field.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import orjson

from ragexp.common.collector import collector_paused
from ragexp.errors import DataError
from ragexp.common.records import Record, to_record
from ragexp.datasets.ids import IdRows
from ragexp.datasets.split import split_records
from ragexp.metrics.base import label_scales


@dataclass
class Dataset:
    """Validated records, plus the corpus they were drawn from when the source has one, or the
    conversations they ask about (docs/datasets.md#conversations)."""

    name: str
    records: list[Record]
    source: str
    corpus: dict[str, str] | None = None  # passage id → text, for the pipeline's retrievers
    info: dict[str, Any] = field(default_factory=dict)
    #: conversation id → its :class:`ragexp.datasets.conversations.Conversation`, when the records are questions
    #: about conversations (each record's ``extra["conversation_id"]`` names its own); None otherwise
    conversations: dict[str, Any] | None = None


def existing(path: str | Path, what: str = "dataset file", *, directory: bool = False) -> Path:
    """The path, or a DataError saying it is missing (and where it was looked for)."""
    if path is None or str(path) in ("", "???"):
        raise DataError(f"no {what} given: set dataset.path=FILE")
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{what} not found (looked at {p.resolve()}); check dataset.path, or data_dir= / $RAGEXP_DATA_DIR (the folder of the shared datasets)", path=str(path))
    if directory and not p.is_dir():
        raise DataError(f"expected a {what} (a directory), got a file", path=str(path))
    if not directory and p.is_dir():
        raise DataError(f"expected a {what}, got a directory", path=str(path))
    if not directory and not p.is_file():  # reading a FIFO waits for a writer, a device never ends
        raise DataError(f"expected a {what} (a regular file), got {_file_kind(p)}", path=str(path))
    return p


def _file_kind(p: Path) -> str:
    """What a path that is not a regular file is: a FIFO, a socket, a character or block device."""
    import stat

    mode = p.stat().st_mode
    for test, name in ((stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "something that is not a file"


#: what a JSON value nested deeper than Python's reader goes (about 1,000 levels) is told
TOO_DEEP = "JSON nested too deeply (expected at most a few hundred levels of [ and {)"
#: a lone UTF-16 surrogate (JSON's "\ud800" escape without its pair): no UTF-8 writer accepts it
_SURROGATE = re.compile("[\ud800-\udfff]")


def unreadable(path: Path, exc: OSError) -> DataError:
    """The one-line error for a file the system will not let us read (permissions, I/O error)."""
    return DataError(f"cannot read the file: {exc.strerror or exc}", path=str(path))


#: Leading bytes of binary formats a user may hand over for a text file, and what to say of them.
MAGIC = {b"PAR1": "a Parquet file", b"SQLite format 3\x00": "an SQLite database", b"PK\x03\x04": "a ZIP archive "
         "(.xlsx, .docx …)", b"\x1f\x8b": "a gzip-compressed file", b"%PDF": "a PDF file", b"\x89HDF": "an HDF5 file"}


def not_text(path: Path, exc: UnicodeDecodeError, row: int | None = None) -> DataError:
    r"""The one line for a file that is not UTF-8 text; a known binary format (Parquet, SQLite, ZIP …) by name.

    >>> import tempfile; f = Path(tempfile.mkdtemp()) / "x.jsonl"; _ = f.write_bytes(b"PAR1\xff\x00")
    >>> str(not_text(f, UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"))).split(": ", 1)[1]
    'unreadable: a Parquet file, not UTF-8 text (a table of records: dataset=mapped reads Parquet, CSV and JSON)'
    """
    try:
        with open(path, "rb") as fh:
            head = fh.read(16)
    except OSError:
        head = b""
    kind = next((what for magic, what in MAGIC.items() if head.startswith(magic)), None)
    if kind is None:
        return DataError(f"unreadable: not UTF-8 text ({exc.reason})", path=str(path), row=row)
    return DataError(f"unreadable: {kind}, not UTF-8 text (a table of records: dataset=mapped reads Parquet, CSV "
                     "and JSON)", path=str(path))


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8-sig") as fh:  # a UTF-8 BOM (Notepad, Excel) is accepted
            return json.load(fh)
    except UnicodeDecodeError as exc:
        raise not_text(path, exc) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"unreadable JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", path=str(path)) from None
    except RecursionError:
        raise DataError(TOO_DEEP, path=str(path)) from None
    except OSError as exc:
        raise unreadable(path, exc) from None


def iter_jsonl(path: Path) -> JsonLines:
    """(line number, parsed object) for every non-blank line; a bad line names its number.
    A UTF-8 byte-order mark at the start of the file is accepted, as in CSV. See :class:`JsonLines`."""
    return JsonLines(path)


#: orjson reads an integer literal past 64 bits as a float (json.loads: an int); no float it reads from a
#: literal of 64 bits or fewer is this large, so a row holding one is read again by json.loads
_BIG = float(2 ** 63)
#: nesting deeper than this is read again by json.loads: json's reader runs out of Python's stack about
#: 1,000 levels down, less the frames above it, where orjson reads 1,024 levels
_NESTING = 100
_is_float, _is_list, _is_dict, _is_text = (float.__instancecheck__, list.__instancecheck__, dict.__instancecheck__,
                                           str.__instancecheck__)


class JsonLines:
    r"""The rows of a JSONL file, read lazily: an iterator of ``(line number, parsed object)`` for every
    non-blank line; a bad line is a DataError naming its number. A UTF-8 byte-order mark at the start
    of the file is accepted, as in CSV.

    Each line is parsed by orjson, and by :func:`json.loads` when orjson refuses it (NaN, Infinity, a
    lone surrogate, bad JSON: json's error names what and where) or would read it otherwise than
    json does (:func:`_as_json_reads`), so every row and every error line is json's. orjson refuses a
    lone surrogate (``"\ud800"``), so a row it read needs no search for one: :meth:`surrogate_free`
    tells :func:`build` so.

    >>> import tempfile; f = Path(tempfile.mkdtemp()) / "x.jsonl"
    >>> _ = f.write_text('{"q": "a"}\n\n{"n": 18446744073709551616}\n{"q": NaN}\n', encoding="utf-8")
    >>> rows = JsonLines(f); next(rows), rows.surrogate_free(1)
    ((1, {'q': 'a'}), True)
    >>> next(rows), rows.surrogate_free(3), next(rows), rows.surrogate_free(4)
    ((3, {'n': 18446744073709551616}), False, (4, {'q': nan}), False)
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        # [the line number of the latest row orjson read, else 0]: shared with the reader, which holds no
        # reference to this object (a cycle would keep the file open until the collector ran)
        self._strict = [0]
        self._held: list[tuple[int, Any]] = []  # a row :meth:`peek` read ahead
        self._rows = _json_lines(path, self._strict)

    def __iter__(self) -> JsonLines:
        return self

    def __next__(self) -> tuple[int, Any]:
        if self._held:
            return self._held.pop()
        return next(self._rows)

    def peek(self) -> tuple[int, Any] | None:
        """The next row without taking it (None at the end of the file)."""
        if not self._held:
            row = next(self._rows, None)
            if row is None:
                return None
            self._held.append(row)
        return self._held[0]

    def surrogate_free(self, row: int) -> bool:
        """True when ``row`` is the latest row read and orjson read it: it holds no lone surrogate. False
        otherwise (an earlier row, or one json read: then :func:`check_text` looks)."""
        return row == self._strict[0]


def _json_lines(path: Path, strict: list[int]) -> Iterator[tuple[int, Any]]:
    """:class:`JsonLines`' reader; ``strict[0]``: the line number of the latest row orjson read, else 0.

    The file is read as bytes, each line handed to orjson as it is (no decoding to text and encoding
    again); a line is decoded only when json reads it, which is where a byte that is not UTF-8 is told,
    at its row (orjson refuses any line that is not UTF-8). A known binary format (:data:`MAGIC`) is
    told before any line, by :func:`_binary_first`."""
    try:
        with open(path, "rb") as fh:
            _binary_first(path, fh)
            for lineno, line in enumerate(_text_lines(fh), start=1):
                try:
                    item = orjson.loads(line)
                except orjson.JSONDecodeError:
                    pass
                else:
                    if _as_json_reads(item):
                        strict[0] = lineno
                        yield lineno, item
                        continue
                try:
                    text = line.decode("utf-8")
                except UnicodeDecodeError as exc:
                    raise not_text(path, exc, row=lineno) from None
                if not text.strip():
                    continue
                strict[0] = 0
                try:  # json's own reading and error, from this frame as before (its depth limit counts frames)
                    item = json.loads(text.rstrip("\r\n"))
                except json.JSONDecodeError as exc:
                    raise _unreadable_line(path, lineno, exc) from None
                except RecursionError:
                    raise DataError(TOO_DEEP, path=str(path), row=lineno) from None
                yield lineno, item
    except OSError as exc:
        raise unreadable(path, exc) from None


def _text_lines(fh: Any) -> Iterator[bytes]:
    r"""The lines of a file opened as bytes, as text mode splits them: at ``\n``, ``\r\n`` and a lone ``\r``
    (each line keeps its end); a UTF-8 byte-order mark at the start is dropped.

    >>> import io; list(_text_lines(io.BytesIO(b"\xef\xbb\xbfa\r\nb\rc\n\r\nd")))
    [b'a\r\n', b'b\r', b'c\n', b'\r\n', b'd']
    """
    first = fh.readline()
    for line in itertools.chain((first[3:] if first.startswith(codecs.BOM_UTF8) else first,), fh):
        if b"\r" in line:
            yield from line.splitlines(True)
        elif line:
            yield line


def _binary_first(path: Path, fh: Any) -> None:
    """A DataError naming the binary format (:func:`not_text`) when the file opened as ``fh`` starts as one
    of :data:`MAGIC` and is not UTF-8 text, told before any of its lines; ``fh`` is left at its start."""
    head = fh.read(16)
    fh.seek(0)
    if not any(map(head.startswith, MAGIC)):
        return
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        while chunk := fh.read(1 << 20):
            decoder.decode(chunk)
        decoder.decode(b"", True)
    except UnicodeDecodeError as exc:
        raise not_text(path, exc) from None
    fh.seek(0)


def _unreadable_line(path: Path, lineno: int, exc: json.JSONDecodeError) -> DataError:
    """The one line for a JSONL line json cannot read."""
    where = f"{exc.msg} column {exc.colno}" if exc.msg.endswith(" at") else f"{exc.msg} at column {exc.colno}"
    other = TABLE_FORMATS.get(path.suffix.lower()) not in (None, "jsonl")  # a CSV, a JSON list…
    hint = (f" (a {path.suffix} file: dataset=mapped reads it, its columns named by dataset.columns)"
            if other else "")
    return DataError(f"unreadable JSON line: {where}; expected one JSON object per line{hint}", path=str(path),
                     row=lineno)


def _as_json_reads(value: Any) -> bool:
    """True when :func:`json.loads` reads what orjson read as ``value``: no float of 2**63 or more in
    magnitude (:data:`_BIG`) and no nesting deeper than :data:`_NESTING`. A row of texts, numbers and
    lists of texts is told at C speed; anything nested is walked level by level.

    >>> _as_json_reads({"a": ["x"], "b": 1.5, "c": {"d": [1, -1e19]}}), _as_json_reads([[[]]])
    (False, True)
    """
    if type(value) is dict:  # a row of texts, numbers and lists of texts, the common case
        values = value.values()
        kinds = set(map(type, values))
        if dict not in kinds and (float not in kinds or max(map(abs, filter(_is_float, values))) < _BIG) and (
                list not in kinds or all(map(_is_text, itertools.chain.from_iterable(filter(_is_list, values))))):
            return True
    level = [value]
    for _ in range(_NESTING):
        items = list(itertools.chain.from_iterable([v.values() if type(v) is dict else v for v in level]))
        kinds = set(map(type, items))
        if float in kinds and max(map(abs, filter(_is_float, items))) >= _BIG:
            return False
        if list not in kinds and dict not in kinds:
            return True
        level = list(filter(_is_list, items)) + list(filter(_is_dict, items))
    return False


#: Table formats :func:`read_table` knows, by file suffix.
TABLE_FORMATS = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "json", ".csv": "csv", ".tsv": "tsv",
                 ".parquet": "parquet", ".pq": "parquet"}


def plain(value: Any) -> Any:
    """Python values for what pandas/numpy hand back: arrays → lists (recursively), numpy scalars → int/float/bool."""
    if isinstance(value, (str, bytes, bool, int, float)) or value is None:
        return value
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if hasattr(value, "tolist"):  # numpy arrays and scalars
        return plain(value.tolist())
    return value


def text_id(text: str, n: int = 10) -> str:
    """A short stable id for a text (hex digest), for sources whose items carry no id."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:n]


def read_delimited(path: Path, fmt: str) -> tuple[list[str], Iterator[tuple[int, dict[str, str | None]]]]:
    """(header, ``(row, {column: cell})`` pairs) of a CSV or TSV file, every cell text as written.

    No type is guessed: an answer ``8``, a reference ``1889`` and an id ``007`` stay the text they
    are, and ``NA``, ``null``, ``None``, ``nan`` are values, not missing ones. Only an empty cell is
    absent (``None``): CSV cannot tell an empty string from no value. Fields that are numbers
    (``latency_s``) or booleans (``label``) are parsed from their text by :func:`ragexp.common.records.to_record`.
    Quoting is RFC 4180's (``"a, b"``, ``""`` for a quote inside), in TSV too. A UTF-8 BOM is
    accepted. A row with more or fewer values than the header, or a quote never closed, is a
    malformed file, reported with its line. Rows are data rows (the header not counted).
    """
    import csv
    import io

    kind = fmt.upper()
    sep = "\t" if fmt == "tsv" else ","
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise not_text(path, exc) from None
    except OSError as exc:
        raise unreadable(path, exc) from None
    # a cell may hold a whole document or a JSON list of passages: lift the csv module's 128 KB cap
    csv.field_size_limit(max(csv.field_size_limit(), 1 << 30))
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=sep, strict=True)
    parsed: list[tuple[int, list[str]]] = []  # (first line of the row, values)
    while True:
        start = reader.line_num + 1
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            if "end of data" in str(exc) or "EOF" in str(exc):
                raise DataError(f"malformed {kind}: the quoted value opened on line {start} is never closed "
                                "(expected a closing \" before the end of the file; a \" inside a quoted value "
                                "is written \"\")", path=str(path)) from None
            raise DataError(f"malformed {kind} at line {reader.line_num}: {exc} (a \" inside a quoted value is "
                            "written \"\")", path=str(path)) from None
        if values:  # a blank line is no row
            parsed.append((start, values))
    if not parsed:
        raise DataError(f"unreadable {kind}: the file is empty (expected a header row)", path=str(path))
    (_, header), body = parsed[0], parsed[1:]
    header = [h.strip() for h in header]
    what = "a tab" if fmt == "tsv" else "a comma"
    for line, values in body:
        if len(values) != len(header):
            n = len(values)
            raise DataError(f"malformed {kind} at line {line}: {n} value{'s' if n != 1 else ''} where the header "
                            f"has {len(header)} columns (expected one value per column; {what} inside a value "
                            "needs quoting)", path=str(path))
    rows = ((i, {h: (v if v != "" else None) for h, v in zip(header, values)})
            for i, (_, values) in enumerate(body, start=1))
    return header, rows


def read_frame(path: Path, fmt: str):
    """A pandas DataFrame of a Parquet file, or of a CSV/TSV file read as text
    (:func:`read_delimited`); an unreadable file raises a one-line DataError."""
    import pandas as pd

    if fmt in ("csv", "tsv"):
        header, rows = read_delimited(path, fmt)
        return pd.DataFrame([item for _, item in rows], columns=header, dtype=object)
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        if isinstance(exc, (FileNotFoundError, IsADirectoryError)):
            raise
        if isinstance(exc, OSError) and exc.errno is not None:
            raise unreadable(path, exc) from None
        detail = " ".join(str(exc).split())[:160]
        raise DataError(f"unreadable Parquet: {detail}", path=str(path)) from None


def require_columns(frame: Any, wanted: tuple[str, ...], path: Path, what: str) -> None:
    """A DataError naming the columns of ``wanted`` the table lacks, what was expected and what it has."""
    missing = [c for c in wanted if c not in frame.columns]
    if missing:
        raise DataError(f"missing column {', '.join(repr(c) for c in missing)}: expected {what} with "
                        f"{', '.join(wanted)}; the file has {', '.join(map(str, frame.columns))}", path=str(path))


def read_table(path: Path, fmt: str | None = None,
               format_key: str = "dataset.format") -> tuple[list[str], Iterator[tuple[int, Any]]]:
    """(column names, ``(row, item)`` pairs) of a JSONL, JSON-list, CSV, TSV or Parquet file; ``format_key``:
    the setting that names the format, for the line said when the suffix does not tell it.

    Rows are 1-based: the line number in JSONL, the item's position in a JSON list, and the
    data row (the header not counted) in CSV, TSV and Parquet. JSONL columns are the keys of
    the first object.
    """
    if fmt and fmt not in set(TABLE_FORMATS.values()):
        raise DataError(f"unknown format '{fmt}': expected one of {', '.join(sorted(set(TABLE_FORMATS.values())))}",
                        path=str(path))
    fmt = fmt or TABLE_FORMATS.get(path.suffix.lower())
    if fmt is None:
        raise DataError(f"cannot tell the format from the suffix '{path.suffix}': expected one of "
                        f"{', '.join(TABLE_FORMATS)} (or set {format_key})", path=str(path))
    if fmt == "jsonl":  # read as the rows are used: a streamed run never holds the file's rows
        items = iter_jsonl(path)
        first = items.peek()
        columns = list(first[1]) if first is not None and isinstance(first[1], dict) else []
        return columns, items
    if fmt == "json":
        data = read_json(path)
        if not isinstance(data, list):
            raise DataError(f"expected a JSON list of objects, got {type(data).__name__}", path=str(path))
        columns = list(data[0]) if data and isinstance(data[0], dict) else []
        return columns, iter(enumerate(data, start=1))
    if fmt in ("csv", "tsv"):
        return read_delimited(path, fmt)
    frame = read_frame(path, fmt)
    columns = [str(c) for c in frame.columns]
    rows = ((i, {str(k): plain(v) for k, v in item.items()}) for i, item in enumerate(frame.to_dict("records"), start=1))
    return columns, rows


def check_text(raw: dict[str, Any], source: str | Path, row: int) -> None:
    """A DataError when a text in the row holds a lone surrogate (``"\\ud800"`` in JSON): it would
    fail only when the results are written, after all the work."""
    if _surrogate_free(list(raw)) and all(map(_surrogate_free, raw.values())):
        return  # the common case, told at C speed; a row that may hold one is walked to name the field

    def walk(value: Any, key: str) -> None:
        if isinstance(value, str) and (found := _SURROGATE.search(value)):
            raise DataError(f"holds a lone surrogate code point {found.group()!r} (a \\ud800-\\udfff escape "
                            "without its pair): expected valid Unicode text", path=str(source), row=row, field=key)
        elif isinstance(value, (dict, list, tuple)):
            for v in value.items() if isinstance(value, dict) else value:  # a (key, value) pair: the key first
                walk(v, key)

    for key, value in raw.items():
        walk((key, value), str(key).encode("utf-8", "backslashreplace").decode())


def _surrogate_free(value: Any) -> bool:
    """True for None, a number, or a text or list of texts without a lone surrogate (UTF-8 cannot encode one)."""
    if value is None or type(value) in (bool, int, float):
        return True
    try:
        text = value if type(value) is str else "".join(value) if type(value) is list else None
        return text is not None and (text.isascii() or bool(text.encode()))
    except (TypeError, UnicodeEncodeError):  # an item that is not a text; a surrogate
        return False


class RecordSink:
    """Where :func:`build` hands validated records while :func:`streamed` is active: called with each
    chunk of ``size`` records (a list) in file order, the last chunk possibly shorter."""

    size: int = 2000

    def __call__(self, chunk: list[Record]) -> None:  # pragma: no cover - an interface
        raise NotImplementedError


_SINK: list[RecordSink] = []


@contextlib.contextmanager
def streamed(sink: RecordSink) -> Iterator[None]:
    """Within the block, every adapter's :func:`build` hands its validated records to ``sink`` chunk by
    chunk and keeps none (the ids excepted, for the duplicate check): the returned Dataset's ``records``
    is empty and ``info["streamed"]`` says how many there were. A streamed run (docs/performance.md,
    "Scale") reads its file this way. The garbage collector runs while the sink works."""
    _SINK.append(sink)
    try:
        yield
    finally:
        _SINK.pop()


def _hand(sink: Any, records: list) -> int:
    """Hand a chunk of records to a streaming sink with the collector on (reading runs with it off); their count."""
    gc.enable()
    try:
        sink(records)
    finally:
        gc.disable()
    return len(records)


@collector_paused()
def build(name: str, source: str | Path, raws: Iterable[tuple[int, dict[str, Any]]], *, limit: int | None = None,
          label: bool | None = None, corpus: dict[str, str] | None = None, split: tuple | None = None,
          surrogate_free: Callable[[int], bool] | None = None, **info: Any) -> Dataset:
    """Validate ``(row, raw)`` pairs into a :class:`Dataset`; ``label`` fills absent labels; ``split`` is
    ``(dataset.split, split_fraction, split_seed)`` (:func:`ragexp.datasets.split.split_of`; None: no split);
    ``surrogate_free(row)`` true: the row is known to hold no lone surrogate (:meth:`JsonLines.surrogate_free`),
    so :func:`check_text` need not look. The garbage collector
    is paused meanwhile (:func:`collector_paused`). Within :func:`streamed`, the records go to its sink."""
    scales = label_scales()  # what to_record checks people's labels on
    path = str(source)
    records: list[Record] = []
    seen = IdRows()  # 24 bytes an id, whatever its length (a streamed read of a million ids: ~24 MB)
    sink = _SINK[-1] if _SINK else None
    handed = 0
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise DataError(f"dataset.limit must be a positive integer or null, got {limit!r}")
    if sink is not None and split and split[0] != "all":
        raise DataError(f"dataset.split={split[0]} needs every record at once: a streamed run reads all of them "
                        "(set execution.mode=memory)", path=str(source))
    for row, raw in raws:
        if label is not None and isinstance(raw, dict) and raw.get("label") is None:
            raw = {**raw, "label": label}
        if isinstance(raw, dict) and not (surrogate_free is not None and surrogate_free(row)):
            check_text(raw, source, row)
        record = to_record(raw, path=path, row=row, scales=scales)
        if (first := seen.add(record.id, row)) is not None:
            raise DataError(f"duplicate id '{record.id}' (first seen at row {first}); ids must be unique",
                            path=str(source), row=row, field="id")
        records.append(record)
        if sink is not None and len(records) >= sink.size:
            handed += _hand(sink, records)
            records = []
        if limit is not None and handed + len(records) >= limit:  # before the next row is read: it may be bad
            break
    if sink is not None and records:
        handed += _hand(sink, records)
        records = []
    if not records and not handed:
        raise DataError("the dataset is empty: expected at least one record", path=str(source))
    if sink is not None:
        return Dataset(name=name, records=[], source=str(source), corpus=corpus, info={**info, "streamed": handed})
    return Dataset(name=name, records=split_records(records, *split) if split else records, source=str(source), corpus=corpus, info=info)
