"""The canonical record every metric reads (docs/records.md#fields), and its validation.

Adapters turn each source format into plain dicts and hand them to :func:`to_record`, which
checks every field's type and says exactly where a bad value sits::

    >>> r = to_record({"query": "What is RAG?", "reference_answers": "retrieval"}, path="x.jsonl", row=1)
    >>> r.reference_answers
    ['retrieval']
    >>> to_record({"query": "q", "contexts": "not a list"}, path="x.jsonl", row=3)
    Traceback (most recent call last):
    ...
    ragexp.errors.DataError: x.jsonl, row 3, field 'contexts': expected a list of strings, got str 'not a list'
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from itertools import chain
from typing import Any

from ragexp.errors import ConfigError, DataError

#: The canonical fields, in the order docs/records.md#fields lists them.
FIELDS = (
    "id", "query", "contexts", "context_ids", "gt_contexts", "gt_context_ids", "answer",
    "reference_answers", "label", "latency_s", "timings", "human", "category", "context_sources",
)
_KNOWN = frozenset(FIELDS)
LIST_FIELDS = ("contexts", "context_ids", "gt_contexts", "gt_context_ids", "reference_answers")


@dataclass(slots=True)
class Record:
    """One evaluation sample. Every field but ``query`` may be absent (``None``)."""

    id: str
    query: str
    contexts: list[str] | None = None
    context_ids: list[str] | None = None
    gt_contexts: list[str] | None = None
    gt_context_ids: list[str] | None = None
    answer: str | None = None
    reference_answers: list[str] | None = None
    label: bool | None = None
    latency_s: float | None = None
    timings: dict[str, float] | None = None
    human: dict[str, float] | None = None
    category: str | None = None  # the question's kind, a label (LoCoMo: multi_hop, temporal, ...)
    context_sources: list[str] | None = None  # one label per context: which source/memory tier gave it
    extra: dict[str, Any] = field(default_factory=dict)

    def present(self, name: str) -> bool:
        """True when the field is there (not ``None``), even empty: an empty ``contexts`` or
        ``answer`` is an output of the system under test and is scored as a miss."""
        return getattr(self, name, None) is not None

    def has(self, name: str) -> bool:
        """True when the field holds something (not ``None``, and not an empty list, string or mapping)."""
        value = getattr(self, name, None)
        return value is not None and not (isinstance(value, (str, list, dict)) and len(value) == 0)


# _plain_record makes a Record with its fields in this order
assert tuple(f.name for f in fields(Record)) == (*FIELDS, "extra"), "Record's fields are FIELDS, then extra"


def _got(value: Any) -> str:
    """``value``'s type and its repr, cut to 60 characters, for an error line."""
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


def _number(value: Any, bools: bool = False) -> float | None:
    """``value`` as a finite float (a number written as text too, as CSV cells are; a bool only with
    ``bools``), or None when it is not one: NaN, ±Infinity, 1e400 and text that is no number."""
    if (isinstance(value, bool) and not bools) or not isinstance(value, (str, int, float)):
        return None
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (ValueError, OverflowError):  # not a number; an int too large for a float
        return None
    return number if math.isfinite(number) else None


def _seconds(value: Any) -> float | None:
    """A finite, non-negative number of seconds, or None when ``value`` is not one."""
    seconds = _number(value)
    return seconds if seconds is not None and seconds >= 0 else None


#: People's labels (``human: {key: value}``) that no metric has: the scale each is on (binary 0/1, ordinal
#: whole numbers, continuous) and its range. A judge metric's is its own (``MetricInfo.label_scale``, passed
#: in as ``scales`` by the loaders); a key with none takes any finite number.
HUMAN_SCALES = {"correctness": ("ordinal", 0, 4)}  # ExpertQA's experts: is the claim true? (no metric yet)


def to_record(raw: dict[str, Any], *, path: str, row: int, default_id: str | None = None,
              scales: dict[str, tuple] = HUMAN_SCALES) -> Record:
    """Validate one raw dict and build a :class:`Record`.

    ``row`` is 1-based and appears in every error. Unknown keys go to ``extra``. A single
    string in ``reference_answers`` becomes a one-item list (docs/records.md#fields).
    """
    if type(raw) is dict and (record := _plain_record(raw, default_id)) is not None:
        return record
    return _checked_record(raw, path=path, row=row, default_id=default_id, scales=scales)


def _checked_record(raw: Any, *, path: str, row: int, default_id: str | None, scales: dict[str, tuple]) -> Record:
    """:func:`to_record` field by field: each value read or refused, in FIELDS' order, the first bad one raised."""
    if not isinstance(raw, dict):
        raise DataError(f"expected an object with the record's fields, got {_got(raw)}", path=path, row=row)
    out: dict[str, Any] = {}
    query = raw.get("query")
    if _is_missing(query) or not isinstance(query, str) or not query.strip():
        raise DataError(f"expected a non-empty string (the user question), got {_got(query)}",
                        path=path, row=row, field="query")
    out["query"] = query
    rid = raw.get("id", default_id)
    if _is_missing(rid):
        rid = default_id if default_id is not None else str(row)
    if not isinstance(rid, (str, int)) or isinstance(rid, bool):
        raise DataError(f"expected a string or integer id, got {_got(rid)}", path=path, row=row, field="id")
    out["id"] = str(rid)
    for name in LIST_FIELDS:
        value = raw.get(name)
        if not _is_missing(value):
            out[name] = _string_list(value, name, path=path, row=row)
    answer = raw.get("answer")
    if not _is_missing(answer):
        if not isinstance(answer, str):
            raise DataError(f"expected a string, got {_got(answer)}", path=path, row=row, field="answer")
        out["answer"] = answer
    label = raw.get("label")
    if not _is_missing(label):
        out["label"] = _boolean(label, path=path, row=row)
    latency = raw.get("latency_s")
    if not _is_missing(latency):
        seconds = _seconds(latency)
        if seconds is None:
            raise DataError(f"expected a finite, non-negative number of seconds, got {_got(latency)}",
                            path=path, row=row, field="latency_s")
        out["latency_s"] = seconds
    timings = raw.get("timings")
    if not _is_missing(timings):
        out["timings"] = _stage_seconds(timings, path=path, row=row)
    human = raw.get("human")
    if not _is_missing(human):
        out["human"] = human_labels(human, path=path, row=row, scales=scales)
    _labels(raw, out, path=path, row=row)
    extra = {k: v for k, v in raw.items() if k not in _KNOWN}
    return Record(**out, extra=extra)


_is_text = str.__instancecheck__
#: the fields :func:`_plain_record` leaves to :func:`to_record`'s checks whenever a row has them
_OTHER_FIELDS = ("timings", "human", "category", "context_sources")
_NONE = frozenset({type(None)})
_LIST_KINDS = frozenset({list, type(None)})


def _plain_record(raw: dict[str, Any], default_id: str | None) -> Record | None:
    """The Record :func:`to_record` makes of a row whose fields are all of their plainest kind (a non-blank
    text ``query``, a text ``id``, lists of texts, a text ``answer``, a boolean ``label``, a finite float
    ``latency_s`` of 0 or more; no ``timings``, ``human``, ``category`` or ``context_sources``), told with few
    steps; None for any other row, which :func:`_checked_record` reads or refuses field by field.

    >>> _plain_record({"id": "q1", "query": "Why?", "contexts": ["a"], "lang": "en"}, None) == to_record(
    ...     {"id": "q1", "query": "Why?", "contexts": ["a"], "lang": "en"}, path="x.jsonl", row=1)
    True
    >>> _plain_record({"id": 7, "query": "Why?"}, None), _plain_record({"query": "Why?", "latency_s": 1}, "r")
    (None, None)
    """
    get = raw.get
    query, rid, answer, label, latency = get("query"), get("id", default_id), get("answer"), get("label"), \
        get("latency_s")
    if (type(query) is not str or type(rid) is not str or not query.strip()
            or (answer is not None and type(answer) is not str) or (label is not None and type(label) is not bool)
            or (latency is not None and not (type(latency) is float and 0.0 <= latency < math.inf))):
        return None
    if set(map(type, map(get, _OTHER_FIELDS))) != _NONE:
        return None
    lists = list(map(get, LIST_FIELDS))
    if not set(map(type, lists)) <= _LIST_KINDS or not all(map(_is_text, chain.from_iterable(filter(None, lists)))):
        return None
    contexts, context_ids, gt_contexts, gt_context_ids, references = lists
    # positional, in FIELDS' order (checked below Record's definition)
    return Record(rid, query, contexts, context_ids, gt_contexts, gt_context_ids, answer, references, label, latency,
                  None, None, None, None, {k: v for k, v in raw.items() if k not in _KNOWN})


def _string_list(value: Any, name: str, *, path: str, row: int) -> list[str]:
    """A list field's value as a list of strings: a lone string in ``reference_answers`` is a one-item list,
    a numpy array or tuple a list, an integer id in a ``*_ids`` field its text."""
    if name == "reference_answers" and isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, str, bytes)) and hasattr(value, "tolist"):
        value = value.tolist()  # numpy arrays from parquet
    if isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, list):
        raise DataError(f"expected a list of strings, got {_got(value)}", path=path, row=row, field=name)
    for i, item in enumerate(value):
        if type(item) is str:
            continue
        if name.endswith("_ids") and isinstance(item, int) and not isinstance(item, bool):
            value[i] = item = str(item)
        if not isinstance(item, str):
            raise DataError(f"expected a list of strings, but item {i} is {_got(item)}",
                            path=path, row=row, field=name)
    return value


def _boolean(label: Any, *, path: str, row: int) -> bool:
    """``label`` as a boolean: true/false, 1/0, yes/no, correct/incorrect (any case)."""
    if isinstance(label, str) and label.strip().lower() in ("true", "1", "yes", "correct"):
        label = True
    elif isinstance(label, str) and label.strip().lower() in ("false", "0", "no", "incorrect"):
        label = False
    elif isinstance(label, (int, float)) and not isinstance(label, bool) and label in (0, 1):
        label = bool(label)
    if not isinstance(label, bool):
        raise DataError(f"expected a boolean (true/false, 1/0), got {_got(label)}", path=path, row=row, field="label")
    return label


def _stage_seconds(timings: Any, *, path: str, row: int) -> dict[str, float]:
    """``timings`` checked: stage name → a finite, non-negative number of seconds."""
    expected = "expected a mapping of stage name to a finite, non-negative number of seconds"
    if not isinstance(timings, dict) or not all(isinstance(k, str) for k in timings):
        raise DataError(f"{expected}, got {_got(timings)}", path=path, row=row, field="timings")
    clean: dict[str, float] = {}
    for stage, value in timings.items():
        seconds = _seconds(value)
        if seconds is None:
            raise DataError(f"{expected}, but {stage!r} is {_got(value)}", path=path, row=row, field="timings")
        clean[stage] = seconds
    return clean


def _labels(raw: dict[str, Any], out: dict[str, Any], *, path: str, row: int) -> None:
    """``category`` (a non-empty string; an integer is read as text) and ``context_sources`` (a list of
    strings, one per context when ``contexts`` is there) into ``out``."""
    category = raw.get("category")
    if not _is_missing(category):
        if isinstance(category, int) and not isinstance(category, bool):
            category = str(category)
        if not isinstance(category, str) or not category.strip():
            raise DataError(f"expected a non-empty string (the question's category), got {_got(category)}",
                            path=path, row=row, field="category")
        out["category"] = category
    sources = raw.get("context_sources")
    if _is_missing(sources):
        return
    if not isinstance(sources, (list, str, bytes)) and hasattr(sources, "tolist"):
        sources = sources.tolist()  # numpy arrays from parquet
    if isinstance(sources, tuple):
        sources = list(sources)
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise DataError(f"expected a list of strings (one source label per context), got {_got(sources)}",
                        path=path, row=row, field="context_sources")
    contexts = out.get("contexts", out.get("context_ids"))
    if contexts is not None and len(contexts) != len(sources):
        raise DataError(f"expected one source label per context ({len(contexts)}), got {len(sources)} labels",
                        path=path, row=row, field="context_sources")
    out["context_sources"] = sources


def human_labels(value: Any, *, path: str, row: int,
                 scales: dict[str, tuple] = HUMAN_SCALES) -> dict[str, float] | None:
    """The checked ``human`` mapping: metric key → a number in the metric's range (a bool is 0/1; a
    number written as text, as a CSV cell is, is read). A missing value (None, NaN, empty text) is no
    label for that key, except a NaN in a JSON file (JSON has no NaN: null is "no label"), refused; a
    mapping with none left is None.

    >>> human_labels({"answer_similarity": "4", "answer_consistency_binary": True}, path="x.csv", row=2)
    {'answer_similarity': 4.0, 'answer_consistency_binary': 1.0}
    >>> human_labels({"correctness": 7}, path="x.csv", row=2)
    Traceback (most recent call last):
    ...
    ragexp.errors.DataError: x.csv, row 2, field 'human.correctness': expected a whole number from 0 to 4 (the metric's range), got int 7
    """
    if not isinstance(value, dict) or not all(isinstance(k, str) and k for k in value):
        raise DataError(f"expected a mapping of metric key to a number, got {_got(value)}", path=path, row=row,
                        field="human")
    out: dict[str, float] = {}
    for key, v in value.items():
        kind, lo, hi = scales.get(key, ("any", -math.inf, math.inf))
        if isinstance(v, float) and math.isnan(v) and path.lower().endswith((".json", ".jsonl")):
            raise DataError("expected a number, or null for no label, got NaN (JSON has no NaN; a NaN label would "
                            "be silently dropped)", path=path, row=row, field=f"human.{key}")
        if _is_missing(v) or (isinstance(v, str) and not v.strip()):
            continue
        number = _number(v, bools=True)
        ok = number is not None and lo <= number <= hi
        if ok and kind in ("binary", "ordinal"):
            ok = number.is_integer()
        if not ok:
            what = {"binary": "0 or 1 (or true/false)", "ordinal": f"a whole number from {lo} to {hi}",
                    "continuous": f"a number from {lo} to {hi}", "any": "a finite number"}[kind]
            scope = " (the metric's range)" if kind != "any" else ""
            raise DataError(f"expected {what}{scope}, got {_got(v)}", path=path, row=row, field=f"human.{key}")
        out[key] = number
    return out or None


def present_fields(records: list[Record]) -> list[str]:
    """Canonical fields that at least one record has (an empty list or answer counts: it is there)."""
    return [f for f in FIELDS if any(r.present(f) for r in records)]


def cluster_labels(records: list[Record], cluster_by: str | None, *, dataset: str, source: str) -> list[Any] | None:
    """Each record's cluster (``stats.cluster_by``: a record field or an extra input column)."""
    if not cluster_by:
        return None
    labels = [getattr(r, cluster_by) if hasattr(r, cluster_by) and cluster_by != "extra" else r.extra.get(cluster_by)
              for r in records]
    if all(v is None for v in labels):
        extra = sorted({k for r in records for k in r.extra})
        raise ConfigError(f"stats.cluster_by='{cluster_by}': no record of dataset '{dataset}' has that field "
                          f"(its records have: {', '.join(present_fields(records) + extra)})")
    for row, (r, v) in enumerate(zip(records, labels), start=1):
        if v is None:
            raise DataError(f"expected a cluster label (stats.cluster_by='{cluster_by}') in record '{r.id}', got none",
                            path=source, row=row, field=cluster_by)
    return [v if isinstance(v, (str, int, float, bool)) else repr(v) for v in labels]


__all__ = ["Record", "FIELDS", "HUMAN_SCALES", "human_labels", "to_record", "present_fields"]
