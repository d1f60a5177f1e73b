"""``dataset=records``: canonical records (SPEC §1), one JSON object per line."""

from __future__ import annotations

from ragexp.datasets.base import Dataset, build, existing, iter_jsonl


def load_records(path: str, *, name: str = "records", limit: int | None = None, label: bool | None = None) -> Dataset:
    """Read canonical JSONL records; every field is checked against SPEC §1's types."""
    p = existing(path)
    return build(name, p, iter_jsonl(p), limit=limit, label=label)
