"""What the user sees: progress bars on long loops and the summary table at the end."""

from __future__ import annotations

import sys
from typing import Any, Iterable, Mapping


def progress(enabled: bool, desc: str, total: int | None = None):
    """A function wrapping an iterable in a tqdm bar (on stderr), or leaving it as is."""

    def wrap(items: Iterable[Any]) -> Iterable[Any]:
        if not enabled:
            return items
        from tqdm.auto import tqdm

        return tqdm(items, desc=desc, total=total, file=sys.stderr, leave=False, dynamic_ncols=True,
                    disable=None, mininterval=0.5)

    return wrap


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def print_summary(title: str, metrics: Mapping[str, float | None], counts: Mapping[str, Mapping[str, int]],
                  n: int, footer: list[str]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_column("ok / n", justify="right")
    table.add_column("other statuses")
    for key, value in metrics.items():
        c = counts.get(key, {})
        ok = c.get("ok", 0)
        other = ", ".join(f"{k}: {v}" for k, v in c.items() if k != "ok")
        table.add_row(key, _fmt(value), f"{ok} / {n}" if c else "", other)
    console = Console(file=sys.stdout, width=max(100, Console().width))
    console.print(table)
    for line in footer:
        console.print(line, highlight=False, soft_wrap=True)
