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
