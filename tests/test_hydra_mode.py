"""Hydra picks the run mode as stock Hydra does: a user's config that sets ``hydra.mode: MULTIRUN`` sweeps."""

from __future__ import annotations

import pytest
from cli import run_cli


def _experiment(folder, name: str, text: str) -> None:
    (folder / "experiment").mkdir(exist_ok=True)
    (folder / "experiment" / f"{name}.yaml").write_text(text)


@pytest.mark.integration
def test_a_user_config_that_sets_multirun_sweeps_as_with_stock_hydra(tmp_path):
    """The CLI: an experiment file with ``hydra.mode: MULTIRUN`` and a sweep override without ``-m``
    runs two jobs (stock Hydra's behaviour); without that file the same command is a RUN and Hydra
    refuses the comma list."""
    confs = tmp_path / "confs"
    confs.mkdir()
    _experiment(confs, "sweep_systems", "# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    args = ("--config-dir", str(confs), "dataset.system=strong,weak", "progress=false", "tracking.plots=false",
            "tracking.traces=0")
    swept = run_cli(*args, "+experiment=sweep_systems", cwd=tmp_path, timeout=300)
    assert swept.stdout.count("· job ") == 2, swept.stdout
    assert len([p for p in (tmp_path / "multirun").glob("*/*/[01]") if p.is_dir()]) == 2
    refused = run_cli(*args, cwd=tmp_path, timeout=300, check=False)
    assert refused.returncode == 2 and "Ambiguous value for argument" in refused.stderr, refused.stderr
