"""The console's tables of a run's breakdown (:mod:`ragexp.core.breakdown`): one compact table of the headline
metrics by question category, and one of what each context source contributed — printed under the run's table."""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence

from ragexp.core.breakdown import CATEGORY, SOURCE, SOURCE_METRICS, SUPPORTED, breakdown_key


def cell(iv: Any, n: int | None = None) -> str:
    """``0.4120 [0.3500, 0.4700]``, ``(n 7)`` added when the value is over fewer records than its row's ``n``.

    >>> from ragexp.stats.intervals import Interval
    >>> cell(Interval(0.412, 0.03, 0.35, 0.47, 9, "percentile"), 10)
    '0.4120 [0.3500, 0.4700] (n 9)'
    >>> cell(None)
    '—'
    """
    if iv is None or iv.mean is None:
        return "—"
    text = f"{iv.mean:.4f}"
    if iv.ci_low is not None and iv.ci_high is not None:
        text += f" [{iv.ci_low:.4f}, {iv.ci_high:.4f}]"
    return text + (f" (n {iv.n})" if n is not None and iv.n != n else "")


def category_rows(intervals: Mapping[str, Any], labels: Sequence[str], headline: Sequence[str]
                  ) -> tuple[list[str], list[list[str]]]:
    """The category table's columns (the headline metrics that have a breakdown) and rows: category, n (the
    most records any of its values is over), a cell per metric."""
    metrics = [m for m in headline if any(breakdown_key(m, CATEGORY, c) in intervals for c in labels)]
    return metrics, _rows(intervals, labels, metrics, CATEGORY)


def source_rows(intervals: Mapping[str, Any], labels: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The source table's columns (answers supported, then coverage, precision, recall where computed) and rows:
    source, n (the most records any of its values is over), a cell per metric."""
    metrics = [SUPPORTED] + sorted({k.split(f"/{SOURCE}/")[0] for k in intervals if f"/{SOURCE}/" in k} - {SUPPORTED},
                                   key=lambda k: (SOURCE_METRICS.index(k.split("/")[0]) if k.split("/")[0] in
                                                  SOURCE_METRICS else 99, k))
    return metrics, _rows(intervals, labels, metrics, SOURCE)


def _rows(intervals: Mapping[str, Any], labels: Sequence[str], metrics: Sequence[str], by: str) -> list[list[str]]:
    """A row per label: the label, n (the most records any of its values is over), a :func:`cell` per metric."""
    rows = []
    for label in labels:
        ivs = [intervals.get(breakdown_key(m, by, label)) for m in metrics]
        n = max((iv.n for iv in ivs if iv is not None), default=0)
        rows.append([label, str(n), *(cell(iv, n) for iv in ivs)])
    return rows


def print_breakdown(intervals: Mapping[str, Any], labels: Mapping[str, Sequence[str]], headline: Sequence[str],
                    stats: Mapping[str, Any] | None = None) -> None:
    """The category table (categories × headline metrics, with n) and, when records named their contexts'
    sources, the source table; nothing when the run has neither."""
    from rich.console import Console
    from rich.table import Table

    console = Console(file=sys.stdout, width=100)
    clustered = (stats or {}).get("cluster_by")
    how = f"intervals clustered by '{clustered}'" if clustered else "each category's interval over its own records"
    tables = []
    if labels.get(CATEGORY):
        metrics, rows = category_rows(intervals, labels[CATEGORY], headline)
        if metrics:
            tables.append(("By category", f"{how}; keys <metric>/category/<category>", ["category", "n", *metrics], rows))
    if labels.get(SOURCE):
        metrics, rows = source_rows(intervals, labels[SOURCE])
        tables.append(("By context source", "answers_supported: share of answers with a keyword in the source's "
                       "contexts; keys <metric>/source/<source>", ["source", "n", *metrics], rows))
    for title, caption, columns, rows in tables:
        table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
        for i, name in enumerate(columns):
            table.add_column(name, no_wrap=True, justify="left" if i == 0 else "right")
        for row in rows:
            table.add_row(*row)
        console.width = max(100, console.measure(table, options=console.options.update_width(1000)).maximum)
        console.print(table)
