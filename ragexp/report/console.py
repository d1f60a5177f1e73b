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


def number(value: Any) -> str:
    """A value as ragexp's tables show it: four decimals, ``—`` when there is none (None or NaN)."""
    return "—" if value is None or value != value else f"{float(value):.4f}"


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4f}"
    return str(value)


def _ci(iv: Any) -> str:
    if iv is None or iv.ci_low is None or iv.ci_high is None:
        return ""
    return f"[{iv.ci_low:.4f}, {iv.ci_high:.4f}]"


def _method_line(stats: Mapping[str, Any] | None, intervals: Mapping[str, Any]) -> str:
    stats = stats or {}
    level = round(100 * float(stats.get("confidence", 0.95)), 2)
    boot = f"{stats.get('method', 'percentile')} bootstrap ({int(stats.get('resamples', 10_000)):,} resamples, " \
           f"seed {stats.get('seed', 0)})"
    if stats.get("cluster_by"):
        line = f"{level:g}% CI: {boot} resampling clusters of '{stats['cluster_by']}', clustered standard errors"
    else:
        line = f"{level:g}% CI: Wilson for 0/1 metrics, else {boot}"
    normal = sum(getattr(iv, "method", None) == "normal" for iv in intervals.values())
    if normal:  # docs/uncertainty.md, "Large runs"
        line += f"; for {normal} means of this large run mean ± z·stderr, where the bootstrap adds nothing"
    return line + "; 'over' = the samples the value is computed over (status ok)"


def print_summary(title: str, metrics: Mapping[str, float | None], counts: Mapping[str, Mapping[str, int]],
                  n: int, footer: list[str], intervals: Mapping[str, Any] | None = None,
                  stats: Mapping[str, Any] | None = None) -> None:
    """The run's table: each value, its confidence interval, how many samples it is over, and the
    samples that did not score (by status). ``intervals`` maps a key to an Interval."""
    from rich.console import Console
    from rich.table import Table

    intervals = intervals or {}
    table = Table(title=title, title_justify="left", show_lines=False,
                  caption=_method_line(stats, intervals) if intervals else None, caption_justify="left")
    table.add_column("metric", no_wrap=True)  # a key is read whole, never folded
    table.add_column("value", justify="right", no_wrap=True)
    if intervals:
        level = round(100 * float((stats or {}).get("confidence", 0.95)), 2)
        table.add_column(f"{level:g}% CI", justify="right", no_wrap=True)
        table.add_column("± stderr", justify="right", no_wrap=True)
    table.add_column("over", justify="right", no_wrap=True)
    table.add_column("other statuses", overflow="fold")
    for key, value in metrics.items():
        c = counts.get(key, {})
        iv = intervals.get(key)
        other = ", ".join(f"{k}: {v}" for k, v in c.items() if k != "ok")
        if iv is not None:
            over = f"{iv.n} / {n}"
        elif c:
            over = f"{c.get('ok', 0)} / {n}"
        else:
            over = ""
        count_like = iv is None and not c and isinstance(value, float) and value.is_integer()
        row = [key, f"{int(value):,}" if count_like else _fmt(value)]  # judge/calls, pipeline/failures
        if intervals:
            row += [_ci(iv), _fmt(iv.stderr) if iv is not None and iv.stderr is not None else ""]
        table.add_row(*row, over, other)
    console = Console(file=sys.stdout, width=max(100, Console().width))
    console.print(table)
    notes: dict[str, list[str]] = {}
    for key, iv in intervals.items():
        if key in metrics and getattr(iv, "note", None) and iv.n >= 1:
            notes.setdefault(iv.note, []).append(key)
    for note, keys in notes.items():
        which = ", ".join(keys) if len(keys) <= 3 else f"{keys[0]} and {len(keys) - 1} more"
        console.print(f"[yellow]note ({which}): {note}[/yellow]", highlight=False, soft_wrap=True)
    for line in footer:
        console.print(line, highlight=False, soft_wrap=True)


def print_leaderboard(board: Mapping[str, Any]) -> None:
    """A sweep's leaderboard (see :mod:`ragexp.tracking.leaderboard`): best first, each run's mean and
    interval, its paired difference from the best and whether that difference is larger than the noise."""
    from rich.console import Console
    from rich.table import Table

    level = round(100 * float(board.get("confidence", 0.95)), 2)
    direction = "higher is better" if board.get("higher_is_better", True) else "lower is better"
    others = list(board.get("headline", [board["metric"]]))[1:]
    caption = (f"Ranked by {board['metric']}; Δ vs best: paired over the same questions, with p Holm-adjusted; "
               f"'differs' when p < {1 - float(board.get('confidence', 0.95)):.2g}, else the gap is within noise.")
    if others:
        caption += f" {', '.join(others)}: mean, and whether it differs from that metric's best run."
    table = Table(title=f"ragexp sweep leaderboard · {board['metric']} ({direction})", title_justify="left",
                  caption=caption, caption_justify="left")
    widest = max((len(str(r.get("label") or r["run_name"])) for r in board["rows"]), default=3)
    table.add_column("run", overflow="fold", min_width=min(widest, 30))
    for name in ("mean", f"{level:g}% CI", "n", "Δ vs best", "p (Holm)"):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    for key in others:
        table.add_column(key, justify="right", no_wrap=True)
    for r in board["rows"]:
        ci = f"[{r['ci_low']:.4f}, {r['ci_high']:.4f}]" if r.get("ci_low") is not None else ""
        if r.get("best"):
            verdict = "best"
        elif "differs" in r:
            verdict = "[red]differs[/red]" if r["differs"] else "within noise"
        else:
            verdict = r.get("note", "")
        delta = f"{r['diff_vs_best']:+.4f}" if r.get("diff_vs_best") is not None else ""
        p = f"{r['p_holm']:.3g}" if r.get("p_holm") is not None else ""
        also = []
        for key in others:
            o = (r.get("also") or {}).get(key) or {}
            said = ("best" if o.get("best") else "[red]differs[/red]" if o.get("differs") else
                    "within noise" if o.get("differs") is False else "")
            also.append("—" if o.get("mean") is None else f"{o['mean']:.4f} {said}".rstrip())
        table.add_row(str(r.get("label") or r["run_name"]), _fmt(r.get("mean")), ci, _fmt(r.get("n")), delta, p, verdict,
                      *also)
    console = Console(file=sys.stdout, width=max(120, Console().width))
    console.print(table)
    for line in board.get("mixed") or ():
        console.print(f"[yellow]note: {line}[/yellow]", highlight=False, soft_wrap=True)
    if board.get("chosen_by"):
        console.print(board["chosen_by"], highlight=False, soft_wrap=True)
    if board.get("not_ranked"):
        console.print(f"[yellow]warning: {board['not_ranked']}[/yellow]", highlight=False, soft_wrap=True)
