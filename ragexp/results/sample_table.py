"""A streamed run's per-sample table, read from its Parquet file a column at a time (docs/api.md,
"What it returns"): ``ragexp.evaluate``'s ``result.per_sample`` after a run scored in chunks, so
that reading one metric's values does not bring every answer, question and passage into memory.

    >>> import tempfile, pathlib
    >>> from ragexp.results.tables import write_parquet
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "per_sample.parquet"
    >>> write_parquet(path, {"id": ["q1", "q2"], "answer": ["Paris", "Lyon"], "exact_match": [1.0, 0.0]})
    >>> table = SampleTable(path)
    >>> table.shape, list(table.columns)
    ((2, 3), ['id', 'answer', 'exact_match'])
    >>> table["exact_match"].tolist(), table.loaded
    ([1.0, 0.0], False)
    >>> table.to_pandas().loc[1, "answer"], table.loaded
    ('Lyon', True)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


class SampleTable:
    """The per-sample table of a Parquet file, Arrow-backed: ``table["metric"]`` reads that column
    alone (a pandas Series, the same values as the whole frame's column), ``table[["a", "b"]]`` those
    columns (a DataFrame), :meth:`to_arrow` a ``pyarrow.Table`` without a Python object per cell,
    :meth:`head` the first rows; ``columns``, ``shape`` and ``len`` come from the file's metadata.
    Anything else a pandas DataFrame has (``.loc``, ``.equals``, ``.groupby``…) reads the whole
    table once, as :meth:`to_pandas` does, and answers from that frame (``loaded`` says whether it
    has been read)."""

    def __init__(self, path: Path | str):
        import pyarrow.parquet as pq

        self.path = Path(path)
        with pq.ParquetFile(self.path) as table:
            self._names = list(table.schema_arrow.names)
            self._rows = table.metadata.num_rows
        self._frame = None

    @property
    def loaded(self) -> bool:
        """Whether the whole table has been read into a DataFrame."""
        return self._frame is not None

    @property
    def columns(self):
        import pandas as pd

        return pd.Index(self._names, dtype=object)

    @property
    def shape(self) -> tuple[int, int]:
        return self._rows, len(self._names)

    def __len__(self) -> int:
        return self._rows

    def __iter__(self):
        return iter(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def to_arrow(self, columns: list[str] | None = None):
        """The table (or its ``columns``) as a ``pyarrow.Table``, read from the file."""
        import pyarrow.parquet as pq

        with pq.ParquetFile(self.path) as table:
            return table.read(columns=None if columns is None else self._known(columns))

    def to_pandas(self):
        """The whole table as a pandas DataFrame (read once, then kept)."""
        if self._frame is None:
            from ragexp.results.columns import frame_of
            from ragexp.results.tables import read_parquet_columns

            self._frame = frame_of(read_parquet_columns(self.path))
        return self._frame

    def head(self, n: int = 5):
        """The first ``n`` rows as a DataFrame, from the first row groups only."""
        import pyarrow.parquet as pq

        from ragexp.results.columns import frame_of

        parts, have = [], 0
        with pq.ParquetFile(self.path) as table:
            for group in range(table.num_row_groups):
                if have >= n:
                    break
                part = table.read_row_group(group)
                parts.append(part.slice(0, n - have))
                have += min(part.num_rows, n - have)
        if not parts:
            return frame_of({name: [] for name in self._names})
        import pyarrow as pa

        return frame_of(pa.concat_tables(parts).to_pydict())

    def __getitem__(self, key: Any):
        if self._frame is None and isinstance(key, str):
            import pandas as pd

            values = self.to_arrow([key]).column(0).to_pylist()
            return pd.DataFrame({key: values}, columns=[key])[key]  # the dtype the whole frame's column has
        if self._frame is None and isinstance(key, list) and all(isinstance(k, str) for k in key):
            from ragexp.results.columns import frame_of

            return frame_of(self.to_arrow(key).to_pydict())
        return self.to_pandas()[key]

    def _known(self, columns: list[str]) -> list[str]:
        missing = [c for c in columns if c not in self._names]
        if missing:
            raise KeyError(f"{missing[0]!r}: not a column of {self.path.name} (its columns: {', '.join(self._names)})")
        return list(columns)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.to_pandas(), name)

    def __repr__(self) -> str:
        return (f"SampleTable: {self._rows:,} rows x {len(self._names)} columns of {self.path}, read a column at "
                f"a time (.to_pandas() for the whole DataFrame)\n{self.head()!r}")

    def _repr_html_(self) -> str:
        import html

        return (f"<p>{html.escape(f'{self._rows:,} rows x {len(self._names)} columns of {self.path.name}')}"
                f" (the first 5 shown)</p>" + self.head().to_html())
