"""PNG figures for the MLflow artifact view, drawn headless (matplotlib's Agg backend).

matplotlib is imported on first use, never when ragexp is imported, and always on Agg: a CI
job or an ssh session has no display, and the figure only has to become a file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any


def pyplot() -> Any:
    """``matplotlib.pyplot``, set to the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save_png(fig: Any, path: str | Path, *, tight: bool = True, dpi: int = 120) -> Path:
    """Write ``fig`` to ``path`` as a PNG readable in the MLflow UI, then free it (``tight``: cropped to
    what is drawn, at the cost of drawing twice)."""
    plt = pyplot()
    path = Path(path)
    fig.savefig(path, format="png", dpi=dpi, bbox_inches="tight" if tight else None)
    plt.close(fig)
    return path


def forest_plot(board: dict[str, Any], path: str | Path) -> Path:
    """A sweep's leaderboard as a forest plot: one line per child run, best at the top.

    Each run's mean is a dot with its confidence interval as a bar; the best run is blue, a
    run whose paired difference from the best is significant (Holm-adjusted) is red, one that
    cannot be told apart from the best is grey. A dashed line marks the best mean; the text at
    the right gives mean [low, high], n and the adjusted p-value.
    """
    plt = pyplot()
    rows = [r for r in board["rows"] if r.get("mean") is not None]
    level = round(100 * float(board.get("confidence", 0.95)), 2)
    height = 1.2 + 0.42 * len(rows)
    fig, ax = plt.subplots(figsize=(10, height))
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
    best = next((r for r in rows if r.get("best")), None)
    if best is not None:
        ax.axvline(best["mean"], color="tab:blue", linestyle="--", linewidth=0.9, alpha=0.6)
    ax.set_yticks(ys)
    ax.set_yticklabels([_short_label(r.get("label") or r["run_name"]) for r in rows], fontsize=9)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    # annotations in a text column right of the axes
    for y, r in zip(ys, rows):
        text = _num(r["mean"])
        if r.get("ci_low") is not None:
            text += f" [{_num(r['ci_low'])}, {_num(r['ci_high'])}]"
        text += f"  n={r.get('n')}"
        if r.get("best"):
            text += "  best"
        elif r.get("p_holm") is not None:
            text += f"  p={r['p_holm']:.2g}" + (" differs" if r.get("differs") else " within noise")
        ax.annotate(text, xy=(1.01, y), xycoords=("axes fraction", "data"), va="center", fontsize=8.5,
                    color="0.2")
    direction = "higher is better" if board.get("higher_is_better", True) else "lower is better"
    ax.set_xlabel(f"{board['metric']}: mean and {level:g}% CI ({direction})")
    ax.set_title(f"Sweep leaderboard on {board['metric']} — red: differs from the best "
                 f"(paired, Holm-adjusted), grey: within noise", fontsize=10, loc="left")
    ax.grid(axis="x", alpha=0.3)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return save_png(fig, path)


def _short_label(name: str, width: int = 48) -> str:
    name = str(name)
    return name if len(name) <= width else name[: width - 1] + "…"


def plot_paired_differences(comparison: dict[str, Any], path: str | Path) -> Path | None:
    """The comparison as a picture: per metric, candidate − baseline with its CI, and the zero line.

    Green: significantly better, red: significantly worse (direction-aware), grey: within the
    noise. Metrics bounded to a range other than [0, 1] (``bleu`` 0–100) are drawn as a fraction
    of their range, said in their label; unbounded ones (``avg_latency``) get a panel of their
    own in their own unit. Returns None when no metric was compared.
    """
    import math

    from .metrics.base import load_all

    registry = load_all()
    rows = [r for r in comparison["metrics"].values() if r.get("diff") is not None]
    if not rows:
        return None
    bounded, unbounded = [], []
    for r in rows:
        info = registry.get(r["key"].split("/", 1)[0])
        lo, hi = info.bounds if info is not None else (0.0, 1.0)
        width = hi - lo
        if math.isfinite(width) and width > 0:
            label = r["key"] if width == 1 else f"{r['key']} (÷{width:g})"
            bounded.append((label, r, width))
        else:
            unbounded.append((r["key"], r, 1.0))
    panels = [p for p in (bounded, unbounded) if p]
    plt = pyplot()
    heights = [max(1.2, 0.32 * len(p) + 0.6) for p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(7.5, sum(heights) + 0.9), squeeze=False,
                             gridspec_kw={"height_ratios": heights})
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
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        unit = "own unit" if panel is unbounded else "fraction of the metric's range"
        ax.set_xlabel(f"candidate − baseline ({unit})")
        left, right = ax.get_xlim()
        edge = max(abs(left), abs(right))
        ax.set_xlim(-edge, edge)  # zero in the middle: left is lower, right is higher
    level = round(100 * comparison["method"]["confidence"], 2)
    b, c = comparison["baseline"]["name"], comparison["candidate"]["name"]
    fig.suptitle(f"{c} vs {b}: paired difference, {level:g}% CI\n"
                 f"green/red = significantly better/worse (Holm), grey = within the noise; ↓ = lower is better",
                 fontsize=9.5)
    fig.tight_layout()
    return save_png(fig, path)


def _num(value: float) -> str:
    return f"{value:.4f}" if abs(value) < 10 else f"{value:.4g}"


#: The pictures of a single run (``tracking.plots``), drawn into its results folder and logged with it.
METRICS_PLOT, HISTOGRAMS_PLOT, HEATMAP_PLOT = "metrics.png", "histograms.png", "heatmap.png"
RUN_PLOT_FILES = (METRICS_PLOT, HISTOGRAMS_PLOT)
#: How many metrics the histograms and a sweep's heat map show.
HEADLINE_MAX = 8


def _range(key: str) -> tuple[float, float] | None:
    """The metric's range from the registry (``ndcg/k10`` → ``ndcg``'s), None when unbounded (latency)."""
    import math

    from .metrics.base import load_all

    base = key.split("/", 1)[0]
    if base == "latency":
        return None
    info = load_all().get(base)
    lo, hi = info.bounds if info is not None else (0.0, 1.0)
    return (lo, hi) if math.isfinite(lo) and math.isfinite(hi) and hi > lo else None


def headline_metrics(keys: list[str], *, primary: str | None = None, objective: str | None = None,
                     limit: int = HEADLINE_MAX) -> list[str]:
    """The metrics a picture leads with: ``stats.primary``, the ``objective``, then the suite's metrics
    in their order, one key per metric (``hit_rate/k1`` stands for ``hit_rate/k3``…) before any second
    cut-off, bounded metrics only (a latency is not a score); at most ``limit``."""
    bounded = [k for k in keys if _range(k) is not None]
    chosen = [k for k in (primary, objective) if k and k in keys]
    seen = {k.split("/", 1)[0] for k in chosen}
    for k in bounded:
        if len(chosen) >= limit:
            break
        if k not in chosen and k.split("/", 1)[0] not in seen:
            chosen.append(k)
            seen.add(k.split("/", 1)[0])
    for k in bounded:  # fewer families than the limit: the other cut-offs fill in
        if len(chosen) >= limit:
            break
        if k not in chosen:
            chosen.append(k)
    return chosen[:limit]


def run_plots(folder: str | Path, per_sample: Any, summary: dict[str, Any], *,
              objective: str | None = None) -> list[Path]:
    """A single run's pictures in ``folder``: ``metrics.png`` (every bounded metric's mean with its
    CI) and ``histograms.png`` (the per-sample values of the headline metrics); returns the files."""
    folder = Path(folder)
    intervals = summary.get("intervals") or {}
    keys = [k for k in (summary.get("metrics") or {}) if (intervals.get(k) or {}).get("mean") is not None]
    primary = (summary.get("stats") or {}).get("primary")
    headline = headline_metrics(keys, primary=primary, objective=objective)
    title = f"{summary.get('dataset', '')} · {summary.get('n_samples', len(per_sample))} samples"
    out = []
    bars = metric_bars(intervals, [k for k in keys if _range(k) is not None], headline, title,
                       folder / METRICS_PLOT, confidence=float((summary.get("stats") or {}).get("confidence", 0.95)))
    if bars is not None:
        out.append(bars)
    hist = histograms(per_sample, headline, title, folder / HISTOGRAMS_PLOT)
    if hist is not None:
        out.append(hist)
    return out


def metric_bars(intervals: dict[str, Any], keys: list[str], headline: list[str], title: str, path: str | Path, *,
                confidence: float = 0.95) -> Path | None:
    """One horizontal bar per metric (its mean, as a fraction of its range when that is not [0, 1]) with
    its confidence interval as an error bar and ``mean [low, high] n=`` beside it; headline metrics blue."""
    if not keys:
        return None
    plt = pyplot()
    height = 1.1 + 0.26 * len(keys)
    fig, ax = plt.subplots(figsize=(9, height))
    ys = list(range(len(keys)))[::-1]
    means, err_lo, err_hi, labels, texts = [], [], [], [], []
    for key in keys:
        iv = intervals[key]
        lo_r, hi_r = _range(key)
        width = hi_r - lo_r
        mean = (iv["mean"] - lo_r) / width
        means.append(mean)
        if iv.get("ci_low") is not None and iv.get("ci_high") is not None:
            err_lo.append(max(mean - (iv["ci_low"] - lo_r) / width, 0))
            err_hi.append(max((iv["ci_high"] - lo_r) / width - mean, 0))
            text = f"{_num(iv['mean'])} [{_num(iv['ci_low'])}, {_num(iv['ci_high'])}]"
        else:
            err_lo.append(0)
            err_hi.append(0)
            text = _num(iv["mean"])
        texts.append(f"{text}  n={iv.get('n')}")
        labels.append(key if (lo_r, hi_r) == (0.0, 1.0) else f"{key} (÷{width:g})")
    colours = ["tab:blue" if k in headline else "0.62" for k in keys]
    ax.barh(ys, means, height=0.62, color=colours, alpha=0.85)  # one call each: drawing is the cost here
    ax.errorbar(means, ys, xerr=[err_lo, err_hi], fmt="none", ecolor="0.15", elinewidth=1, capsize=2.5)
    for y, text in zip(ys, texts):
        ax.text(1.01, y, text, transform=ax.get_yaxis_transform(), va="center", fontsize=7.5, color="0.2")
    ax.set_yticks(ys)
    ax.set_yticklabels(labels, fontsize=8)
    ax.set_ylim(-0.6, len(keys) - 0.4)
    ax.set_xlim(0, 1)
    ax.grid(axis="x", alpha=0.3)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    level = round(100 * confidence, 2)
    ax.set_xlabel(f"mean with its {level:g}% CI (as a fraction of the metric's range)")
    ax.set_title(f"{title}: every metric (blue: the headline metrics)", fontsize=10, loc="left")
    # fixed margins rather than a tight bounding box: measuring the text costs a second drawing
    fig.subplots_adjust(left=0.2, right=0.7, top=1 - 0.45 / height, bottom=0.55 / height)
    return save_png(fig, path, tight=False, dpi=100)


def histograms(per_sample: Any, keys: list[str], title: str, path: str | Path) -> Path | None:
    """One panel per headline metric: how its per-sample values spread (``ok`` samples only; the panel
    says how many, and how many had no value), with the mean as a dashed line."""
    import math

    from .results import status_column

    panels = []
    for key in keys:
        if key not in per_sample.columns:
            continue
        statuses = per_sample[status_column(key)] if status_column(key) in per_sample.columns else None
        values = [float(v) for i, v in enumerate(per_sample[key])
                  if v is not None and not (isinstance(v, float) and math.isnan(v))
                  and (statuses is None or statuses.iloc[i] == "ok")]
        panels.append((key, values, len(per_sample) - len(values)))
    if not panels:
        return None
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    cols = min(4, len(panels))
    rows = math.ceil(len(panels) / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.1 * cols, 2.5 * rows + 0.5), squeeze=False)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax, (key, values, without) in zip(axes.flat, panels):
        lo, hi = _range(key)
        bins = [lo + (hi - lo) * i / 10 for i in range(11)]
        if values:
            ax.hist(values, bins=bins, color="tab:blue", alpha=0.85, edgecolor="white")
            mean = sum(values) / len(values)
            ax.axvline(mean, color="0.15", linestyle="--", linewidth=1)
            head = f"mean {_num(mean)}, n={len(values)}"
        else:
            head = "no value"
        if without:
            head += f" ({without} without)"
        ax.set_title(f"{key}\n{head}", fontsize=8.5)
        ax.set_xlim(lo, hi)
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # counts of samples
        ax.tick_params(labelsize=7.5)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0, 0].set_ylabel("samples", fontsize=8)
    fig.suptitle(f"{title}: per-sample values of the headline metrics", fontsize=10, x=0.01, ha="left")
    fig.subplots_adjust(left=0.06, right=0.98, top=1 - 0.75 / (2.5 * rows + 0.5), bottom=0.35 / (2.5 * rows + 0.5),
                        hspace=0.55, wspace=0.3)
    return save_png(fig, path, tight=False, dpi=100)


def heatmap(rows: list[tuple[str, dict[str, Any] | None]], keys: list[str], title: str,
            path: str | Path) -> Path | None:
    """A sweep as a table of colours: one row per child (its label), one column per headline metric,
    each cell the child's mean, annotated. Colour per column, from that column's worst (light) to its
    best (dark) child, direction-aware (a lower latency is darker); a child without the value is blank.
    The column heading gives n when every child has the same, else each cell does."""
    from .metrics.base import direction

    if not rows or not keys:
        return None
    plt = pyplot()
    import matplotlib.colors as mcolors

    cmap = plt.get_cmap("YlGnBu")
    means = [[((iv or {}).get(k) or {}).get("mean") for k in keys] for _, iv in rows]
    ns = [[((iv or {}).get(k) or {}).get("n") for k in keys] for _, iv in rows]
    width = max(6.0, 1.25 * len(keys) + 2.8)
    fig, ax = plt.subplots(figsize=(width, 1.3 + 0.42 * len(rows)))
    headings = []
    for j, key in enumerate(keys):
        column = [m[j] for m in means if m[j] is not None]
        col_ns = {n[j] for n, m in zip(ns, means) if m[j] is not None}
        higher = direction(key)[0]
        lo, hi = (min(column), max(column)) if column else (0.0, 1.0)
        norm = mcolors.Normalize(lo, hi if hi > lo else lo + 1)
        for i, m in enumerate(means):
            if m[j] is None:
                ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="white", edgecolor="0.85"))
                ax.text(j, i, "—", ha="center", va="center", fontsize=8, color="0.5")
                continue
            shade = 0.15 + 0.75 * (norm(m[j]) if higher else 1 - norm(m[j])) if hi > lo else 0.5
            rgba = cmap(shade)
            ax.add_patch(plt.Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor=rgba, edgecolor="white"))
            dark = 0.299 * rgba[0] + 0.587 * rgba[1] + 0.114 * rgba[2] < 0.5
            text = _num(m[j]) + (f"\nn={ns[i][j]}" if len(col_ns) > 1 else "")
            ax.text(j, i, text, ha="center", va="center", fontsize=8, color="white" if dark else "black")
        arrow = "" if higher else " ↓"
        headings.append(f"{key}{arrow}" + (f"\nn={col_ns.pop()}" if len(col_ns) == 1 else ""))
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
    ax.set_title(f"{title}\nmean per child; colour per column, darker is better (↓: lower is better)",
                 fontsize=9.5, loc="left", pad=12)
    return save_png(fig, path)
