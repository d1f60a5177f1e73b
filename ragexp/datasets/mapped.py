"""``dataset=mapped``: any JSONL, JSON list, CSV, TSV or Parquet file through ``columns`` (field → column),
and :func:`load_in_memory`, the same mapping and checks for ``ragexp.evaluate``'s rows.
Definitions: docs/datasets.md ("Your own data", "How each adapter reads its source"); how CSV cells
are read: docs/records.md and :func:`ragexp.datasets.base.read_delimited`.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Iterable

from ragexp.errors import DataError, did_you_mean
from ragexp.common.records import FIELDS
from ragexp.common.collector import collector_paused
from ragexp.datasets.base import TOO_DEEP, Dataset, JsonLines, build, existing, plain, read_table
from ragexp.datasets.split import split_of

_is_text = str.__instancecheck__
JSON_FIELDS = ("contexts", "context_ids", "gt_contexts", "gt_context_ids", "reference_answers", "timings", "human",
               "context_sources")


#: the column names other tools and exports use for ragexp's fields (Ragas, DeepEval, LangSmith, plain CSVs): a file
#: without the field's own column reads the one alias it has, and the run says so (docs/datasets.md, "Your own data")
ALIASES = {
    "query": ("question", "prompt", "input", "user_input"),
    "answer": ("response", "output", "actual_output", "prediction", "generated_answer"),
    "contexts": ("retrieved_contexts", "retrieval_context", "context", "passages"),
    "context_ids": ("retrieved_context_ids", "doc_ids"),
    "gt_contexts": ("reference_contexts", "ground_truth_contexts"),
    "reference_answers": ("ground_truth", "reference", "ground_truths", "expected_output", "expected_answer",
                          "reference_answer", "answers"),
}


def aliased(names: Iterable[str], mapping: dict[str, str]) -> dict[str, str]:
    """Fields the file names by a common alias (each field with no column of its own name, not mapped by
    ``dataset.columns``, and exactly one of its aliases among ``names``): field → that column.

    >>> aliased(["question", "response", "contexts", "ground_truth"], {})
    {'query': 'question', 'answer': 'response', 'reference_answers': 'ground_truth'}
    >>> aliased(["question", "query"], {}), aliased(["input", "prompt"], {}), aliased(["q"], {"query": "q"})
    ({}, {}, {})
    """
    present, taken = set(names), set(mapping.values())
    found = {}
    for f, options in ALIASES.items():
        hits = [c for c in options if c in present and c not in taken]
        if f not in present and f not in mapping and len(hits) == 1:
            found[f] = hits[0]
    return found


def python_literal(text: str) -> list | dict | None:
    """A list or dict written as Python writes it (``str(['a', 'b'])``, what ``pandas.DataFrame.to_csv`` puts in a
    cell of lists: Ragas' exports), read safely (:func:`ast.literal_eval`: literals only); None for anything else.

    >>> python_literal(str(["Tea is a drink.", "It's brewed."])), python_literal("[1, 2"), python_literal("print(1)")
    (['Tea is a drink.', "It's brewed."], None, None)
    """
    import ast

    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    return value if isinstance(value, (list, dict)) else None


#: the sources :func:`load_in_memory` names, where the mapping is the Python API's ``columns=`` argument
IN_MEMORY = ("DataFrame", "list of records")


def with_aliases(source: str, names: Iterable[str], mapping: dict[str, str]) -> dict[str, str]:
    """``mapping`` with the fields the columns ``names`` give by a common name (:func:`aliased`), said in one line."""
    found = aliased(names, mapping)
    setting = "columns=" if source in IN_MEMORY else "dataset.columns="  # the Python API's argument, or the config key
    if found:
        print(f"[ragexp] {source}: read column{'s' if len(found) > 1 else ''} "
              f"{', '.join(f'{c!r} as {f}' for f, c in found.items())} (their common names; {setting[:-1]} maps "
              "any other)", file=sys.stderr)
    line = unread_line(source, names, {**mapping, **found}, setting=setting)
    if line:
        print(line, file=sys.stderr)
    return {**mapping, **found}


def unread_line(source: str, names: Iterable[str], mapping: dict[str, str], shown: int = 5,
                setting: str = "dataset.columns=") -> str | None:
    """The line saying which columns are read as no field (kept as each record's extra data, scored by no metric),
    so that a file whose references sit in a column named otherwise (``truth``) says so before a metric asks for
    ``reference_answers``; None when every column is a field or mapped to one. ``setting``: how the user maps a
    column (``columns=`` in the Python API).

    >>> unread_line("my_run.csv", ["question", "response", "truth"], {"query": "question", "answer": "response"})
    "[ragexp] my_run.csv: column 'truth' is no record field (docs/records.md): kept as each record's extra data, \
scored by no metric; dataset.columns={<field>: <column>} reads a column as a field"
    >>> unread_line("DataFrame", ["query", "lang"], {}, setting="columns=").endswith("columns={<field>: <column>} reads a column as a field")
    True
    >>> unread_line("f.csv", ["query", "answer"], {}) is None
    True
    """
    taken = set(mapping.values())
    unread = [c for c in names if c not in FIELDS and c not in taken]
    if not unread:
        return None
    listed = ", ".join(repr(c) for c in unread[:shown]) + (f" and {len(unread) - shown} more" if len(unread) > shown
                                                           else "")
    return (f"[ragexp] {source}: column{'s' if len(unread) > 1 else ''} {listed} "
            f"{'are' if len(unread) > 1 else 'is'} no record field (docs/records.md): kept as each record's extra data, "
            f"scored by no metric; {setting}{{<field>: <column>}} reads a column as a field")


def _field_hint(key: str, value: Any) -> str:
    """What follows an unknown field of ``dataset.columns``: the mapping written the other way round
    (``{question: query}``), or the closest field (``contxts``).

    >>> _field_hint("question", "query"), _field_hint("contxts", "retrieved"), _field_hint("zzz", "q")
    ('; written the other way round? a field maps to your column: {query: question}', "; did you mean 'contexts'?", '')
    """
    if value in FIELDS:
        return f"; written the other way round? a field maps to your column: {{{value}: {key}}}"
    return did_you_mean(str(key), FIELDS)


def load_mapped(path: str, *, columns: dict[str, str] | None = None, json_fields: str | list[str] = "auto",
                format: str | None = None, name: str = "mapped", limit: int | None = None,
                label: bool | None = None, **split) -> Dataset:
    p = existing(path)
    source = str(p)
    mapping, decode, strict = _mapping(columns, json_fields, source)
    with collector_paused():  # the file's rows are parsed before they are mapped
        names, items = read_table(p, format)
        return map_rows(source, names, items, mapping, decode, strict, name=name, limit=limit, label=label,
                        split=split_of(split))


def load_in_memory(data: Any, *, columns: dict[str, str] | None = None, json_fields: str | list[str] = "auto",
                   name: str = "dataframe", limit: int | None = None, label: bool | None = None, **split) -> Dataset:
    """The same mapping and checks as :func:`load_mapped`, over rows already in memory: a pandas
    DataFrame (rows counted from 1, as in a CSV file; NaN and ``pd.NA`` cells are absent) or a list
    of dicts. Errors name the source as ``DataFrame`` or ``list of records`` where a file's path would be."""
    if hasattr(data, "to_dict") and hasattr(data, "columns"):
        source = "DataFrame"
        names = [str(c) for c in data.columns]
        with collector_paused():
            cells = [[v if type(v) is str else _cell(v) for v in data[c].tolist()] for c in data.columns]  # noqa: E721
        items = ((i, dict(zip(names, row))) for i, row in enumerate(zip(*cells), start=1))
    elif isinstance(data, (list, tuple)):
        source = "list of records"
        names = []
        items = iter(enumerate(data, start=1))
    else:
        raise DataError(f"expected a pandas DataFrame or a list of dicts, got {type(data).__name__}")
    mapping, decode, strict = _mapping(columns, json_fields, source)
    if not names and data and isinstance(data[0], dict):  # rows may differ: the first one's keys tell the aliases
        mapping = with_aliases(source, list(data[0]), mapping)
    return map_rows(source, names, items, mapping, decode, strict, name=name, limit=limit, label=label,
                    split=split_of(split))


def _cell(value: Any) -> Any:
    """A DataFrame cell as a plain Python value; pandas' missing markers (NaN, NA, NaT) → None."""
    value = plain(value)
    if value is None or isinstance(value, (str, bool, int, list, dict)):
        return value
    try:
        import pandas as pd

        return None if pd.isna(value) else value
    except (TypeError, ValueError):  # not a scalar pandas can judge
        return value


def _mapping(columns: dict[str, str] | None, json_fields: str | list[str], source: str
             ) -> tuple[dict[str, str], set[str], bool]:
    """The checked column mapping and which fields' JSON text to decode (strictly or not)."""
    if columns is not None and not (isinstance(columns, dict) and all(isinstance(c, str) for c in columns.values())):
        raise DataError(f"dataset.columns must map fields to column names ({{query: question, answer: output}}), "
                        f"got {type(columns).__name__} {columns!r}", path=source)
    mapping = dict(columns or {})
    unknown = [k for k in mapping if k not in FIELDS and not (k.startswith("human.") and len(k) > 6)]
    if unknown:
        raise DataError(f"dataset.columns names an unknown field {unknown[0]!r}: expected canonical fields "
                        f"({', '.join(FIELDS)}, or human.<metric key>) mapped to the file's column names"
                        f"{_field_hint(unknown[0], mapping[unknown[0]])}", path=source)
    if json_fields == "auto":
        return mapping, set(JSON_FIELDS), False
    if isinstance(json_fields, (list, tuple)):
        bad = [f for f in json_fields if f not in FIELDS]
        if bad:
            raise DataError(f"dataset.json_fields names an unknown field {bad[0]!r}: expected canonical fields",
                            path=source)
        return mapping, set(json_fields), True
    raise DataError(f"dataset.json_fields must be 'auto' or a list of field names, got {json_fields!r}", path=source)


def map_rows(source: str, names: list[str], items: Iterable[tuple[int, Any]], mapping: dict[str, str],
             decode: set[str], strict: bool, *, name: str, limit: int | None, label: bool | None,
             split: tuple) -> Dataset:
    """Rename the mapped columns to their fields, decode JSON text, and validate every row into records."""
    mapping = with_aliases(source, names, mapping)
    if names and "query" not in names and "query" not in mapping:
        raise DataError(f"no column gives the question: the columns are {', '.join(names)}; name "
                        "it with dataset.columns={query: <column>} (ragexp.evaluate: columns={'query': ...})",
                        path=source, field="query")
    if names:  # JSONL/JSON rows may differ; tabular files must have every mapped column
        absent = [(f, c) for f, c in mapping.items() if c not in names]
        if absent:
            f, c = absent[0]
            raise DataError(f"column {c!r} (mapped to field {f!r}) not found: the file's columns are "
                            f"{', '.join(names)}", path=source, field=f)
    source_of = {c: f for f, c in mapping.items()}
    read_clean = items.surrogate_free if isinstance(items, JsonLines) else None
    decoded = [0]  # the latest row a field of which was decoded here: its new texts may hold a lone surrogate

    def surrogate_free(row: int) -> bool:
        return row != decoded[0] and read_clean(row)

    def rows():
        for row, item in items:
            if not isinstance(item, dict):
                raise DataError(f"expected an object with named columns, got {type(item).__name__}",
                                path=source, row=row)
            raw: dict[str, Any] = {} if mapping else item  # no column renamed: the row as read (copied if decoded)
            for f, c in mapping.items():
                if c not in item:
                    raise DataError(f"column {c!r} (mapped to field {f!r}) is missing from this row",
                                    path=source, row=row, field=f)
                if f.startswith("human."):
                    labels = raw["human"] = dict(raw.get("human") or {})
                    labels[f[6:]] = item[c]
                else:
                    raw[f] = item[c]
            if mapping:
                for c, v in item.items():
                    if c not in source_of and c not in raw:
                        raw[c] = v
            if not any(map(_is_text, map(raw.get, decode))):  # no field written as JSON text: the common case
                yield row, raw
                continue
            for f in decode:
                v = raw.get(f)
                if isinstance(v, str) and (strict or v.lstrip()[:1] in ("[", "{")):
                    decoded[0] = row
                    if raw is item:  # the caller's row (a list of dicts) is left as it was
                        raw = dict(item)
                    try:
                        raw[f] = json.loads(v)
                    except json.JSONDecodeError as exc:
                        if (literal := python_literal(v)) is not None:  # pandas' to_csv of a list: ['a', 'b']
                            raw[f] = literal
                            continue
                        raise DataError(f"expected JSON text ({'a list' if f not in ('timings', 'human') else 'an object'}), "
                                        f"got {v[:40]!r}: {exc.msg}", path=source, row=row, field=f) from None
                    except RecursionError:
                        raise DataError(TOO_DEEP, path=source, row=row, field=f) from None
            yield row, raw

    try:
        return build(name, source, rows(), limit=limit, label=label, split=split,
                     surrogate_free=surrogate_free if read_clean is not None else None)
    except DataError as exc:
        column = mapping.get(exc.field or "")
        if column is not None and column != exc.field:  # name the user's column too: they look for it in the file
            exc.args = (str(exc).replace(f"field '{exc.field}': ", f"field '{exc.field}' (column '{column}'): ", 1),)
        raise
