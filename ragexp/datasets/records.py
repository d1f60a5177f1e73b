"""``dataset=records``: canonical records (docs/records.md#fields), one JSON object per line."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

from ragexp.datasets.base import Dataset, build, existing, iter_jsonl
from ragexp.datasets.mapped import ALIASES
from ragexp.datasets.split import split_of
from ragexp.errors import DataError


def load_records(path: str, *, name: str = "records", limit: int | None = None, label: bool | None = None, **split) -> Dataset:
    """Read canonical JSONL records; every field is checked against the types of docs/records.md#fields. ``split``:
    :mod:`ragexp.datasets.split`."""
    p = existing(path)
    rows = iter_jsonl(p)
    return build(name, p, _named_query(str(p), rows), limit=limit, label=label, split=split_of(split),
                 surrogate_free=rows.surrogate_free)


def _named_query(source: str, rows: Iterable[tuple[int, Any]]) -> Iterator[tuple[int, Any]]:
    """The rows as read; a row with no ``query`` key but a common name for it (``question``: Ragas', DeepEval's
    exports) is one line pointing to ``dataset=mapped``, which reads those names, instead of a missing query."""
    for row, raw in rows:
        if isinstance(raw, dict) and "query" not in raw:
            named = [c for c in ALIASES["query"] if c in raw]
            if named:
                raise DataError(f"no 'query' key, but a {named[0]!r} key: dataset=mapped reads the common names of "
                                "the fields (question, response, ground_truth…; docs/datasets.md), or rename the key "
                                "to query", path=source, row=row, field="query")
        yield row, raw

