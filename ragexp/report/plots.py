"""PNG figures for the MLflow artifact view, drawn headless (matplotlib's Agg backend).

matplotlib is imported on first use, never when ragexp is imported, and always on Agg: a CI
job or an ssh session has no display, and the figure only has to become a file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ragexp.stats.intervals import CONFIDENCE
from ragexp.metrics.base import direction, load_all


def forest_plot(board: dict[str, Any], path: str | Path) -> Path:
    """A sweep's leaderboard as a forest plot: one line per child run, best at the top.

    Each run's mean is a dot with its confidence interval as a bar; the best run is blue, a
    run whose paired difference from the best is significant (Holm-adjusted) is red, one that
    cannot be told apart from the best is grey. A dashed line marks the best mean; the text at
    the right gives mean [low, high], n and the adjusted p-value.
    """
    rows = [r for r in board["rows"] if r.get("mean") is not None]
    level = round(100 * float(board.get("confidence", CONFIDENCE)), 2)
    ax = (fig := _figure(10, 1.2 + 0.42 * len(rows))).subplots()
    ys = list(range(len(rows)))[::-1]
    for y, r in zip(ys, rows):
        if r.get("best"):
            colour, marker = "tab:blue", "D"
        elif r.get("differs"):
            colour, marker = "tab:red", "o"
        else:
            colour, marker = "0.45", "o"
        lo, hi = r.get("ci_low"), r.get("ci_high")
        if lo is not None and hi is not None:
            ax.plot([lo, hi], [y, y], color=colour, linewidth=2.2, solid_capstyle="butt")
            ax.plot([lo, lo], [y - 0.15, y + 0.15], color=colour, linewidth=1.2)
            ax.plot([hi, hi], [y - 0.15, y + 0.15], color=colour, linewidth=1.2)
        ax.plot([r["mean"]], [y], marker=marker, color=colour, markersize=7, zorder=3)
        text = _num(r["mean"])  # in a text column right of the axes
        if r.get("ci_low") is not None:
            text += f" [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"
        text += f"  n={r.get('n')}"
        if r.get("best"):
            text += "  best"
        elif r.get("p_holm") is not None:
            text += f"  p={r['p_holm']:.2g}" + (" differs" if r.get("differs") else " within noise")
        for key, o in (r.get("also") or {}).items():  # the other headline metrics, in words
            if o.get("mean") is not None:
                said = "best" if o.get("best") else "differs" if o.get("differs") else "within noise"
                text += f"  · {key} {_num(o['mean'])} {said}"
        ax.annotate(text, xy=(1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=8.5,
                    color="0.2")
    best = next((r for r in rows if r.get("best")), None)
    if best is not None:
        ax.axvline(best["mean"], color="tab:blue", linestyle="--", linewidth=0.9, alpha=0.6)
    ax.set_yticks(ys)
    ax.set_yticklabels([_short_label(r.get("label") or r["run_name"]) for r in rows], fontsize=9)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    direction = "higher is better" if board.get("higher_is_better", True) else "lower is better"
    ax.set_xlabel(f"{board['metric']}: mean and {level:g}% CI ({direction})")
    title = (f"Sweep leaderboard on {board['metric']} — red: differs from the best "
             f"(paired{clustered_words(board)}, Holm-adjusted), grey: within noise")
    if board.get("mixed"):  # the ranking metric sees noise where another headline metric does not
        title += "\n" + "\n".join(_short_label(m, 120) for m in board["mixed"][:3])
    ax.set_title(title, fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return _save(fig, path, dpi=120, tight=True)


def _short_label(name: str, width: int = 48) -> str:
    name = str(name)
    return name if len(name) <= width else name[: width - 1] + "…"


def paired_rows(comparison: dict[str, Any]) -> list[dict[str, Any]]:
    """The compared metrics' rows in the picture's order, top first: the headline metrics
    (``comparison["headline"]``) in their order, then the others as compared.

    >>> rows = {k: {"key": k, "diff": 0.1} for k in ("token_precision", "context_recall", "answer_token_f1")}
    >>> [r["key"] for r in paired_rows({"metrics": rows, "headline": ["answer_token_f1", "context_recall"]})]
    ['answer_token_f1', 'context_recall', 'token_precision']
    """
    rows = [r for r in comparison["metrics"].values() if r.get("diff") is not None]
    lead = [k for k in comparison.get("headline") or ()]
    return sorted(rows, key=lambda r: lead.index(r["key"]) if r["key"] in lead else len(lead))


def plot_paired_differences(comparison: dict[str, Any], path: str | Path) -> Path | None:
    """The comparison as a picture: per metric, candidate − baseline with its CI, and the zero line.

    Green: significantly better, red: significantly worse (direction-aware), grey: within the
    noise. Metrics bounded to a range other than [0, 1] (``bleu`` 0–100) are drawn as a fraction
    of their range, said in their label; unbounded ones (``avg_latency``) get a panel of their
    own in their own unit. Returns None when no metric was compared.
    """
    rows = paired_rows(comparison)
    if not rows:
        return None
    lead = [k for k in comparison.get("headline") or () if any(r["key"] == k for r in rows)]
    ranges = _ranges([r["key"] for r in rows])
    bounded, unbounded = [], []
    for r in rows:
        span = ranges[r["key"]]
        if span is None:
            unbounded.append((r["key"], r, 1.0))
        else:
            bounded.append((_label(r["key"], span), r, span[1] - span[0]))
    panels = [p for p in (bounded, unbounded) if p]
    heights = [max(1.2, 0.32 * len(p) + 0.6) for p in panels]
    fig = _figure(7.5, sum(heights) + 0.9)
    axes = fig.subplots(len(panels), 1, squeeze=False, gridspec_kw={"height_ratios": heights})
    colours = {"better": "#1a9641", "worse": "#d7191c"}
    for ax, panel in zip(axes[:, 0], panels):
        for y, (label, r, width) in enumerate(reversed(panel)):
            colour = colours.get(r.get("verdict"), "#777777")
            d, lo, hi = r["diff"] / width, r["ci_low"] / width, r["ci_high"] / width
            ax.plot([lo, hi], [y, y], color=colour, linewidth=2.2, solid_capstyle="butt")
            ax.plot([d], [y], "o", color=colour, markersize=6)
        ax.axvline(0.0, color="black", linewidth=0.9)
        ax.set_yticks(range(len(panel)))
        ax.set_yticklabels([f"{label}{'' if r['higher_is_better'] else ' ↓'}" for label, r, _ in reversed(panel)])
        ax.set_ylim(-0.6, len(panel) - 0.4)
        heads = sum(1 for _, r, _ in panel if r["key"] in lead)
        if 0 < heads < len(panel):  # the headline metrics above a line, the rest below
            ax.axhline(len(panel) - heads - 0.5, color="#999999", linewidth=0.8, linestyle="--")
            for tick in ax.get_yticklabels()[-heads:]:
                tick.set_fontweight("bold")
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        unit = "own unit" if panel is unbounded else "fraction of the metric's range"
        ax.set_xlabel(f"candidate − baseline ({unit})")
        left, right = ax.get_xlim()
        edge = max(abs(left), abs(right))
        ax.set_xlim(-edge, edge)  # zero in the middle: left is lower, right is higher
    fig.suptitle(_paired_title(comparison, lead), fontsize=9.5)
    fig.tight_layout()
    return _save(fig, path, dpi=120, tight=True)


def _paired_title(comparison: dict[str, Any], lead: list[str]) -> str:
    """The comparison picture's caption: the runs, the interval, the headline metrics, the colours, and what the
    p-values and the intervals are adjusted for (:func:`ragexp.core.pairing.multiplicity_note`)."""
    from ragexp.core.pairing import multiplicity_note

    m = comparison["method"]
    level = round(100 * m["confidence"], 2)
    b, c = comparison["baseline"]["name"], comparison["candidate"]["name"]
    first = f"headline metrics first, in bold: {', '.join(lead)}\n" if lead else ""
    over = f" over the {m['clusters']} clusters of {m['cluster_by']}" if m.get("cluster_by") else ""
    return (f"{c} vs {b}: paired difference{over}, {level:g}% CI\n{first}"
            f"green/red = significantly better/worse (Holm), grey = within the noise; ↓ = lower is better\n"
            f"{multiplicity_note(comparison)}")


def _num(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.4g}"


#: The pictures of a single run (``tracking.plots``), drawn into its results folder and logged with it.
METRICS_PLOT, HISTOGRAMS_PLOT = "metrics.png", "histograms.png"
RUN_PLOT_FILES = (METRICS_PLOT, HISTOGRAMS_PLOT)
#: How many metrics the histograms and a sweep's heat map show.
HEADLINE_MAX = 8


def _ranges(keys: list[str]) -> dict[str, tuple[float, float] | None]:
    """Each metric's range from the registry (``ndcg/ndcg_at_10`` → ``ndcg``'s), None when unbounded (latency)."""
    registry = load_all()
    out: dict[str, tuple[float, float] | None] = {}
    for key in keys:
        base = key.split("/", 1)[0]
        if base == "latency":
            out[key] = None
            continue
        info = registry.get(base)
        lo, hi = info.bounds if info is not None else (0.0, 1.0)
        out[key] = (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and hi > lo else None
    return out


def _label(key: str, span: tuple[float, float]) -> str:
    """A metric's label on a fraction-of-range axis: its key, with the range's width when that is not 1."""
    return key if span[1] - span[0] == 1 else f"{key} (÷{span[1] - span[0]:g})"


def headline_metrics(keys: list[str], *, primary: str | None = None, objective: str | None = None,
                     limit: int = HEADLINE_MAX, lead: list[str] | None = None) -> list[str]:
    """The metrics a picture leads with: ``stats.primary``, the ``objective``, the run's headline metrics
    (``lead``: ``summary.json``'s ``headline``), then the suite's metrics
    in their order, one key per metric (``hit_rate/hit_rate_at_1`` stands for ``hit_rate/hit_rate_at_3``…) before any second
    cut-off, bounded metrics only (a latency is not a score); at most ``limit``."""
    ranges = _ranges(keys)
    bounded = [k for k in keys if ranges[k] is not None]
    chosen = [k for k in (primary, objective, *(lead or ())) if k and k in keys]
    seen = {k.split("/", 1)[0] for k in chosen}
    first: dict[str, str] = {}  # each metric's first key
    for k in bounded:
        first.setdefault(k.split("/", 1)[0], k)
    # then, with fewer metrics than the limit, the other cut-offs fill in
    ordered = chosen + [k for family, k in first.items() if family not in seen] + bounded
    return list(dict.fromkeys(ordered))[:limit]


def bar_order(keys: list[str], named: list[str], ranges: dict[str, Any]) -> list[str]:
    """``metrics.png``'s rows: the run's headline metrics first (as every view leads with them), then the other
    bounded metrics in the suite's order; unbounded ones (a latency) are not bars.

    >>> bar_order(["token_f1", "bleu", "avg_latency", "answer_token_f1"], ["answer_token_f1", "answer_token_f1"],
    ...           {"token_f1": (0, 1), "bleu": (0, 100), "avg_latency": None, "answer_token_f1": (0, 1)})
    ['answer_token_f1', 'token_f1', 'bleu']
    """
    bounded = [k for k in keys if ranges[k] is not None]
    first = [k for k in dict.fromkeys(named) if k in bounded]
    return first + [k for k in bounded if k not in first]


def run_plots(folder: str | Path, per_sample: Any, summary: dict[str, Any], *,
              objective: str | None = None) -> list[Path]:
    """A single run's pictures in ``folder``: ``metrics.png`` (every bounded metric's mean with its
    CI) and ``histograms.png`` (per-sample values, the headline metrics first); returns the files.
    ``per_sample``: the per-sample table as plain columns."""
    folder = Path(folder)
    intervals = summary.get("intervals") or {}
    keys = [k for k in (summary.get("metrics") or {}) if (intervals.get(k) or {}).get("mean") is not None]
    primary = (summary.get("stats") or {}).get("primary")
    headline = headline_metrics(keys, primary=primary, objective=objective, lead=summary.get("headline"))
    n = summary.get("n_samples", len(next(iter(per_sample.values()), [])))
    title = f"{summary.get('dataset', '')} · {n} samples"
    ranges = _ranges(keys)
    out = []
    # blue for the run's own headline metrics only, not the others a picture fills its rows with
    named = [k for k in (primary, objective, *(summary.get("headline") or ())) if k and k in keys] or headline[:1]
    bars = metric_bars(intervals, bar_order(keys, named, ranges), named, title, folder / METRICS_PLOT, confidence=float((summary.get("stats") or {}).get("confidence", CONFIDENCE)),
                       samples=n)
    if bars is not None:
        out.append(bars)
    hist = histograms(per_sample, headline, title, folder / HISTOGRAMS_PLOT, of=len(keys))
    if hist is not None:
        out.append(hist)
    return out


#: A run draws its pictures every time: few texts and artists (bars, whiskers and bins are one collection
#: each, one Axes per figure) and PNG's fastest compression; docs/performance.md has what they cost.
_PNG = {"compress_level": 1}


def _figure(width: float, height: float) -> Any:
    """A figure outside pyplot: no global state to close, no backend to choose (``savefig`` draws a bare
    Figure with Agg for a PNG)."""
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height))


def _title(fig: Any, height: float, text: str) -> None:
    """The figure's title at its top left (a fixed place: an Axes title is placed by measuring its ticks)."""
    fig.text(0.012, 1 - 0.12 / height, text, fontsize=10, ha="left", va="top")


def _save(fig: Any, path: str | Path, dpi: int, tight: bool = False) -> Path:
    """``fig`` as a PNG at ``path`` (``tight``: cropped to what is drawn, at the cost of drawing twice)."""
    path = Path(path)
    fig.savefig(path, format="png", dpi=dpi, pil_kwargs=_PNG, bbox_inches="tight" if tight else None)
    return path


def metric_bars(intervals: dict[str, Any], keys: list[str], headline: list[str], title: str, path: str | Path, *,
                confidence: float = CONFIDENCE, samples: int | None = None) -> Path | None:
    """One horizontal bar per metric (its mean, as a fraction of its range when that is not [0, 1]) with
    its confidence interval as a whisker and its mean written beside it, with ``n=`` where the metric
    is over fewer than the run's ``samples`` (the title says so); headline metrics blue."""
    if not keys:
        return None
    from matplotlib.collections import LineCollection, PolyCollection

    ranges = _ranges(keys)
    height = 1.1 + 0.26 * len(keys)
    fig = _figure(9, height)
    ax = fig.add_axes((0.2, 0.55 / height, 0.5, 1 - 1.0 / height))  # fixed margins: no layout pass
    across = ax.get_yaxis_transform()  # x in axes fractions, y in rows
    boxes, colours, whiskers = [], [], []
    for i, key in enumerate(keys):
        y = len(keys) - 1 - i
        iv = intervals[key]
        lo_r, hi_r = ranges[key]
        width = hi_r - lo_r
        mean = (iv["mean"] - lo_r) / width
        boxes.append([(0, y - 0.31), (mean, y - 0.31), (mean, y + 0.31), (0, y + 0.31)])
        colours.append("tab:blue" if key in headline else "0.62")
        if iv.get("ci_low") is not None and iv.get("ci_high") is not None:
            low, high = (iv["ci_low"] - lo_r) / width, (iv["ci_high"] - lo_r) / width
            whiskers += [[(low, y), (high, y)], [(low, y - 0.12), (low, y + 0.12)], [(high, y - 0.12), (high, y + 0.12)]]
        text = _num(iv["mean"]) + (f"  n={iv.get('n')}" if samples is None or iv.get("n") != samples else "")
        ax.text(-0.015, y, _label(key, ranges[key]), transform=across, ha="right", va="center", fontsize=8)
        ax.text(1.015, y, text, transform=across, ha="left", va="center", fontsize=7.5, color="0.2")
    ax.add_collection(PolyCollection(boxes, facecolors=colours, edgecolors="none", alpha=0.85))
    ax.add_collection(LineCollection(whiskers, colors="0.15", linewidths=1))
    ax.set_ylim(-0.6, len(keys) - 0.4)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    level = round(100 * confidence, 2)
    _fraction_axis(ax, f"mean (bar, value at the right) with its {level:g}% CI (whisker), as a fraction of the "
                       f"metric's range", 9)
    over = f"; each over all {samples} samples unless n= says" if samples is not None else ""
    _title(fig, height, f"{title}: every metric, the headline ones first and blue{over}")
    return _save(fig, path, dpi=100)


def _fraction_axis(ax: Any, label: str, fontsize: float) -> None:
    """The x axis of a fraction of each metric's range, 0 to 1, under rows with no y ticks."""
    ax.set_xlim(0, 1)
    ax.set_yticks([])
    ax.set_xticks([0, 0.2, 0.4, 0.6, 0.8, 1], ["0", "0.2", "0.4", "0.6", "0.8", "1"])
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    ax.set_xlabel(label, fontsize=fontsize)


def histograms(per_sample: dict[str, list], keys: list[str], title: str, path: str | Path, *, of: int | None = None
               ) -> Path | None:
    """How the per-sample values of the headline metrics spread: one row per metric, its values in ten
    bins over the metric's range (``ok`` samples only), bars scaled to the row's tallest bin (its count
    at the right), the mean as a dashed line; the row says the mean, n, and how many had no value.
    ``per_sample``: plain columns; ``of``: how many metric keys the run has (the title
    says these are the first ``len(keys)`` of them)."""
    from ragexp.results.columns import status_column

    ranges = _ranges(keys)
    total = len(next(iter(per_sample.values()), []))
    rows = []
    for key in keys:
        values, statuses = per_sample.get(key), per_sample.get(status_column(key))
        if values is None or ranges[key] is None:
            continue
        kept = [float(v) for i, v in enumerate(values) if v is not None and not (isinstance(v, float) and math.isnan(v))
                and (statuses is None or statuses[i] == "ok")]
        rows.append((key, kept, total - len(kept)))
    if not rows:
        return None
    import numpy as np
    from matplotlib.collections import LineCollection, PolyCollection

    height = 1.05 + 0.62 * len(rows)
    fig = _figure(8, height)
    ax = fig.add_axes((0.25, 0.55 / height, 0.66, 1 - 1.0 / height))
    across = ax.get_yaxis_transform()
    bins, means = [], []
    for i, (key, values, without) in enumerate(rows):
        base = len(rows) - 1 - i
        lo, hi = ranges[key]
        counts = np.histogram(values, bins=10, range=(lo, hi))[0].tolist()
        tallest = max(counts)
        for j, count in enumerate(counts):
            if count:
                top = base + 0.8 * count / tallest
                bins.append([(j / 10 + 0.004, base), (j / 10 + 0.096, base), (j / 10 + 0.096, top),
                             (j / 10 + 0.004, top)])
        if values:
            mean = sum(values) / len(values)
            x = (mean - lo) / (hi - lo)
            means.append([(x, base), (x, base + 0.9)])
            head = f"mean {_num(mean)}, n={len(values)}"
        else:
            head = "no value"
        if without:
            head += f" ({without} without)"
        ax.text(-0.02, base + 0.4, f"{_label(key, (lo, hi))}\n{head}", transform=across, ha="right", va="center", fontsize=8)
        if tallest:
            ax.text(1.01, base + 0.8, str(tallest), transform=across, ha="left", va="center", fontsize=7.5,
                    color="0.3")
    ax.add_collection(PolyCollection(bins, facecolors="tab:blue", edgecolors="none", alpha=0.85))
    ax.add_collection(LineCollection(means, colors="0.1", linewidths=1.1, linestyles=(0, (3, 2))))
    ax.add_collection(LineCollection([[(0, b), (1, b)] for b in range(len(rows))], colors="0.55", linewidths=0.6))
    ax.set_ylim(-0.1, len(rows))
    ax.tick_params(labelsize=8)
    _fraction_axis(ax, "per-sample value, as a fraction of the metric's range (10 bins); at the right: the samples "
                       "in the row's tallest bin", 8)
    shown = f" ({len(rows)} of the run's {of} metric keys)" if of and of > len(rows) else ""
    _title(fig, height, f"{title}: per-sample values, the headline metrics first{shown}")
    return _save(fig, path, dpi=100)


def cell_shade(value: float, lo: float, hi: float, higher: bool, mark: str | None) -> float | None:
    """A heat-map cell's place on the colour scale (0.15 light … 0.9 dark, dark = better), from its value within
    its column's [lo, hi] and what the sweep's paired test says of the child against the column's best (``mark``):
    ``"best"`` the darkest; ``"differs"`` its value's place in [lo, hi] on 0.15 … 0.65, well apart from the best's;
    ``"noise"`` (not significantly
    different from the best) and no mark (not tested) get no place on the scale (None): they are drawn neutral,
    so that no colour shows a difference the test did not find.

    >>> cell_shade(0.5, 0.48, 0.5, True, "best"), cell_shade(0.49, 0.48, 0.5, True, "noise")
    (0.9, None)
    >>> cell_shade(0.5, 0.2, 0.5, True, "differs")  # a tie in value, yet the test says it differs
    0.65
    >>> cell_shade(0.35, 0.2, 0.5, True, "differs"), cell_shade(0.35, 0.2, 0.5, True, None)  # 0.15 + 0.5 * 0.5
    (0.4, None)
    """
    if mark == "best":
        return 0.9
    if mark != "differs":
        return None
    share = ((value - lo) / (hi - lo) if higher else (hi - value) / (hi - lo)) if hi > lo else 0.5
    return round(0.15 + 0.5 * share, 6)


#: how the heat map draws a cell the test found within the noise of its column's best, and an untested one
_NOISE_FILL, _NOISE_HATCH, _UNTESTED_FILL = "0.93", "////", "white"


def heatmap(rows: list[tuple[str, dict[str, Any] | None]], keys: list[str], title: str,
            path: str | Path, marks: list[dict[str, str]] | None = None) -> Path | None:
    """A sweep as a table: one row per child (its label), one column per headline metric, each cell the child's
    mean, annotated. ``marks``: per row, per key, what the sweep's paired test says of the child against that
    metric's best (``best``, ``noise``, ``differs``). In a column the test covered, the best is dark, a child that
    differs is shaded by its value (lighter is worse, direction-aware), a child within the noise of the best is
    grey and hatched ("≈ best"), a child not compared white; a column no test covered is white throughout and
    its heading says "not tested" (:func:`cell_shade`). A legend under the table says so. A child without the
    value is blank. The column heading gives n when every child has the same, else each cell does."""
    if not rows or not keys:
        return None
    import matplotlib
    from matplotlib.patches import Rectangle

    cmap = matplotlib.colormaps["YlGnBu"]
    means = [[((iv or {}).get(k) or {}).get("mean") for k in keys] for _, iv in rows]
    ns = [[((iv or {}).get(k) or {}).get("n") for k in keys] for _, iv in rows]
    width = max(6.0, 1.25 * len(keys) + 2.8)
    ax = (fig := _figure(width, 1.3 + 0.42 * len(rows))).subplots()  # the legend is added under it (tight)
    headings, untested = [], 0
    kinds = cell_kinds(keys, marks or [{} for _ in rows])
    for j, key in enumerate(keys):
        column = [m[j] for m in means if m[j] is not None]
        col_ns = {n[j] for n, m in zip(ns, means) if m[j] is not None}
        tested = any(k[j] != "not tested" for k in kinds)
        higher = direction(key)[0]
        lo, hi = (min(column), max(column)) if column else (0.0, 1.0)
        for i, m in enumerate(means):
            if m[j] is None:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="0.85"))
                ax.text(j, i, "—", ha="center", va="center", fontsize=8, color="0.5")
                continue
            _cell(ax, j, i, cmap, cell_shade(m[j], lo, hi, higher, kinds[i][j]), kinds[i][j],
                  _num(m[j]) + (f"\nn={ns[i][j]}" if len(col_ns) > 1 else ""))
        untested += not tested or any(k[j] == "not compared" for k in kinds)
        arrow = "" if higher else " ↓"
        headings.append(f"{key}{arrow}" + (f"\nn={col_ns.pop()}" if len(col_ns) == 1 else "")
                        + ("" if tested else "\nnot tested"))
    ax.set_xlim(-0.5, len(keys) - 0.5)
    ax.set_ylim(len(rows) - 0.5, -0.5)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(headings, fontsize=8, rotation=30, ha="left")
    ax.xaxis.tick_top()
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([_short_label(label) for label, _ in rows], fontsize=8.5)
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.set_title(f"{title}\nmean per child; in a tested column the colour says where the child stands against the "
                 "column's best (paired test, Holm-adjusted); ↓: lower is better", fontsize=9.5, loc="left", pad=12)
    _heatmap_legend(ax, cmap, untested)
    return _save(fig, path, dpi=120, tight=True)


def cell_kinds(keys: list[str], marks: list[dict[str, str]]) -> list[list[str]]:
    """Per row, per key, what a heat-map cell shows: ``best``, ``differs`` or ``noise`` (``marks``: the sweep's paired
    test against the column's best), ``not compared`` (a child the test left out, in a column it covered) or
    ``not tested`` (a column no test covered: a lone best is no test).

    >>> cell_kinds(["f1", "recall"], [{"f1": "best", "recall": "best"}, {"f1": "noise"}, {}])
    [['best', 'not tested'], ['noise', 'not tested'], ['not compared', 'not tested']]
    """
    tested = {k for k in keys if any(m.get(k) in ("differs", "noise") for m in marks)}
    return [[m.get(k) or "not compared" if k in tested else "not tested" for k in keys] for m in marks]


def _cell(ax: Any, x: int, y: int, cmap: Any, shade: float | None, kind: str, text: str) -> None:
    """One heat-map cell: coloured by ``shade``, else neutral (hatched grey within the noise, white untested)."""
    from matplotlib.patches import Rectangle

    if shade is not None:
        rgba = cmap(shade)
        ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=rgba, edgecolor="white"))
        dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5
        ax.text(x, y, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        return
    noise = kind == "noise"
    ax.add_patch(Rectangle((x - 0.5, y - 0.5), 1, 1, facecolor=_NOISE_FILL if noise else _UNTESTED_FILL,
                           edgecolor="0.75", hatch=_NOISE_HATCH if noise else None, linewidth=0.6))
    said = " ≈ best" if noise else "\nnot compared" if kind == "not compared" else ""
    ax.text(x, y, text.replace("\n", said + "\n", 1) if "\n" in text and noise else text + said, ha="center",
            va="center", fontsize=8, color="black" if noise else "0.25",
            bbox={"facecolor": _NOISE_FILL, "edgecolor": "none", "pad": 1.5} if noise else None)


def _heatmap_legend(ax: Any, cmap: Any, untested: int) -> None:
    """The heat map's key, under the table: what each kind of cell means."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=cmap(0.9), label="best in its column"),
               Patch(facecolor=cmap(0.45), label="differs from the best (significant); lighter is further behind"),
               Patch(facecolor=_NOISE_FILL, hatch=_NOISE_HATCH, edgecolor="0.6",
                     label="≈ best: the difference from the best is not significant (within the noise)")]
    if untested:
        handles.append(Patch(facecolor=_UNTESTED_FILL, edgecolor="0.6",
                             label="not tested (no paired test on this column, or the child was left out): "
                                   "values only, not shaded"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(0, -0.02), ncol=1, fontsize=8, frameon=False,
              handlelength=2.4, handleheight=1.3)


def sweep_heatmap(board: dict[str, Any], summaries: dict[str, dict[str, Any] | None], metric: str,
                  path: str | Path) -> Path | None:
    """The metric-by-config heat map of a sweep: the board's rows (best first, labelled by the overrides
    that tell them apart) against the headline metrics (the board's metric first), each child's mean."""
    keys: list[str] = []
    for s in summaries.values():
        keys += [k for k in (s or {}).get("metrics") or {} if k not in keys]
    rows = [(str(r.get("label") or r["run_name"]), (summaries.get(r["run_id"]) or {}).get("intervals"))
            for r in board["rows"]]
    marks = [{k: "best" if o.get("best") else "differs" if o.get("differs") else "noise"
              for k, o in {board.get("metric", metric): r, **(r.get("also") or {})}.items()
              if o.get("best") or o.get("differs") is not None} for r in board["rows"]]  # none: not tested
    return heatmap(rows, headline_metrics(keys, primary=metric, lead=board.get("headline")),
                   f"Sweep of {len(rows)} runs" + (f" (paired tests{clustered_words(board)})" if clustered_words(board)
                                                    else ""), path, marks)


def clustered_words(board: dict[str, Any]) -> str:
    """`` over the 10 clusters of conversation_id`` when the board's paired tests were over clusters, else empty.

    >>> clustered_words({"cluster_by": "conversation_id", "rows": [{"best": True}, {"clusters": 10}]})
    ' over the 10 clusters of conversation_id'
    >>> clustered_words({"rows": [{"best": True}, {"p_value": 0.2}]})
    ''
    """
    counts = sorted({int(r["clusters"]) for r in board.get("rows") or () if r.get("clusters") is not None})
    return f" over the {'/'.join(map(str, counts))} clusters of {board['cluster_by']}" \
        if board.get("cluster_by") and counts else ""


#: the agreement picture of a run with human labels (docs/judge-trust.md)
CONFUSION_PLOT = "agreement_confusion.png"


def confusion_plot(agreement: dict[str, Any], path: str | Path) -> Path | None:
    """One panel per labelled metric: the counts of (people's value, the judge's value), rows people,
    columns the judge, the diagonal of equal values outlined; the panel's title gives the headline
    statistic with its interval and the number of labels. At most 30 levels a side are drawn."""
    entries = [(k, e) for k, e in agreement.items() if e.get("n") and e.get("confusion")
               and len(e["human_levels"]) <= 30 and len(e["judge_levels"]) <= 30]
    if not entries:
        return None
    import numpy as np
    from matplotlib.patches import Rectangle

    size = [max(len(e["judge_levels"]), len(e["human_levels"])) for _, e in entries]
    side = [min(7.0, 1.6 + 0.45 * s) for s in size]
    total = max(4.5, sum(side) + 0.4 * len(entries))
    fig = _figure(total, max(side) + 0.9)
    x = 0.0
    for (key, e), w in zip(entries, side):
        ax = fig.add_axes([(x + 0.9) / total, 0.14, (w - 1.0) / total, 0.68])
        x += w + 0.4
        table = np.array(e["confusion"], dtype=float)
        ax.imshow(table, cmap="Blues", aspect="auto", vmin=0, vmax=max(1.0, table.max()))
        for (i, j), v in np.ndenumerate(table):
            if v:
                ax.text(j, i, f"{int(v)}", ha="center", va="center", fontsize=7,
                        color="white" if v > 0.6 * table.max() else "black")
        hv, jv = e["human_levels"], e["judge_levels"]
        for i, h in enumerate(hv):
            if h in jv:  # the diagonal of equal values, outlined
                ax.add_patch(Rectangle((jv.index(h) - 0.5, i - 0.5), 1, 1, fill=False, edgecolor="0.3", linewidth=0.8))
        ax.set_xticks(range(len(jv)), [f"{v:g}" for v in jv], fontsize=7, rotation=90 if len(jv) > 8 else 0)
        ax.set_yticks(range(len(hv)), [f"{v:g}" for v in hv], fontsize=7)
        ax.set_xlabel("keyword verdict" if e.get("against") else "judge", fontsize=8)  # a rule, not a judge
        ax.set_ylabel("people", fontsize=8)
        iv = e["statistics"][e["headline"]]
        stat = e["headline"].replace("_", " ")
        interval = f" [{iv['ci_low']:.2f}, {iv['ci_high']:.2f}]" if iv.get("ci_low") is not None else ""
        head = "—" if iv.get("mean") is None else f"{iv['mean']:.2f}"
        ax.set_title(f"{_short_label(key, 34)}\n{stat} {head}{interval}, n={e['n']}", fontsize=8, loc="left")
    return _save(fig, path, dpi=100)
