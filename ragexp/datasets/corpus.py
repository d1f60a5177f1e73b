"""The one corpus reader: the documents a retriever searches and the test-set generator asks about.

``dataset.corpus=FILE_OR_FOLDER`` (any adapter) and ``python -m ragexp.generate corpus.path=…`` both
read through :func:`read_corpus` (docs/testset.md, "Your corpus"):

- a JSONL / JSON-list / CSV / TSV / Parquet file of documents, one per row, with an id and a text
  column (``id`` and ``text`` unless mapped: ``columns={id: doc_id, text: contents}``, as
  ``dataset=mapped`` maps its columns);
- or a folder: every ``.txt`` and ``.md`` file under it, read as UTF-8, its path relative to the
  folder (``/``-separated) as its id (:func:`doc_id_of`). An empty file there is skipped and counted, not
  an error; a symbolic link to a file outside the folder is left out, and a line says how many.

What is wrong is one line naming the file, the row and the field (a :class:`~ragexp.errors.DataError`):
no documents at all, a file that is not UTF-8 text (a binary), a row without its id or text, a
text that is not a string or is blank, the same id twice.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "a.md").write_text("# Title\\nSome text."); _ = (d / "sub").mkdir(); _ = (d / "sub" / "b.txt").write_text("More.")
    >>> c = read_corpus(d)
    >>> list(c.docs.items()), c.skipped
    ([('a.md', '# Title\\nSome text.'), ('sub/b.txt', 'More.')], 0)
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from ragexp.errors import DataError
from ragexp.datasets.base import existing, read_table

#: file suffixes a corpus folder's documents may have
TEXT_SUFFIXES = (".txt", ".md")


@dataclass
class Corpus:
    """Documents in file order (id → text), where they came from, and how many empty ones were skipped."""

    docs: dict[str, str]
    source: str
    skipped: int = 0
    info: dict[str, Any] = field(default_factory=dict)


def read_corpus(path: str | Path, *, columns: Mapping[str, str] | None = None, format: str | None = None,
                format_key: str = "corpus.format") -> Corpus:
    """The documents of a corpus file or folder (module docstring); ``columns``: ``{id: <column>, text: <column>}``;
    ``format_key``: the setting that names the file's format (``dataset.corpus_format`` in a run's dataset)."""
    if path is None or str(path) in ("", "???"):
        raise DataError("no corpus given: set dataset.corpus=FILE_OR_FOLDER (or corpus.path= for ragexp.generate)")
    p = Path(path).expanduser()
    if not p.exists():
        raise DataError(f"corpus not found (looked at {p.resolve()})", path=str(path))
    if p.is_dir():
        return _read_folder(p)
    return _read_table(existing(p, "corpus file"), columns, format, format_key)


def doc_id_of(relative: Path) -> str:
    """A folder document's id: its relative path, ``/``-separated; bytes of a file name that are not UTF-8
    written as ``\\xNN`` escapes (the id is valid text wherever it goes: JSON, a digest, the console).

    >>> doc_id_of(Path(os.fsdecode(b"caf\\xe9.txt"))), doc_id_of(Path("sub/b.md"))
    ('caf\\\\xe9.txt', 'sub/b.md')
    """
    return os.fsencode(relative.as_posix()).decode("utf-8", "backslashreplace")


def _inside(f: Path, root: Path) -> bool:
    """Whether ``f`` (through any symbolic link) is a file under ``root``."""
    try:
        return f.resolve().is_relative_to(root.resolve())
    except OSError:
        return False


def _read_folder(root: Path) -> Corpus:
    found = sorted(f for f in root.rglob("*") if f.is_file() and f.suffix.lower() in TEXT_SUFFIXES)
    files = [f for f in found if _inside(f, root)]
    if outside := len(found) - len(files):  # a link to a file elsewhere (~/.ssh/…) is not one of the documents
        print(f"[ragexp] corpus {doc_id_of(root)}: {outside} link(s) to files outside the folder left out",
              file=sys.stderr, flush=True)
    docs: dict[str, str] = {}
    skipped = 0
    for f in files:
        try:
            text = f.read_text(encoding="utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DataError(f"unreadable: not UTF-8 text ({exc.reason}); expected .txt or .md documents",
                            path=doc_id_of(f)) from None
        except OSError as exc:
            raise DataError(f"cannot read the file: {exc.strerror or exc}", path=doc_id_of(f)) from None
        if "\x00" in text:
            raise DataError("unreadable: holds NUL bytes (a binary file?); expected .txt or .md text", path=doc_id_of(f))
        if not text.strip():
            skipped += 1
            continue
        docs[doc_id_of(f.relative_to(root))] = text
    if not docs:
        found = f"{len(files)} empty" if files else "no"
        raise DataError(f"the corpus is empty: {found} {' or '.join(TEXT_SUFFIXES)} files under the folder; "
                        "expected documents to read", path=str(root))
    return Corpus(docs, str(root), skipped, {"format": "folder", "files": len(files)})


def _read_table(p: Path, columns: Mapping[str, str] | None, format: str | None, format_key: str) -> Corpus:
    mapping = dict(columns or {})
    unknown = [k for k in mapping if k not in ("id", "text")]
    if unknown or not all(isinstance(v, str) for v in mapping.values()):
        raise DataError(f"corpus columns must map id and text to column names ({{id: doc_id, text: contents}}), "
                        f"got {dict(mapping)!r}", path=str(p))
    id_col, text_col = mapping.get("id", "id"), mapping.get("text", "text")
    try:
        names, rows = read_table(p, format, format_key)
        rows = list(rows)
    except DataError as exc:
        if "empty" in str(exc) and p.stat().st_size == 0:
            raise DataError("the corpus is empty: expected documents with an id and a text", path=str(p)) from None
        raise
    if names and not rows:
        raise DataError("the corpus is empty: a header and no documents", path=str(p))
    return Corpus(_documents(rows, id_col, text_col, str(p)), str(p), 0, {"format": p.suffix.lstrip(".")})


def _documents(rows: Iterable[tuple[int, Any]], id_col: str, text_col: str, source: str) -> dict[str, str]:
    docs: dict[str, str] = {}
    first: dict[str, int] = {}
    for row, item in rows:
        if not isinstance(item, dict):
            raise DataError(f"expected a document object with '{id_col}' and '{text_col}', got {type(item).__name__}",
                            path=source, row=row)
        for want in (id_col, text_col):
            if item.get(want) is None:
                have = ", ".join(map(str, item)) or "none"
                raise DataError(f"missing: expected the document's {'id' if want == id_col else 'text'} in column "
                                f"'{want}' (map another with columns={{id: ..., text: ...}}); the row's columns: {have}",
                                path=source, row=row, field=want)
        doc_id, text = item[id_col], item[text_col]
        if isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)) or str(doc_id).strip() == "":
            raise DataError(f"expected a non-empty text or integer id, got {type(doc_id).__name__} {doc_id!r:.40}",
                            path=source, row=row, field=id_col)
        if not isinstance(text, str) or not text.strip():
            got = f"{type(text).__name__} {text!r:.40}" if not isinstance(text, str) else "a blank text"
            raise DataError(f"expected the document's text (a non-blank string), got {got}", path=source, row=row,
                            field=text_col)
        if "\x00" in text:
            raise DataError("holds NUL bytes (binary content?): expected text", path=source, row=row, field=text_col)
        key = str(doc_id)
        if key in first:
            raise DataError(f"duplicate document id '{key}' (first at row {first[key]}); ids must be unique",
                            path=source, row=row, field=id_col)
        first[key] = row
        docs[key] = text
    if not docs:
        raise DataError("the corpus is empty: expected documents with an id and a text", path=source)
    return docs


def unmatched_ids(records: Iterable[Any], corpus: Mapping[str, str]) -> tuple[int, int, list[str]]:
    """(ids of ``gt_context_ids`` not in ``corpus``, ids looked at, up to 5 examples). A chunk id
    ``<doc id>#<n>`` counts as its document's."""
    missing, total, examples = 0, 0, []
    for r in records:
        for gid in getattr(r, "gt_context_ids", None) or []:
            total += 1
            g = str(gid)
            if g in corpus or g.rsplit("#", 1)[0] in corpus:
                continue
            missing += 1
            if len(examples) < 5 and g not in examples:
                examples.append(g)
    return missing, total, examples
