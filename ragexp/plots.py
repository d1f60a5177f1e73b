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


def save_png(fig: Any, path: str | Path) -> Path:
    """Write ``fig`` to ``path`` as a PNG readable in the MLflow UI, then free it."""
    plt = pyplot()
    path = Path(path)
    fig.savefig(path, format="png", dpi=120, bbox_inches="tight")
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
