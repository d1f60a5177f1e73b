"""One MLflow trace read into a record's fields: the one mapping behind ``dataset=mlflow_traces`` and
``pipeline=traced`` (docs/traced-apps.md, "Where each field comes from").

* ``query``: the root span's inputs — a text, or the value under ``query``, ``question``, ``input``,
  ``query_str`` … (a chat ``messages`` list: its last user message); OpenInference's ``input.value``
  attribute when the span has no inputs. ``answer``: the root span's outputs the same way (``answer``,
  ``response``, ``output``, ``content``, a chat completion's first choice …; ``output.value``).
* ``contexts`` / ``context_ids`` / the scores: the documents of the outermost ``RETRIEVER`` spans
  (a retriever span inside another is the same retrieval, read once), in the order they started —
  MLflow's document form (``page_content``, ``id`` else ``metadata.doc_uri``, ``metadata.score``) or
  OpenInference's ``retrieval.documents.<i>.document.{content,id,score}`` attributes.
* ``timings``: seconds per stage, each the outermost spans of its kind (``RETRIEVER`` → ``retrieve``,
  ``EMBEDDING`` → ``embed``, ``RERANKER`` → ``rerank``, ``LLM``/``CHAT_MODEL`` → ``generate``) and the
  root span's duration as ``total`` (= ``latency_s``).
* expectations: ``expected_response`` → ``reference_answers``; ``expected_retrieved_context``
  (``content`` / ``doc_uri``) → ``gt_contexts`` / ``gt_context_ids``; ``gt_context_ids``; feedback from a
  ``HUMAN`` source → ``human`` (``human/<key>`` or ``<key>``; ``label`` → the record's label).

What cannot be read is never a crash: the field stays absent and the record's ``trace_status`` says
why, as one of :data:`PROBLEMS` (the metrics that need the field then give ``missing_field``).

    >>> text_of({"messages": [{"role": "user", "content": "hi"}]}, QUERY_KEYS), text_of({"response": "ok"}, ANSWER_KEYS)
    ('hi', 'ok')
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from ragexp.common.records import HUMAN_SCALES, Record, to_record
from ragexp.errors import ConfigError, DataError

#: Why a trace's record lacks a field (the ``trace_status`` column; "ok" when nothing is missing).
PROBLEMS = {
    "no_spans": "the trace holds no spans (query, answer and contexts unknown)",
    "trace_not_stored": "MLflow did not store the app's trace (its export failed; MLflow's warning says why)",
    "no_root_input": "the root span's inputs hold no question text (the query is a placeholder)",
    "no_output": "the root span has no outputs (no answer)",
    "non_text_output": "the root span's outputs hold no text answer (no answer)",
    "no_retriever_span": "no RETRIEVER span (no contexts: retrieval metrics give missing_field)",
    "unreadable_documents": "a RETRIEVER span's outputs are not documents (no contexts)",
    "non_text_document": "a retrieved document's content is not text (no contexts)",
    "documents_without_ids": "retrieved documents without ids (no context_ids: id-based metrics give missing_field)",
    "trace_error": "the app raised an error in this trace (its status is ERROR)",
    "span_loop": "the spans' parents form a loop or a chain deeper than MAX_DEPTH (read as if it ended there)",
    "no_root_span": "every span has a parent (a loop, or parents outside the trace): query, answer and contexts unknown",
    "unreadable_trace": "the trace could not be read (MLflow did not return its spans, or they are malformed): only its id",
    "unread_expectation": "an expectation whose value is not of the field's type was left out",
    "unread_human_feedback": "a HUMAN feedback value that is no number in the metric's range was left out",
}
#: Where a question sits in a root span's inputs, tried in this order.
QUERY_KEYS = ("query", "question", "input", "query_str", "str_or_query_bundle", "user_input", "prompt", "text",
              "messages")
#: Where an answer sits in a root span's outputs, tried in this order.
ANSWER_KEYS = ("answer", "response", "output", "result", "output_text", "text", "content", "message", "choices",
               "messages", "generations")
#: Span types (MLflow's, and OpenInference's span kinds translated to them) → the timing stage.
STAGES = {"RETRIEVER": "retrieve", "EMBEDDING": "embed", "RERANKER": "rerank", "LLM": "generate",
          "CHAT_MODEL": "generate"}
#: Trace tag holding the record id of a trace ragexp wrote (docs/traces.md).
RECORD_TAG = "ragexp.record_id"
#: The most ancestors followed from one span (a deeper chain is read as if it ended there, like a loop).
MAX_DEPTH = 10_000
_OI_KIND = "openinference.span.kind"
_OI_DOCS = "retrieval.documents"


@dataclass(frozen=True)
class SpanReading:
    """How to read traces: ``query_key`` / ``answer_key``: a dotted path in the root span's inputs /
    outputs when the defaults do not find the text; ``context_id``: ``id`` (the document's id, else
    ``metadata.doc_uri``) or ``metadata.<key>`` (e.g. ``metadata.source``)."""

    query_key: str | None = None
    answer_key: str | None = None
    context_id: str = "id"

    def __post_init__(self) -> None:
        if self.context_id != "id" and not (isinstance(self.context_id, str) and self.context_id.startswith("metadata.")
                                            and len(self.context_id) > 9):
            raise ConfigError(f"context_id: expected 'id' or 'metadata.<key>', got {self.context_id!r}")


@dataclass
class Mapped:
    """A trace's record fields (``raw``, checked by :func:`to_record` in :func:`record_of`) and what was missing."""

    raw: dict[str, Any]
    problems: list[str] = field(default_factory=list)
    #: why the trace is unreadable (with the problem ``unreadable_trace``), said in ``status``
    detail: str | None = None

    @property
    def status(self) -> str:
        said = "; ".join(self.problems) if self.problems else "ok"
        return f"{said} ({self.detail})" if self.detail else said


def text_of(value: Any, keys: tuple[str, ...], depth: int = 0) -> str | None:
    """The text a span's inputs or outputs hold: itself if a string, else under the first of ``keys``
    (recursively), a one-key mapping's value, a chat list's last user (query) or last (answer) message."""
    if isinstance(value, str):
        return value
    if depth > 6 or value is None:
        return None
    if isinstance(value, Mapping):
        for key in keys:
            if key in value and (found := text_of(value[key], keys, depth + 1)) is not None:
                return found
        if len(value) == 1:
            return text_of(next(iter(value.values())), keys, depth + 1)
        return None
    if isinstance(value, (list, tuple)) and value:
        messages = [m for m in value if isinstance(m, Mapping) and "content" in m]
        if messages and len(messages) == len(value):
            if keys is QUERY_KEYS:
                users = [m for m in messages if str(m.get("role", m.get("type", ""))) in ("user", "human")]
                messages = users or messages
            return text_of(messages[-1]["content"], keys, depth + 1)
        return text_of(value[0], keys, depth + 1) if len(value) == 1 or keys is ANSWER_KEYS else None
    return None


def _at(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return value


def _maybe_json(value: Any) -> Any:
    """OpenInference's ``input.value`` / ``output.value`` are texts, often JSON: parsed when they are."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except (ValueError, RecursionError):  # not JSON, or nested deeper than Python's parser goes: kept as text
            return value
    return value


def _children(spans: list[Any]) -> dict[str | None, Any]:
    return {s.span_id: s for s in spans}


def _kind(span: Any) -> str:
    kind = span.span_type or ""
    if kind in ("", "UNKNOWN"):
        kind = str((span.attributes or {}).get(_OI_KIND) or kind)
    return kind


def _ancestors(span: Any, by_id: dict, problems: list[str]) -> Iterable[Any]:
    """The span's parent, its parent's parent … up to the root; a loop (A→B→A) or a chain over
    :data:`MAX_DEPTH` ends the walk and adds ``span_loop`` to ``problems`` once."""
    seen = {id(span)}
    parent = by_id.get(span.parent_id)
    while parent is not None:
        if id(parent) in seen or len(seen) > MAX_DEPTH:
            if "span_loop" not in problems:
                problems.append("span_loop")
            return
        seen.add(id(parent))
        yield parent
        parent = by_id.get(parent.parent_id)


def _outermost(spans: list[Any], by_id: dict, wanted: Any, problems: list[str]) -> list[Any]:
    """Spans for which ``wanted(span)`` holds and no ancestor's does, by start time."""
    out = [s for s in spans if wanted(s) and not any(wanted(a) for a in _ancestors(s, by_id, problems))]
    return sorted(out, key=lambda s: s.start_time_ns or 0)


def _seconds(span: Any) -> float | None:
    if span.start_time_ns is None or span.end_time_ns is None:
        return None
    return max(0.0, (span.end_time_ns - span.start_time_ns) / 1e9)


def _openinference_documents(attributes: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """``retrieval.documents`` as a list of ``{document.content, document.id, document.score}`` mappings,
    or flattened as ``retrieval.documents.<i>.document.<field>`` attributes (OTLP's form)."""
    listed = attributes.get(_OI_DOCS)
    if isinstance(listed, list):
        return [{k.removeprefix("document."): v for k, v in d.items()} if isinstance(d, Mapping) else {"content": d}
                for d in listed]
    prefix = _OI_DOCS + "."
    found: dict[int, dict[str, Any]] = {}
    for key, value in attributes.items():
        if key.startswith(prefix):
            index, _, rest = key[len(prefix):].partition(".")
            if index.isdigit():
                found.setdefault(int(index), {})[rest.removeprefix("document.")] = value
    return [found[i] for i in sorted(found)] if found else None


def _documents(span: Any, reading: SpanReading) -> tuple[list[Any], list[Any], list[Any]] | str:
    """(contents, ids, scores) of one retriever span, or the problem that stops reading them."""
    attributes = span.attributes or {}
    docs = _openinference_documents(attributes)
    if docs is not None:
        meta = [_maybe_json(d.get("metadata")) for d in docs]
        contents = [d.get("content") for d in docs]
        ids = [d.get("id") if reading.context_id == "id" else _at(m, reading.context_id[9:])
               for d, m in zip(docs, meta)]
        return contents, ids, [d.get("score") for d in docs]
    outputs = span.outputs
    if isinstance(outputs, Mapping) and isinstance(outputs.get("documents"), list):
        outputs = outputs["documents"]
    if outputs is None:
        return [], [], []  # the retriever returned nothing
    if not isinstance(outputs, list):
        return "unreadable_documents"
    contents, ids, scores = [], [], []
    for doc in outputs:
        if isinstance(doc, str):
            contents.append(doc), ids.append(None), scores.append(None)
            continue
        if not isinstance(doc, Mapping) or not ("page_content" in doc or "content" in doc or "text" in doc):
            return "unreadable_documents"
        meta = doc.get("metadata") if isinstance(doc.get("metadata"), Mapping) else {}
        contents.append(next(doc[k] for k in ("page_content", "content", "text") if k in doc))
        if reading.context_id == "id":
            ids.append(doc.get("id") if doc.get("id") not in (None, "") else meta.get("doc_uri"))
        else:
            ids.append(_at(meta, reading.context_id[9:]))
        scores.append(meta.get("score", doc.get("score")))
    return contents, ids, scores


def _retrieval(spans: list[Any], by_id: dict, reading: SpanReading, raw: dict, problems: list[str]) -> None:
    retrievers = _outermost(spans, by_id, lambda s: _kind(s) == "RETRIEVER", problems)
    if not retrievers:
        problems.append("no_retriever_span")
        return
    contents: list[Any] = []
    ids: list[Any] = []
    scores: list[Any] = []
    for span in retrievers:
        got = _documents(span, reading)
        if isinstance(got, str):
            problems.append(got)
            return
        contents += got[0]
        ids += got[1]
        scores += got[2]
    if not all(isinstance(c, str) for c in contents):
        problems.append("non_text_document")
        return
    raw["contexts"] = contents
    if all(isinstance(i, (str, int)) and not isinstance(i, bool) and str(i) != "" for i in ids):
        raw["context_ids"] = [str(i) for i in ids]
    else:
        problems.append("documents_without_ids")
    if contents and all(isinstance(s, (int, float)) and not isinstance(s, bool) and math.isfinite(s) for s in scores):
        raw["context_scores"] = [float(s) for s in scores]


def _timings(spans: list[Any], by_id: dict, root: Any, problems: list[str]) -> dict[str, float]:
    timings: dict[str, float] = {}
    for stage in dict.fromkeys(STAGES.values()):
        for span in _outermost([s for s in spans if s is not root], by_id, lambda s: STAGES.get(_kind(s)) == stage,
                               problems):
            seconds = _seconds(span)
            if seconds is not None:
                timings[stage] = timings.get(stage, 0.0) + seconds
    total = _seconds(root)
    if total is not None:
        timings["total"] = total
    return timings


def _expectations(trace: Any, raw: dict, problems: list[str]) -> None:
    for item in trace.search_assessments(type="expectation"):
        value, name = item.value, item.name
        if name in ("expected_response", "reference_answers"):
            raw["reference_answers"] = value
        elif name == "expected_retrieved_context" and isinstance(value, list):
            texts = [d.get("content") for d in value if isinstance(d, Mapping)]
            uris = [d.get("doc_uri") for d in value if isinstance(d, Mapping)]
            if len(texts) == len(value) and all(isinstance(t, str) for t in texts):
                raw["gt_contexts"] = texts
            if len(uris) == len(value) and all(u is not None for u in uris):
                raw.setdefault("gt_context_ids", [str(u) for u in uris])
        elif name in ("gt_context_ids", "gt_contexts"):
            raw[name] = value
        elif name == "expected_retrieved_context":
            problems.append("unread_expectation")


def _people(trace: Any, raw: dict, problems: list[str]) -> None:
    human: dict[str, Any] = {}
    for item in trace.search_assessments(type="feedback"):
        source = getattr(item, "source", None)
        if source is None or str(getattr(source, "source_type", "")).upper() != "HUMAN":
            continue
        value = item.value
        if isinstance(value, bool):
            value = int(value)
        if item.name == "label":
            raw["label"] = value
        elif isinstance(value, (int, float)):
            human[item.name.removeprefix("human/")] = value
        elif value is not None:
            problems.append("unread_human_feedback")
    if human:
        raw["human"] = human


def unreadable(trace_id: str, why: str, *, record_id: str | None = None) -> Mapped:
    """The record of a trace that could not be read: its id, a placeholder query, ``unreadable_trace`` and why."""
    why = " ".join(str(why).split())[:200]
    return Mapped({"id": record_id or trace_id, "trace_id": trace_id,
                   "query": f"(no question: trace {trace_id} could not be read)"}, ["unreadable_trace"], why)


def read_trace(trace: Any, reading: SpanReading = SpanReading(), *, record_id: str | None = None) -> Mapped:
    """A trace's record fields and the problems met (:data:`PROBLEMS`), nothing raised: what is missing stays
    absent; a trace that cannot be read at all (spans nested past Python's recursion limit, a malformed
    attribute MLflow cannot decode) is :func:`unreadable`, its reason in ``status``."""
    trace_id = trace.info.trace_id
    try:
        return _read(trace, reading, trace_id, record_id)
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - whatever the trace holds, it keeps its record
        return unreadable(trace_id, f"{type(exc).__name__}: {exc}", record_id=record_id)


def _read(trace: Any, reading: SpanReading, trace_id: str, record_id: str | None) -> Mapped:
    info = trace.info
    raw: dict[str, Any] = {"id": record_id or trace_id, "trace_id": trace_id}
    problems: list[str] = []
    if "ERROR" in str(getattr(info, "state", "") or getattr(info, "status", "")):
        problems.append("trace_error")
    spans = list(trace.data.spans) if trace.data is not None else []
    roots = sorted((s for s in spans if s.parent_id is None), key=lambda s: s.start_time_ns or 0)
    if not roots:
        problems.append("no_root_span" if spans else "no_spans")
    else:
        root, by_id = roots[0], _children(spans)
        attributes = root.attributes or {}
        inputs = root.inputs if root.inputs is not None else _maybe_json(attributes.get("input.value"))
        outputs = root.outputs if root.outputs is not None else _maybe_json(attributes.get("output.value"))
        query = _at(inputs, reading.query_key) if reading.query_key else text_of(inputs, QUERY_KEYS)
        if isinstance(query, str) and query.strip():
            raw["query"] = query
        else:
            problems.append("no_root_input")
        if outputs is None:
            problems.append("no_output")
        else:
            answer = _at(outputs, reading.answer_key) if reading.answer_key else text_of(outputs, ANSWER_KEYS)
            if isinstance(answer, str):
                raw["answer"] = answer
            else:
                problems.append("non_text_output")
        _retrieval(spans, by_id, reading, raw, problems)
        timings = _timings(spans, by_id, root, problems)
        if timings:
            raw["timings"] = timings
            if "total" in timings:
                raw["latency_s"] = timings["total"]
    _expectations(trace, raw, problems)
    _people(trace, raw, problems)
    raw.setdefault("query", f"(no question: trace {trace_id} has no root input)")
    return Mapped(raw, problems)


def record_of(mapped: Mapped, *, source: str, row: int, scales: dict[str, tuple] = HUMAN_SCALES) -> Record:
    """The record of a mapped trace; a field :func:`to_record` refuses (an expectation or a label of the
    wrong type) is left out and named in ``trace_status`` instead of stopping the run."""
    raw = dict(mapped.raw)
    for _ in range(len(raw)):
        try:
            record = to_record({**raw, "trace_status": mapped.status}, path=source, row=row, scales=scales)
            return record
        except DataError as exc:
            name = (exc.field or "").split(".")[0]
            if name not in raw or name in ("id", "query"):
                raise
            raw.pop(name)
            mapped.problems.append("unread_human_feedback" if name in ("human", "label") else "unread_expectation")
    raise DataError("the trace could not be read", path=source, row=row)  # pragma: no cover - each pass drops a field


def count_problems(statuses: Iterable[list[str]]) -> dict[str, int]:
    """How many records have each problem, in :data:`PROBLEMS` order."""
    counts = dict.fromkeys(PROBLEMS, 0)
    for problems in statuses:
        for p in set(problems):
            counts[p] += 1
    return {p: n for p, n in counts.items() if n}


def problems_line(counts: Mapping[str, int], total: int, what: str) -> str:
    """One sentence: how many of ``total`` traces mapped fully, and how many lacked what, and why."""
    if not counts:
        return f"{what}: {total} trace(s), every field read"
    parts = "; ".join(f"{n} {p} — {PROBLEMS[p]}" for p, n in counts.items())
    return f"{what}: {total} trace(s), {parts} (per record: the trace_status column)"


__all__ = ["PROBLEMS", "MAX_DEPTH", "SpanReading", "Mapped", "read_trace", "unreadable", "record_of", "text_of", "count_problems",
           "problems_line"]
