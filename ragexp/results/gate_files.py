"""A sweep job's missed gate floors, left in its output folder, and read back at the sweep's end from every
job's folder, whichever process ran the job (basic, joblib, Ray launchers). The lines are
:func:`ragexp.core.gate.floor_failures`'."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

#: in a multirun, a job that missed a floor leaves its lines in this file of its output folder
FAILED_FILE = "gate_failed.txt"


def record_failures(lines: Sequence[str], folder: Path) -> None:
    """Leave a job's missed floors in its output folder, for :func:`collect_failures` at the sweep's end."""
    if lines:
        (folder / FAILED_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")


def collect_failures(sweep_dir: str | Path) -> list[str]:
    """The missed floors every job of a sweep left in its folder."""
    return [line for f in sorted(Path(sweep_dir).glob(f"*/{FAILED_FILE}"))
            for line in f.read_text(encoding="utf-8").splitlines() if line]
