"""What every dataset adapter returns, and the helpers they share.

An adapter is a function ``load_<format>(path, *, name, limit, label, ...) -> Dataset`` named
by ``_target_`` in ``conf/dataset/<name>.yaml``. It reads the file, maps each item to the
canonical fields of SPEC §1, and validates every record through
:func:`ragexp.records.to_record`, so a bad value is reported with its file, row and field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from ..errors import DataError
from ..records import Record, check_records, to_record


@dataclass
class Dataset:
    """Validated records, plus the corpus they were drawn from when the source has one."""

    name: str
    records: list[Record]
    source: str
    corpus: dict[str, str] | None = None  # passage id → text, for the pipeline's retrievers
    info: dict[str, Any] = field(default_factory=dict)


def existing(path: str | Path, what: str = "dataset file") -> Path:
    """The path, or a DataError saying it is missing (and where it was looked for)."""
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"{what} not found (looked at {p.resolve()}); check dataset.path or data_dir", path=str(path))
    return p


def read_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except UnicodeDecodeError as exc:
        raise DataError(f"unreadable: not UTF-8 text ({exc.reason})", path=str(path)) from None
    except json.JSONDecodeError as exc:
        raise DataError(f"unreadable JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}", path=str(path)) from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, Any]]:
    """(line number, parsed object) for every non-blank line; a bad line names its number."""
    try:
        with open(path, encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    yield lineno, json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(f"unreadable JSON line: {exc.msg} at column {exc.colno}; expected one JSON object per line",
                                    path=str(path), row=lineno) from None
    except UnicodeDecodeError as exc:
        raise DataError(f"unreadable: not UTF-8 text ({exc.reason})", path=str(path)) from None


def build(name: str, source: str | Path, raws: Iterable[tuple[int, dict[str, Any]]], *, limit: int | None = None,
          label: bool | None = None, corpus: dict[str, str] | None = None, **info: Any) -> Dataset:
    """Validate ``(row, raw)`` pairs into a :class:`Dataset`; ``label`` fills absent labels."""
    records: list[Record] = []
    for row, raw in raws:
        if limit is not None and len(records) >= limit:
            break
        if label is not None and isinstance(raw, dict) and raw.get("label") is None:
            raw = {**raw, "label": label}
        records.append(to_record(raw, path=str(source), row=row))
    check_records(records, path=str(source))
    return Dataset(name=name, records=records, source=str(source), corpus=corpus, info=info)
