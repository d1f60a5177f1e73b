"""``dataset=records``: canonical records (docs/records.md#fields), one JSON object per line."""

from __future__ import annotations

from ragexp.datasets.base import Dataset, build, existing, iter_jsonl
from ragexp.datasets.split import split_of


def load_records(path: str, *, name: str = "records", limit: int | None = None, label: bool | None = None, **split) -> Dataset:
    """Read canonical JSONL records; every field is checked against the types of docs/records.md#fields. ``split``:
    :mod:`ragexp.datasets.split`."""
    p = existing(path)
    return build(name, p, iter_jsonl(p), limit=limit, label=label, split=split_of(split))
