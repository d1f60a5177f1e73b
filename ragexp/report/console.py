"""What the user sees: progress bars on long loops and the summary table at the end."""

from __future__ import annotations

import math
import re
import sys
from typing import Any, Iterable, Mapping

from ragexp.common.renamed import cutoff_key
from ragexp.stats.intervals import CONFIDENCE, METHOD, RESAMPLES
from ragexp.metrics.base import REGISTRY, load_all


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
    level = round(100 * float(stats.get("confidence", CONFIDENCE)), 2)
    boot = f"{stats.get('method', METHOD)} bootstrap ({int(stats.get('resamples', RESAMPLES)):,} resamples, " \
           f"seed {stats.get('seed', 0)})"
    if stats.get("cluster_by"):
        line = f"{level:g}% CI: {boot} resampling clusters of '{stats['cluster_by']}', clustered standard errors"
    else:
        line = f"{level:g}% CI: Wilson for 0/1 metrics, else {boot}"
    normal = sum(getattr(iv, "method", None) == "normal" for iv in intervals.values())
    if normal:  # docs/uncertainty.md, "Large runs"
        line += f"; for {normal} means of this large run mean ± z·stderr, where the bootstrap adds nothing"
    return line + "; 'over' = the samples the value is computed over (status ok)"


#: the console's name of each metric module's family (the registry's function module), in table order
FAMILIES = {"token": "passage tokens", "context": "context", "ranking": "ranked", "answer": "answer",
            "keyword": "keyword", "judge": "judge", "questeval": "judge"}
#: rows per family the default table shows at most (``report.all=true``: every row), and rows in all
PER_FAMILY = 3
MAX_ROWS = 25


def family(key: str) -> str:
    """The family a console row belongs to: its metric's module (``hit_rate/hit_rate_at_3`` → ``ranked``), ``latency``
    for seconds, ``people's labels`` for agreement rows, ``run`` for judge and pipeline counts."""
    base = key.split("/", 1)[0]
    if base in ("latency", "avg_latency"):
        return "latency"
    if ": " in key:
        return "people's labels"
    if base in ("judge", "pipeline"):
        return "run"
    info = REGISTRY.get(base) or load_all().get(base)
    if info is None:
        return "other"
    module = info.fn.__module__.split(".")
    return "judge" if info.judge or "judged" in module else FAMILIES.get(module[-1], "other")


def scale(key: str) -> str:
    """A row's scale where it is not a share in [0, 1]: ``0–100`` (BLEU), ``0–5`` (a 0–5 judge score),
    ``s`` (seconds), ``count``, a metric's own unit.

    >>> scale("stage_latency/search/p95"), scale("context_tokens"), scale("latency/search"), scale("bleu"), scale("mrr")
    ('s', 'tokens', 's', '0–100', '')
    """
    base = key.split("/", 1)[0]
    if base in ("latency", "avg_latency"):
        return "s"
    if base in ("judge", "pipeline"):
        return "count" if not key.endswith("cost_usd") else "US$"
    info = REGISTRY.get(base) or (None if ": " in key else load_all().get(base))
    if info is not None and info.unit:
        return info.unit
    if info is None or info.bounds == (0.0, 1.0):
        return ""
    lo, hi = info.bounds
    return f"{lo:g}–{hi:g}" if math.isfinite(hi) else ""


def _cutoff(key: str) -> int | None:
    """A cut-off key's k (``hit_rate/hit_rate_at_3`` → 3, its metric's cut-off: ragexp.common.renamed.cutoff_key)."""
    base, _, tail = key.rpartition("/")
    stem, at, k = tail.rpartition("_at_")
    return int(k) if base and at and k.isdigit() and cutoff_key(base.split("/", 1)[0], k) == tail else None


def layout(keys: Iterable[str], headline: Iterable[str] = (), depth: int | None = None,
           show_all: bool = False) -> tuple[list[tuple[str, str]], list[str]]:
    """The rows of the run's table as (family, key), headline first, and the keys left out.

    A cut-off beyond ``depth`` (the most passages a question got) is left out always: there it repeats
    the value at ``depth``. By default each metric shows one cut-off (the deepest within ``depth``)
    and each family at most :data:`PER_FAMILY` rows; ``show_all`` shows every other row.

    >>> rows, hidden = layout(["hit_rate/hit_rate_at_1", "hit_rate/hit_rate_at_3", "hit_rate/hit_rate_at_10",
    ...                        "mrr/mrr_at_1", "mrr/mrr_at_3", "bleu"], headline=["bleu"], depth=4)
    >>> rows
    [('headline', 'bleu'), ('ranked', 'hit_rate/hit_rate_at_3'), ('ranked', 'mrr/mrr_at_3')]
    >>> hidden
    ['hit_rate/hit_rate_at_1', 'mrr/mrr_at_1', 'hit_rate/hit_rate_at_10']
    """
    keys = list(keys)
    head = [k for k in headline if k in keys]
    within = [k for k in keys if k not in head and (depth is None or (_cutoff(k) or 0) <= depth)]
    beyond = [k for k in keys if k not in head and k not in within]
    if show_all:
        chosen = within
    else:  # one cut-off per metric: the deepest within depth
        deepest: dict[str, str] = {}
        for k in within:
            base = k.split("/", 1)[0] if _cutoff(k) is not None else k
            if base not in deepest or (_cutoff(k) or 0) > (_cutoff(deepest[base]) or 0):
                deepest[base] = k
        chosen = [k for k in within if k in deepest.values()]
    groups: dict[str, list[str]] = {}
    for k in chosen:
        groups.setdefault(family(k), []).append(k)
    rows = [("headline", k) for k in head]
    per = max(1, min(PER_FAMILY, (MAX_ROWS - len(rows)) // max(1, len(groups))))  # one screen: at most MAX_ROWS
    for name, members in groups.items():
        rows += [(name, k) for k in (members if show_all else members[:per])]
    shown = {k for _, k in rows}
    return rows, [k for k in keys if k not in shown and k not in beyond] + beyond


def print_summary(title: str, metrics: Mapping[str, float | None], counts: Mapping[str, Mapping[str, int]],
                  n: int, footer: list[str], intervals: Mapping[str, Any] | None = None,
                  stats: Mapping[str, Any] | None = None, headline: Iterable[str] = (), depth: int | None = None,
                  show_all: bool = False, notes_first: Iterable[str] = ()) -> None:
    """The run's table: the headline metrics first, then one family at a time, each value with its scale
    where it is not 0–1, its confidence interval, how many samples it is over, and the samples that did
    not score (by status). ``intervals`` maps a key to an Interval; ``notes_first``: sentences printed
    right under the table (what the run measured and what it did not)."""
    from rich.console import Console
    from rich.table import Table

    intervals = intervals or {}
    rows, hidden = layout(metrics, headline, depth, show_all)
    statuses = any(k != "ok" and v for key in (k for _, k in rows) for k, v in counts.get(key, {}).items())
    table = Table(title=title, title_justify="left", show_lines=False,
                  caption=_method_line(stats, intervals) if intervals else None, caption_justify="left")
    table.add_column("", no_wrap=True, style="dim")
    table.add_column("metric", no_wrap=True)  # a key is read whole, never folded
    table.add_column("value", justify="right", no_wrap=True)
    if intervals:
        level = round(100 * float((stats or {}).get("confidence", CONFIDENCE)), 2)
        table.add_column(f"{level:g}% CI", justify="right", no_wrap=True)
    table.add_column("over", justify="right", no_wrap=True)
    if statuses:
        table.add_column("other statuses", overflow="fold", min_width=16)
    last = None
    for group, key in rows:
        value = metrics[key]
        c = counts.get(key, {})
        iv = intervals.get(key)
        if iv is not None:
            over = f"{iv.n} / {n}"
        elif c:
            over = f"{c.get('ok', 0)} / {n}"
        else:
            over = ""
        count_like = iv is None and not c and isinstance(value, float) and value.is_integer()
        shown = f"{int(value):,}" if count_like else _fmt(value)  # judge/calls, pipeline/failures
        unit = f" [dim]({scale(key)})[/dim]" if scale(key) else ""  # BLEU (0–100), a judge score (0–5), seconds
        if getattr(REGISTRY.get(key) or load_all().get(key), "label_verdict", None):  # a verdict vs people's label
            unit = " [dim](vs label)[/dim]"
        row = ["" if group == last else group, (f"[bold]{key}[/bold]" if group == "headline" else key) + unit, shown]
        last = group
        if intervals:
            row.append(_ci(iv))
        row.append(over)
        if statuses:
            row.append(", ".join(f"{k}: {v}" for k, v in c.items() if k != "ok"))
        table.add_row(*row)
    console = Console(file=sys.stdout, width=max(100, Console().width))
    natural = console.measure(table, options=console.options.update_width(1000)).maximum
    console.width = max(console.width, natural)  # wider than 100: printed whole, no value cut to '…'
    console.print(table)
    for line in notes_first:
        console.print(line, highlight=False, soft_wrap=True)
    if hidden:
        shown_bases = {k.split("/", 1)[0] for _, k in rows}
        names = list(dict.fromkeys(k.split("/", 1)[0] if _cutoff(k) is not None else k for k in hidden))
        cut = [b for b in names if b in shown_bases]
        names = [b for b in names if b not in shown_bases]
        which = ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")
        if cut:
            which += ("; " if which else "") + f"the other cut-offs of {', '.join(cut[:4])}" + (" …" if len(cut) > 4 else "")
        deep = depth and any((_cutoff(k) or 0) > depth for k in hidden)  # only when such cut-offs were hidden
        most = "the 1 passage" if depth == 1 else f"the {depth} passages"
        beyond = (f"; cut-offs beyond {most} a question got at most add no passage: recall and hit rate repeat the "
                  "last one, precision falls with k" if deep else "")
        hint = "" if show_all else " (report.all=true prints them)"
        console.print(f"[dim]{len(hidden)} more values in summary.json and MLflow{hint}: {which}{beyond}[/dim]",
                      highlight=False, soft_wrap=True)
    notes: dict[str, list[str]] = {}
    for key, iv in intervals.items():
        if key in metrics and getattr(iv, "note", None) and iv.n >= 1:
            notes.setdefault(iv.note, []).append(key)
    for note, keys in notes.items():
        which = ", ".join(keys) if len(keys) <= 3 else f"{keys[0]} and {len(keys) - 1} more"
        console.print(f"[yellow]note ({which}): {note}[/yellow]", highlight=False, soft_wrap=True)
    for line in footer:
        console.print(line, highlight=False, soft_wrap=True)


def print_job_line(label: str, metrics: Mapping[str, float | None], intervals: Mapping[str, Any],
                   headline: Iterable[str], folder: Any) -> None:
    """In a sweep, a job's one line (the sweep's table comes at its end): its headline metrics and where
    its results are."""
    parts = []
    for key in headline:
        iv = intervals.get(key)
        parts.append(f"{key} {_fmt(metrics.get(key))}" + (f" {_ci(iv)}" if iv is not None and _ci(iv) else ""))
    where = f" · results in {folder}" if folder is not None else ""
    print(f"{label}: {'; '.join(parts)}{where}", flush=True)


def spaced_label(label: str) -> str:
    """A run's label (its overrides joined by commas) with a space after each comma that starts the next override,
    so that a narrow column wraps between overrides, not inside a word.

    >>> spaced_label("retriever.top_k=1,dataset.system=strong,metric=[bleu,rougeL]")
    'retriever.top_k=1, dataset.system=strong, metric=[bleu,rougeL]'
    """
    return re.sub(r",(?=[+~]*[\w.@/-]+=)", ", ", label)


def print_leaderboard(board: Mapping[str, Any]) -> None:
    """A sweep's leaderboard (see :mod:`ragexp.core.leaderboard`): best first, each run's mean and
    interval, its paired difference from the best and whether that difference is larger than the noise."""
    from rich.console import Console
    from rich.table import Table

    level = round(100 * float(board.get("confidence", CONFIDENCE)), 2)
    direction = "higher is better" if board.get("higher_is_better", True) else "lower is better"
    others = list(board.get("headline", [board["metric"]]))[1:]
    over = f", tested over the clusters of {board['cluster_by']} (note below)" if board.get("cluster_by") else ""
    caption = (f"Δ vs best: paired over the same questions{over}, with p Holm-adjusted; "
               f"'differs' when p < {1 - float(board.get('confidence', CONFIDENCE)):.2g}, else the gap is within noise.")
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
        table.add_row(spaced_label(str(r.get("label") or r["run_name"])), _fmt(r.get("mean")), ci, _fmt(r.get("n")),
                      delta, p, verdict, *also)
    console = Console(file=sys.stdout, width=max(120, Console().width))
    natural = console.measure(table, options=console.options.update_width(1000)).maximum
    console.width = max(console.width, min(natural, 200))  # the other headline columns printed whole, not cut
    console.print(table)
    for line in board.get("mixed") or ():
        console.print(f"[yellow]note: {line}[/yellow]", highlight=False, soft_wrap=True)
    if board.get("chosen_by"):
        console.print(board["chosen_by"], highlight=False, soft_wrap=True)
    if board.get("recorded_answers"):
        console.print(f"[yellow]note: {board['recorded_answers']}[/yellow]", highlight=False, soft_wrap=True)
    if board.get("clusters"):
        console.print(f"[yellow]note: {board['clusters']}[/yellow]", highlight=False, soft_wrap=True)
    if board.get("granularity"):
        console.print(f"[yellow]note: {board['granularity']}[/yellow]", highlight=False, soft_wrap=True)
    if board.get("not_ranked"):
        console.print(f"[yellow]warning: {board['not_ranked']}[/yellow]", highlight=False, soft_wrap=True)
