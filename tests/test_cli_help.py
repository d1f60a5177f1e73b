"""`python -m ragexp --help` is ragexp's own page: what it does, examples that compose, where the
config groups are with every option, how to point at one's own file, how to see the config."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from cli import ROOT, run_cli


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    proc = run_cli("--help", cwd=tmp_path_factory.mktemp("help"), timeout=120)
    return proc.stdout


@pytest.mark.integration
def test_help_says_what_ragexp_does_not_hydras_generic_page(page):
    assert page.startswith("ragexp: evaluate a RAG system")
    assert "is powered by Hydra" not in page and "== Config ==" not in page and "SPEC §" not in page
    assert len(page.splitlines()) < 60  # Hydra's generic page was about 200 lines of config dump


@pytest.mark.integration
def test_help_lists_every_config_group_with_its_options(page):
    groups = sorted(d for d in (ROOT / "conf").iterdir() if d.is_dir() and d.name != "hydra")
    assert groups, "no config groups found"
    lines = page.splitlines()
    for group in groups:
        options = ", ".join(sorted(p.stem for p in group.glob("*.yaml")))
        assert f"{group.name}: {options}" in lines, group.name
    # where this install's YAML files are: conf/ of the checkout here, ragexp/conf inside a wheel's install
    [said] = [line for line in lines if line.startswith("== Config groups")]
    folder = said.split(".yaml in ", 1)[1].rstrip(") =")
    assert "<group>/<option>.yaml" in said and (Path(folder) / "config.yaml").is_file(), said


@pytest.mark.integration
def test_help_shows_own_data_and_the_composed_config(page):
    assert "python -m ragexp dataset=records dataset.path=my_records.jsonl" in page
    assert "python -m ragexp dataset=mapped dataset.path=" in page
    assert "python -m ragexp --cfg job" in page
    assert "--hydra-help" in page


@pytest.mark.integration
def test_every_example_command_on_the_page_composes(page, tmp_path):
    commands = [line.strip() for line in page.splitlines() if line.strip().startswith("python -m ragexp")]
    examples = [c for c in commands if "--cfg" not in c]
    assert len(examples) >= 5  # three examples and two ways to read one's own file
    for command in examples:
        args = shlex.split(command.split("  ")[0])[3:]  # the command, without its explanation
        if "-m" in args:  # a sweep: compose its first job
            args = [a.split("=", 1)[0] + "=" + a.split("=", 1)[1].split(",")[0] if "=" in a else a
                    for a in args if a != "-m"]
        proc = run_cli(*args, "--cfg", "job", cwd=tmp_path, timeout=120)
        assert "dataset:" in proc.stdout, command


@pytest.mark.integration
def test_help_into_a_closed_pipe_stops_quietly(tmp_path):
    """`python -m ragexp --help | head -3`: the reader goes away; no traceback, the shell's SIGPIPE status."""
    import os
    import subprocess
    import sys

    read_end, write_end = os.pipe()
    os.close(read_end)  # nobody will read: the first write fails with EPIPE
    try:
        proc = subprocess.run([sys.executable, "-m", "ragexp", "--help"], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, cwd=tmp_path, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 141 and "Traceback" not in proc.stderr, proc.stderr
