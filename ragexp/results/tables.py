"""The per-sample table on disk: ``per_sample.parquet`` written whole (:func:`write_parquet`) or chunk
by chunk as a streamed run scores (:class:`ParquetStream`), read back (:func:`read_parquet_columns`),
and the order a results folder's tables are written in (:func:`table_writers`). ``ragexp.core``
computes the columns (:mod:`ragexp.results.columns`); files are written here.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Iterator

from ragexp.common.files import remove_leftovers
from ragexp.results.columns import FULL_TABLE_FILE, SAMPLES_SUFFIX, TABLE_FILE, split_json_parts, table_columns

@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Path]:
    """A private temporary path to write ``path``'s new content to: renamed onto ``path`` when the block
    ends, removed when it fails, so no reader sees half a file and no ``.tmp`` is left behind."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def write_parquet(path: Path, columns: dict[str, list], row_group: int = 10_000) -> None:
    """The full per-sample table as Parquet (zstd), converted and written in row groups of ``row_group`` rows.
    Each column has one type: numbers float64 (int64 when all whole), text string, lists lists of strings
    (a ``K/samples`` column lists of float64); a column that mixes kinds holds their text."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    kinds = {name: "floats" if name.endswith(SAMPLES_SUFFIX) else _arrow_kind(values)
             for name, values in columns.items()}
    schema = _schema(kinds)
    n = len(next(iter(columns.values()), []))
    with replacing(path) as tmp, pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        for start in range(0, n, row_group):
            writer.write_batch(pa.record_batch([_cells(values[start:start + row_group], kinds[name])
                                                for name, values in columns.items()], schema=schema))


def _types() -> dict[str, Any]:
    import pyarrow as pa

    return {"bool": pa.bool_(), "int": pa.int64(), "float": pa.float64(), "str": pa.string(),
            "list": pa.list_(pa.string()), "floats": pa.list_(pa.float64())}


def _schema(kinds: dict[str, str]) -> Any:
    import pyarrow as pa

    types = _types()
    return pa.schema([(name, types[k]) for name, k in kinds.items()])


def _cells(values: list, kind: str) -> Any:
    """One column's cells as an Arrow array of ``kind``: most columns convert as they are; a cell of
    another kind (a number among texts) is turned to text."""
    import pyarrow as pa

    tp = _types()[kind]
    try:
        return pa.array(values, type=tp)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pa.array([_arrow_cell(v, kind) for v in values], type=tp)


def _arrow_kind(values: list) -> str:
    return _kind_of(_seen_types(values))


def _seen_types(values: list) -> set[type]:
    return {type(v.item() if hasattr(v, "item") and not isinstance(v, (str, bytes)) else v) for v in values if v is not None}


def _kind_of(seen: set[type]) -> str:
    for kind, types in (("bool", {bool}), ("int", {int}), ("float", {int, float}), ("list", {list, tuple})):
        if seen and seen <= types:
            return kind
    return "str"


def _arrow_cell(value: Any, kind: str) -> Any:
    if value is None:
        return None
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if kind == "float":
        return float(value)
    if kind == "floats":
        return [None if x is None else float(x) for x in value]
    if kind == "list":
        return [x if isinstance(x, str) else str(x) for x in value]
    if kind == "str" and not isinstance(value, str):
        return str(value)
    return value


def read_parquet_columns(path: Path, names: list[str] | None = None) -> dict[str, list]:
    """A table written by :func:`write_parquet` back as plain columns (those of ``names`` it has, if given)."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as table:  # not read_table, which imports pyarrow.dataset (~1 s)
        have = table.schema_arrow.names
        return table.read(columns=None if names is None else [n for n in names if n in have]).to_pydict()


def parquet_names(path: Path) -> list[str]:
    """The column names of a Parquet table."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as table:
        return list(table.schema_arrow.names)


def read_parquet_groups(path: Path, names: list[str]) -> Iterator[dict[str, list]]:
    """A Parquet table's columns ``names`` (those it has) as plain columns, a row group at a time."""
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as table:
        names = [n for n in names if n in table.schema_arrow.names]
        for group in range(table.num_row_groups):
            yield table.read_row_group(group, columns=names).to_pydict()


def read_parquet_rows(path: Path, rows: list[int]) -> dict[str, list]:
    """The rows at the positions ``rows`` (ascending) of a Parquet table as plain columns, reading only the
    row groups that hold them (and handing back to the system what decoding them took: ~60 MB, not ~125)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    with pq.ParquetFile(path) as table:
        out: dict[str, list] = {name: [] for name in table.schema_arrow.names}
        start = k = 0
        for group in range(table.num_row_groups):
            end = start + table.metadata.row_group(group).num_rows
            inside = []
            while k < len(rows) and rows[k] < end:
                inside.append(rows[k] - start)
                k += 1
            if inside:
                for name, values in table.read_row_group(group).take(inside).to_pydict().items():
                    out[name].extend(values)
            start = end
    pa.default_memory_pool().release_unused()
    return out


def table_writers(folder: Path, full: dict[str, list], write: Any, rows: int | None = 5000
                  ) -> Iterator[tuple[str, Any]]:
    """``(file name, write)`` for each per-sample table, in the order to write them: ``per_sample.json``,
    the table MLflow's artifact view shows (trimmed cells; the first ``rows`` rows, null: all), then
    ``per_sample.parquet``, every record whole. ``write(path, parts)`` writes text atomically."""
    n = len(next(iter(full.values()), []))
    shown = full if rows is None or n <= rows else {c: v[:rows] for c, v in full.items()}
    yield TABLE_FILE, lambda: write(Path(folder) / TABLE_FILE, split_json_parts(table_columns(shown)))
    yield FULL_TABLE_FILE, lambda: write_parquet(Path(folder) / FULL_TABLE_FILE, full)


class ParquetStream:
    """``per_sample.parquet`` written chunk by chunk (each :meth:`append` a row group), the same table,
    value for value, as :func:`write_parquet` of the whole columns: a column's type follows every value
    it got in the run and a column only some chunks have is blank in the others, in the order
    :func:`ragexp.results.columns.per_sample_columns` gives. While every chunk has the columns and value
    kinds of the first (the usual case) the rows go straight to the file; otherwise the parts are
    joined under the run's final types in :meth:`close` (one more pass over the file).
    ``metric_keys``: the run's metric keys in order (where their columns go)."""

    def __init__(self, path: Path, metric_keys: list[str], cluster_by: str | None = None) -> None:
        self.path = Path(path)
        self.rows = 0
        self._keys = {k: i for i, k in enumerate(metric_keys)}
        self._cluster = cluster_by
        self._human: dict[str, int] = {}
        self._seen: dict[str, set[type]] = {}
        self._parts: list[tuple[Path, Any, list[str], dict[str, str]]] = []  # (file, writer, names, kinds)
        remove_leftovers(self.path.parent, f".{self.path.name}.")  # parts of a run killed (kill -9) in this folder

    def _rank(self, name: str) -> tuple:
        from ragexp.results.columns import DETAIL_SUFFIX, RECORD_COLUMNS, STATUS_SUFFIX

        if name in RECORD_COLUMNS:
            return (0, RECORD_COLUMNS.index(name))
        if name == self._cluster:
            return (1, 0)
        if name == "label":
            return (2, 0)
        if name.startswith("human/"):
            return (3, self._human.setdefault(name, len(self._human)))
        if name in ("latency_s", "pipeline_error"):
            return (4, name != "latency_s")
        for i, suffix in enumerate(("", STATUS_SUFFIX, DETAIL_SUFFIX, SAMPLES_SUFFIX)):
            key = name[: len(name) - len(suffix)] if suffix and name.endswith(suffix) else name if not suffix else None
            if key in self._keys:
                return (5, self._keys[key], i)
        return (6, 0)

    def _kinds(self) -> dict[str, str]:
        names = sorted(self._seen, key=self._rank)
        return {n: "floats" if n.endswith(SAMPLES_SUFFIX) else _kind_of(self._seen[n]) for n in names}

    def append(self, columns: dict[str, list]) -> None:
        """One chunk of rows (plain columns, as :func:`ragexp.results.columns.per_sample_columns` gives)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        n = len(next(iter(columns.values()), []))
        if not n:
            return
        for name in columns:
            self._rank(name)  # human/ columns ranked in the order they first appear
        for name, values in columns.items():
            self._seen.setdefault(name, set()).update(_seen_types(values))
        kinds = self._kinds()
        if not self._parts or self._parts[-1][3] != kinds:
            part = self.path.with_name(f".{self.path.name}.{os.getpid()}.part{len(self._parts)}")
            self._parts.append((part, pq.ParquetWriter(part, _schema(kinds), compression="zstd"), list(kinds), kinds))
        _, writer, names, kinds = self._parts[-1]
        blank = [None] * n
        writer.write_batch(pa.record_batch([_cells(columns.get(name, blank), kinds[name]) for name in names],
                                           schema=writer.schema))
        self.rows += n

    def close(self) -> Path:
        """Finish the file at ``path`` (renamed into place: no reader sees half of it); return the path."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        for _, writer, _, _ in self._parts:
            writer.close()
        if not self._parts:
            write_parquet(self.path, {})
        elif len(self._parts) == 1:
            os.replace(self._parts[0][0], self.path)
        else:
            kinds = self._kinds()
            with replacing(self.path) as tmp, pq.ParquetWriter(tmp, _schema(kinds), compression="zstd") as out:
                for part, _, names, _ in self._parts:
                    with pq.ParquetFile(part) as f:
                        for i in range(f.num_row_groups):
                            group = f.read_row_group(i).to_pydict()
                            blank = [None] * len(next(iter(group.values())))
                            out.write_batch(pa.record_batch([_cells(group.get(name, blank), kind)
                                                             for name, kind in kinds.items()], schema=out.schema))
                    part.unlink()
        self._parts = []
        return self.path

    def abort(self) -> None:
        """Remove what was written (a run that failed leaves no part behind)."""
        for part, writer, _, _ in self._parts:
            with contextlib.suppress(Exception):
                writer.close()
            with contextlib.suppress(OSError):
                part.unlink()
        self._parts = []


class ColumnFiles(Mapping):
    """The columns a streamed run keeps (:class:`ragexp.core.tally.Tally`) on disk, a file per column
    in ``folder``: each chunk appended, a column read whole when asked for (a new numpy array each
    time), so that the run's memory does not grow with its records (docs/performance.md, "Scale").
    The same interface as :class:`ragexp.core.tally.Columns`; :meth:`remove` deletes the files."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._files: dict[Any, tuple[Path, str]] = {}  # name → (file, typecode)

    def extend(self, name: Any, values: Any, typecode: str = "d") -> None:
        import numpy as np

        if name not in self._files:
            self._files[name] = (self.folder / f"{len(self._files)}.{typecode}", typecode)
        path, typecode = self._files[name]
        with open(path, "ab") as fh:
            fh.write(np.asarray(values, dtype=typecode).tobytes())

    def __getitem__(self, name: Any) -> Any:
        import numpy as np

        path, typecode = self._files[name]
        return np.fromfile(path, dtype=typecode)

    def __contains__(self, name: Any) -> bool:
        return name in self._files

    def __iter__(self) -> Iterator[Any]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)
        self._files = {}


class StreamedTable:
    """A streamed run's per-sample table: ``per_sample.parquet`` appended chunk by chunk
    (:class:`ParquetStream`), its first ``rows`` rows kept for ``per_sample.json`` (null: all), and
    ``plot_columns`` (metric key → values, NaN where not ok) for the run's pictures."""

    def __init__(self, path: Path, metric_keys: list[str], rows: int | None = 5000) -> None:
        self.stream = ParquetStream(path, metric_keys)
        self.limit = rows
        self.first: dict[str, list] = {}
        self.kept = 0
        self.plot_columns: dict[str, Any] = {}
        self.path: Path | None = None  # the finished Parquet file

    @property
    def rows(self) -> int:
        return self.stream.rows

    def append(self, columns: dict[str, list]) -> None:
        n = len(next(iter(columns.values()), []))
        take = n if self.limit is None else max(0, min(n, self.limit - self.kept))
        if take:
            for name in columns.keys() | self.first.keys():
                self.first.setdefault(name, [None] * self.kept).extend(
                    columns[name][:take] if name in columns else [None] * take)
            self.kept += take
        self.stream.append(columns)

    def shown(self) -> dict[str, list]:
        """The first rows in the table's column order (``per_sample.json``)."""
        return {name: self.first.get(name, [None] * self.kept) for name in self.stream._kinds()}

    def finish(self, path: Path) -> Path:
        """The Parquet file finished and moved to ``path``."""
        done = self.stream.close()
        if Path(path) != done:
            shutil.move(done, path)
        self.path = Path(path)
        return self.path

    def abort(self) -> None:
        self.stream.abort()
