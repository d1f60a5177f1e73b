"""``dataset=records``: canonical records (docs/records.md#fields), one JSON object per line."""

from __future__ import annotations

from ragexp.datasets.base import Dataset, build, existing, iter_jsonl


def load_records(path: str, *, name: str = "records", limit: int | None = None, label: bool | None = None, split: str = "all", split_fraction: float = 0.5, split_seed: int = 0) -> Dataset:
    """Read canonical JSONL records; every field is checked against the types of docs/records.md#fields. ``split``:
    :mod:`ragexp.datasets.split`."""
    p = existing(path)
    return build(name, p, iter_jsonl(p), limit=limit, label=label, split=(split, split_fraction, split_seed))
