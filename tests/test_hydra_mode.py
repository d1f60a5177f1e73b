"""``python -m ragexp`` skips Hydra's first compose (``Hydra.get_mode``, which reads only ``hydra.mode``)
when nothing can set ``hydra.mode``, and asks Hydra when something can: the mode it runs in is always
the mode stock Hydra picks."""

from __future__ import annotations

import pytest
from cli import run_cli

from ragexp.cli.main import _mode_from_the_command_line, _mode_is_settable
from ragexp.common.paths import conf_dir


@pytest.fixture
def hydra_pair(monkeypatch, tmp_path):
    """Stock ``Hydra.get_mode`` and ragexp's, on a real Hydra over ragexp's configs plus ``tmp_path``
    (a user's ``--config-dir``)."""
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.global_hydra import GlobalHydra
    from hydra.core.config_search_path import SearchPathQuery

    from ragexp.cli.plugins import expose_plugins

    expose_plugins()
    stock = Hydra.get_mode
    monkeypatch.setattr(Hydra, "get_mode", stock)  # restored after the test
    _mode_from_the_command_line()
    ours = Hydra.get_mode
    assert ours is not stock
    search_path = create_config_search_path(str(conf_dir()))
    search_path.prepend(provider="command-line", path=f"file://{tmp_path}",  # where --config-dir puts it
                        anchor=SearchPathQuery(provider="schema"))
    hydra = Hydra.create_main_hydra2(task_name="ragexp", config_search_path=search_path)
    yield hydra, stock, ours, search_path, tmp_path
    GlobalHydra.instance().clear()


def _experiment(folder, name: str, text: str) -> None:
    (folder / "experiment").mkdir(exist_ok=True)
    (folder / "experiment" / f"{name}.yaml").write_text(text)


def test_ragexps_own_configs_cannot_set_the_mode_so_hydra_is_not_asked(hydra_pair):
    hydra, stock, ours, search_path, _ = hydra_pair
    for overrides in ([], ["dataset.system=strong,weak"], ["judge.model=x", "hydra/launcher=joblib"]):
        assert not _mode_is_settable(search_path, overrides), overrides
        assert ours(hydra, "config", overrides) is None
        assert stock(hydra, "config", overrides) is None  # what Hydra's compose says too


def test_whatever_could_set_the_mode_is_left_to_hydra(hydra_pair):
    from hydra.types import RunMode

    hydra, stock, ours, search_path, folder = hydra_pair
    _experiment(folder, "sweeps", "# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    _experiment(folder, "relocated", "# @package hydra\nmode: MULTIRUN\n")
    _experiment(folder, "runs", "# @package _global_\nhydra:\n  mode: RUN\n")
    cases = {
        ("hydra.mode=MULTIRUN",): RunMode.MULTIRUN,
        ("+experiment=sweeps",): RunMode.MULTIRUN,
        ("+experiment=relocated",): RunMode.MULTIRUN,
        ("+experiment=runs",): RunMode.RUN,
        ("+hydra.searchpath=[file:///nowhere]",): None,
    }
    assert _mode_is_settable(search_path, [])  # the files above are in the search path: Hydra is asked
    for overrides, mode in cases.items():
        assert _mode_is_settable(search_path, list(overrides)), overrides
        assert stock(hydra, "config", list(overrides)) == mode, overrides
        assert ours(hydra, "config", list(overrides)) == mode, overrides


def test_a_mode_key_deeper_down_cannot_be_hydras_and_is_not_read_as_it(hydra_pair):
    hydra, stock, ours, search_path, folder = hydra_pair
    _experiment(folder, "deep", "# @package _global_\nretriever:\n  mode: hybrid\nhydra:\n  job:\n    mode: x\n")
    (folder / "notes.yaml").write_text("# a mode word in a comment, a model key\nmodel: gpt\n")
    assert not _mode_is_settable(search_path, ["+experiment=deep"])
    assert stock(hydra, "config", ["+experiment=deep"]) is None
    _experiment(folder, "escaped", '"hydra":\n  "mo\\x64e": MULTIRUN\n')  # an escape spelling 'mode'
    assert _mode_is_settable(search_path, [])


@pytest.mark.integration
def test_a_user_config_that_sets_multirun_sweeps_as_with_stock_hydra(tmp_path):
    """The CLI: an experiment file with ``hydra.mode: MULTIRUN`` and a sweep override without ``-m``
    runs two jobs (stock Hydra's behaviour); without that file the same command is a RUN and Hydra
    refuses the comma list."""
    confs = tmp_path / "confs"
    confs.mkdir()
    _experiment(confs, "sweep_systems", "# @package _global_\nhydra:\n  mode: MULTIRUN\n")
    args = ("--config-dir", str(confs), "dataset.system=strong,weak", "progress=false", "tracking.plots=false")
    swept = run_cli(*args, "+experiment=sweep_systems", cwd=tmp_path, timeout=300)
    assert swept.stdout.count("· job ") == 2, swept.stdout
    assert len([p for p in (tmp_path / "multirun").glob("*/*/[01]") if p.is_dir()]) == 2
    refused = run_cli(*args, cwd=tmp_path, timeout=300, check=False)
    assert refused.returncode == 2 and "Ambiguous value for argument" in refused.stderr, refused.stderr
