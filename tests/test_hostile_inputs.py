"""Inputs meant to hang, exhaust or forge (issue 33): each is one line and exit status 2, quickly, by a real process.

A FIFO or a device as ``dataset.path`` (reading either never ends), a 600-byte YAML alias bomb in a
``--config-dir`` file (minutes of CPU and gigabytes once expanded), and record ids holding a line
break or ANSI escape sequences, which must reach the terminal escaped.
"""

from __future__ import annotations

import json
import os

import pytest
from cli import run_cli

BOMB = "name: bomb\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{b}: &{b} [{', '.join(['*' + a] * 9)}]\n" for a, b in zip("abcdefg", "bcdefgh"))


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    (line,) = [ln for ln in proc.stderr.splitlines() if ln.startswith("ragexp: error:")]
    return line


@pytest.mark.integration
@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_path_that_is_not_a_file_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "records.jsonl"
    if kind == "fifo":
        os.mkfifo(path)  # nobody writes: opening it would wait for ever
    else:
        path = "/dev/zero"  # endless zero bytes
    proc = run_cli("dataset=records", f"dataset.path={path}", "metric=exact_match", "progress=false",
                   cwd=tmp_path, check=False, timeout=120)
    line = _one_error_line(proc)
    assert str(path) in line and "(a regular file), got a" in line
    assert ("FIFO" if kind == "fifo" else "character device") in line


@pytest.mark.integration
def test_a_yaml_alias_bomb_in_a_config_dir_is_refused_before_it_expands(tmp_path):
    (tmp_path / "cd" / "dataset").mkdir(parents=True)
    bomb = tmp_path / "cd" / "dataset" / "bomb.yaml"
    bomb.write_text(BOMB)
    assert len(BOMB) < 700  # 9^8 values once expanded
    proc = run_cli("--config-dir", str(tmp_path / "cd"), "dataset=bomb", "progress=false", cwd=tmp_path,
                   check=False, timeout=120)  # the process that expanded it ran for more than 5 minutes
    line = _one_error_line(proc)
    assert str(bomb) in line and "alias bomb" in line


@pytest.mark.integration
def test_ids_reach_the_terminal_escaped(tmp_path):
    path = tmp_path / "records.jsonl"
    bad_ids = ["\x1b[31mred\x1b[0m\nragexp: error: forged", "\x1b[31mred\x1b[0m\nragexp: error: forged"]
    path.write_text("".join(json.dumps({"id": i, "query": "q", "answer": "a", "reference_answers": ["a"]}) + "\n"
                            for i in bad_ids))
    proc = run_cli("dataset=records", f"dataset.path={path}", "metric=exact_match", "progress=false", cwd=tmp_path,
                   check=False, timeout=120)
    line = _one_error_line(proc)  # the id's line break forged no second error line
    assert "duplicate id" in line and "\\x1b[31mred" in line and "\\nragexp: error: forged" in line
    assert "\x1b" not in proc.stderr + proc.stdout
