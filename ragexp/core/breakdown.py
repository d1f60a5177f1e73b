"""The headline metrics by question category, and the retrieval by context source — no I/O here.

Definitions users read: docs/metrics.md, "By category and by source". In short:

- **By category** (records carrying ``category``): every headline metric that has a value per record is
  also reported over each category's records alone, key ``<metric>/category/<category>`` (LoCoMo:
  ``answer_token_f1/category/temporal``), its interval computed as if those records were the run (same
  ``stats`` settings, clustered by ``stats.cluster_by`` when set), ``n`` its own.
- **By source** (records carrying ``context_sources``, one label per context): for each label, the run's
  ``avg_coverage``, ``context_precision`` and ``context_recall`` (those it computes, with their options and
  matcher) over that source's contexts alone, on the records where the source gave at least one context,
  key ``<metric>/source/<label>``; and ``answers_supported/source/<label>``: over every record with
  sources and an answer holding a keyword, 1 when at least one of the answer's keywords is in that
  source's contexts, else 0 — the share of answers each source supported.

A label becomes part of an MLflow key as it is, but for characters MLflow refuses in a key, which
become ``_`` (:func:`key_label`). Breakdown keys come after the run's own keys everywhere they are shown.

:class:`Breakdown` takes a run's records chunk by chunk (a run in memory is one chunk), keeps one label
per record and 8 bytes per record per source column, and gives the intervals at the end.
"""

from __future__ import annotations

import math
import re
from array import array
from dataclasses import replace
from typing import Any, Mapping, Sequence

from ragexp.core.scoring import MetricSpec, score

CATEGORY, SOURCE = "category", "source"
#: the per-source share of answers a source supported (a 0/1 value per record)
SUPPORTED = "answers_supported"
#: the metrics computed again over each source's contexts alone
SOURCE_METRICS = ("avg_coverage", "context_precision", "context_recall")
_NAN = float("nan")
_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. /]")


def key_label(label: str) -> str:
    """A label as it stands in a metric key: MLflow takes letters, digits, ``_ - . /`` and spaces; any
    other character becomes ``_``, and a ``/`` too (it would read as another level of the key).

    >>> key_label("memory_short"), key_label("multi hop/2"), key_label("短期")
    ('memory_short', 'multi hop_2', '__')
    """
    return _UNSAFE.sub("_", str(label)).replace("/", "_").strip() or "_"


def breakdown_key(metric: str, by: str, label: str) -> str:
    """``answer_token_f1`` by ``category`` ``temporal`` → ``answer_token_f1/category/temporal``."""
    return f"{metric}/{by}/{key_label(label)}"


def is_breakdown_key(key: str) -> bool:
    """Whether ``key`` (or its interval part, ``…/ci_low``) is a breakdown key: shown after the run's own keys.

    >>> is_breakdown_key("answer_token_f1/category/temporal/ci_low"), is_breakdown_key("ndcg/ndcg_at_10")
    (True, False)
    """
    return f"/{CATEGORY}/" in f"{key}/" or f"/{SOURCE}/" in f"{key}/"


class Breakdown:
    """The labels and per-source values of a run's records, chunk after chunk (:meth:`add`), and their
    intervals (:meth:`intervals`). ``specs``: the run's metrics (the per-source ones are taken from them)."""

    def __init__(self, specs: Sequence[MetricSpec]) -> None:
        self.source_specs = [s for s in specs if s.info.name in SOURCE_METRICS and not s.info.judge]
        self.stopwords = next((s.options.get("stopwords") for s in specs if s.info.name == "avg_coverage"), None)
        self.n = 0
        self.categories: list[str | None] = []
        self.eligible = array("d")  # per record: 0.0 when it has sources and an answer with a keyword, else NaN
        self.columns: dict[str, array] = {}  # per-source key → one float per record, NaN where undefined
        self.sources: dict[str, None] = {}  # the labels, in the order first seen

    def add(self, records: Sequence[Any]) -> None:
        """One chunk of the run's records, in order (after the pipeline: the contexts scored)."""
        self.merge(self.part(records), len(records))

    def part(self, records: Sequence[Any]) -> dict[str, Any] | None:
        """What :meth:`merge` keeps of one chunk (plain lists: it may be computed in another process), or None
        when no record of the chunk has a category or context sources."""
        categories = [_category(r) for r in records]
        if all(c is None for c in categories) and not any(getattr(r, "context_sources", None) for r in records):
            return None
        return {"categories": categories, "columns": self._source_values(records),
                "sources": list(dict.fromkeys(s for r in records for s in (getattr(r, "context_sources", None) or ()))),
                "eligible": [0.0 if _sourced(r) and _has_keyword(r.answer, self.stopwords) else _NAN for r in records]}

    def merge(self, part: Mapping[str, Any] | None, n: int) -> None:
        """The :meth:`part` of the next ``n`` records (None: none of them has a category or sources)."""
        if part is None:
            part = {"categories": [None] * n, "columns": {}, "sources": [], "eligible": [_NAN] * n}
        self.categories += part["categories"]
        self.sources.update(dict.fromkeys(part["sources"]))
        chunk, eligible = part["columns"], part["eligible"]
        for key in chunk:
            if key not in self.columns:  # a label first seen now: the records before it had no such context
                self.columns[key] = array("d", self.eligible if key.startswith(SUPPORTED + "/") else [_NAN] * self.n)
        for key, column in self.columns.items():
            column.extend(chunk.get(key) or (eligible if key.startswith(SUPPORTED + "/") else [_NAN] * n))
        self.eligible.extend(eligible)
        self.n += n

    def _source_values(self, records: Sequence[Any]) -> dict[str, list[float]]:
        from ragexp.metrics.keyword import avg_coverage

        labels = dict.fromkeys(s for r in records for s in (getattr(r, "context_sources", None) or ()))
        out: dict[str, list[float]] = {}
        for label in labels:
            part = [_only(r, label) for r in records]
            here = [i for i, r in enumerate(part) if r is not None]
            if not here:
                continue
            scores = score([part[i] for i in here], self.source_specs)
            for spec in self.source_specs:
                column = [_NAN] * len(records)
                for i, sc in zip(here, scores[spec.key]):
                    column[i] = sc.value if sc.status == "ok" and sc.value is not None else _NAN
                out[breakdown_key(spec.key, SOURCE, label)] = column
            supported = [_NAN] * len(records)
            for i, r in enumerate(records):
                if _sourced(r) and _has_keyword(r.answer, self.stopwords):
                    mine = part[i].contexts if part[i] is not None else []
                    covered = avg_coverage(mine, r.answer, stopwords=self.stopwords) if mine else 0.0
                    supported[i] = 1.0 if isinstance(covered, float) and covered > 0 else 0.0
            out[breakdown_key(SUPPORTED, SOURCE, label)] = supported
        return out

    def intervals(self, values: Mapping[str, Sequence[float]], headline: Sequence[str], *,
                  clusters: Sequence[Any] | None = None, **settings: Any) -> dict[str, Any]:
        """Every breakdown key → its :class:`~ragexp.stats.intervals.Interval`: the ``headline`` metrics among
        ``values`` (metric key → one value per record, NaN where not ok) by category, in the categories' order
        of first appearance, then the per-source keys, source by source; ``settings``: ``resamples``,
        ``confidence``, ``seed``, ``method`` of the run."""
        out: dict[str, Any] = {}
        keys = [k for k in headline if k in values]
        for category in dict.fromkeys(c for c in self.categories if c is not None):
            rows = [i for i, c in enumerate(self.categories) if c == category]
            columns = {breakdown_key(k, CATEGORY, category): [float(values[k][i]) for i in rows] for k in keys}
            out.update(_intervals(columns, rows, clusters, settings))
        for label in self.sources:
            group = {k: v for k, v in self.columns.items() if k.endswith(f"/{SOURCE}/{key_label(label)}")}
            rows = [i for i in range(self.n) if any(not math.isnan(v[i]) for v in group.values())]
            out.update(_intervals({k: [v[i] for i in rows] for k, v in group.items()}, rows, clusters, settings))
        return out

    def summary(self, intervals: Mapping[str, Any]) -> dict[str, Any]:
        """``summary.json``'s ``breakdown``: the labels (``by``) and every breakdown key's interval, in order."""
        return {"by": self.labels(), "intervals": {k: iv.as_dict() for k, iv in intervals.items()}}

    def labels(self) -> dict[str, list[str]]:
        """The categories and sources seen, as they stand in the keys (``summary.json``'s ``breakdown.by``)."""
        return {CATEGORY: [key_label(c) for c in dict.fromkeys(c for c in self.categories if c is not None)],
                SOURCE: [key_label(s) for s in self.sources]}


def _intervals(columns: dict[str, list[float]], rows: list[int], clusters: Sequence[Any] | None,
               settings: Mapping[str, Any]) -> dict[str, Any]:
    from ragexp.stats.intervals import mean_intervals

    if not columns or not rows:
        return {}
    sub = [clusters[i] for i in rows] if clusters is not None else None
    return mean_intervals(columns, clusters=sub, **settings)


def _category(record: Any) -> str | None:
    c = getattr(record, "category", None)
    return None if c is None else str(c)


def _sourced(record: Any) -> bool:
    return bool(getattr(record, "context_sources", None)) and record.answer is not None


def _has_keyword(text: Any, stopwords: Any) -> bool:
    from ragexp.common.text import keywords, stopword_set

    return isinstance(text, str) and bool(keywords(text, stopword_set(stopwords)))


def _only(record: Any, label: str) -> Any:
    """``record`` with only the contexts (and their ids) of source ``label``; None when it has none."""
    sources = getattr(record, "context_sources", None) or ()
    keep = [i for i, s in enumerate(sources) if s == label]
    if not keep or record.contexts is None:
        return None
    ids = record.context_ids if record.context_ids is not None and len(record.context_ids) == len(sources) else None
    return replace(record, contexts=[record.contexts[i] for i in keep], context_sources=[label] * len(keep),
                   context_ids=[ids[i] for i in keep] if ids is not None else None)


def attach(breakdown: Breakdown | None, values: Mapping[str, Sequence[float]], summary: dict[str, Any],
           extra: dict[str, float], intervals: dict[str, Any], *, clusters: Sequence[Any] | None = None) -> dict[str, Any]:
    """The run's breakdown, from the one aggregator's ``breakdown`` and per-record ``values`` (metric key → NaN where
    not ok), by ``summary``'s ``headline`` and ``stats``: ``summary["breakdown"]`` (after the run's own keys), each
    key's mean into ``extra`` (the MLflow metrics after the run's) and its interval into ``intervals`` (``K/n``,
    ``K/ci_low``…). Returns the breakdown's intervals; nothing is added when no record has a category or sources."""
    if breakdown is None or not any(breakdown.labels().values()):
        return {}
    st = summary.get("stats") or {}
    settings = {k: st[k] for k in ("resamples", "confidence", "seed", "method") if k in st}
    grouped = breakdown.intervals(values, list(summary.get("headline") or []), clusters=clusters, **settings)
    summary["breakdown"] = breakdown.summary(grouped)
    extra.update({k: float(iv.mean) for k, iv in grouped.items() if iv.mean is not None})
    intervals.update(grouped)
    return grouped
