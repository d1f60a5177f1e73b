"""The line each job of a multirun prints (the sweep's one table is its leaderboard; ``report.all=true``
prints each job's table too) says which job it belongs to: its number and overrides."""

from __future__ import annotations

import re

import pytest
from cli import run_cli

#: the console's titles are read: no per-sample traces or pictures logged (each costs CPU, nothing here reads them)
CONSOLE_ONLY = ("tracking.traces=0", "tracking.plots=false")


def _titles(stdout: str) -> list[str]:
    """The table titles, each on one line (rich wraps a long title to the table's width)."""
    text = " ".join(line.strip() for line in stdout.splitlines())
    return re.findall(r"ragexp · .*? samples", text)


@pytest.mark.integration
@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]], ids=["basic", "joblib"])
def test_each_sweep_table_names_its_job_and_overrides(data_dir, tmp_path, launcher):
    proc = run_cli("-m", *launcher, f"data_dir={data_dir}", "metric=exact_match", "dataset.system=strong,weak",
                   "progress=false", *CONSOLE_ONLY, cwd=tmp_path)
    titles = sorted(_titles(proc.stdout))  # parallel jobs print in either order
    assert len(titles) == 2, proc.stdout
    assert re.fullmatch(r"ragexp · job 0: [^·]*\bdataset\.system=strong\b[^·]* · demo · 50 samples", titles[0]), titles
    assert re.fullmatch(r"ragexp · job 1: [^·]*\bdataset\.system=weak\b[^·]* · demo · 50 samples", titles[1]), titles


@pytest.mark.integration
def test_a_single_run_table_has_no_job_label(data_dir, tmp_path):
    proc = run_cli(f"data_dir={data_dir}", "metric=exact_match", "progress=false", *CONSOLE_ONLY, cwd=tmp_path)
    assert _titles(proc.stdout) == ["ragexp · demo · 50 samples"], proc.stdout
