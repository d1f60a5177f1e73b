"""Every command of docs/judge-trust.md runs as written (docs/judge-trust.md is the page a user copies
from): each ``bash`` block's commands, continuation lines joined, in order. ``python -m ragexp`` runs
in-process with the command's overrides (a ``-m`` sweep: every combination, each job's folder kept
under one sweep folder), ``python -m ragexp.compare`` and ``python -m ragexp.judge_candidates`` on
what the earlier commands left; the stand-in judges the page starts on ports 8000 and 8001 are the
test's scripted servers (tests/judge_server.py), their addresses put in place of the page's. The
warnings the page shows are checked where they are made (tests/test_judge_degenerate.py,
tests/test_label_hygiene.py)."""

from __future__ import annotations

import itertools
import re
import shlex
import shutil

import pytest

from cli import ROOT

PAGE = ROOT / "docs" / "judge-trust.md"


def commands() -> list[str]:
    text = PAGE.read_text(encoding="utf-8")
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


def test_the_page_has_the_commands_this_test_knows():
    kinds = {shlex.split(c)[2] if c.startswith("python -m") else shlex.split(c)[1] for c in commands()}
    assert kinds <= {"ragexp", "ragexp.compare", "ragexp.judge_candidates", "ragexp.standin_judge",
                     "tests/judge_server.py"}, kinds
    assert any("judge.examples=0,4" in c for c in commands())


def _split_sweep(args: list[str]) -> list[list[str]]:
    """A ``-m`` command's overrides as one list per job (comma lists expanded, as Hydra's basic sweeper does)."""
    choices = [[f"{a.split('=', 1)[0]}={v}" for v in a.split("=", 1)[1].split(",")] if "=" in a and "," in a
               else [a] for a in args]
    return [list(c) for c in itertools.product(*choices)]


@pytest.mark.slow
def test_every_command_of_judge_trust_runs_as_written(compose, server, tmp_path, capsys):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from judge_server import JudgeServer
    from ragexp.cli.compare import compare_runs
    from ragexp.cli.judge_candidates import candidates
    from ragexp.common.paths import conf_dir
    from ragexp.cli import add_override_prefix
    from ragexp.workflow.runner import execute

    ran = []
    sweep_dir = None
    with JudgeServer() as second:
        ports = {"8000": server.url, "8001": second.url}

        def local(arg: str) -> str:
            m = re.match(r"judge\.api_base=http://127\.0\.0\.1:(\d+)/v1$", arg)
            return f"judge.api_base={ports[m.group(1)]}" if m else arg

        for command in commands():
            words = shlex.split(command)
            if words[-1] == "&" or words[1] == "tests/judge_server.py":  # the page's stand-in: the test's servers
                continue
            module, args = words[2], [local(a) for a in words[3:]]
            if module == "ragexp":
                if args[0] == "-m":
                    sweep_dir = tmp_path / "multirun"
                    for n, job in enumerate(_split_sweep(args[1:])):
                        out = execute(compose(*job, "tracking.enabled=false"), show=False)  # the table reads folders
                        shutil.copytree(out.folder, sweep_dir / str(n))
                else:
                    save = any(a.startswith("run_name=") for a in args)
                    outcome = execute(compose(*args), save=save, show=False)
                    assert outcome.summary["metrics"], command
            elif module == "ragexp.compare":
                with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
                    cfg = hydra_compose("compare", overrides=add_override_prefix(
                        [*args, f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "log=false"]))
                result = compare_runs(cfg)
                assert "agreement" in result, command
            elif module == "ragexp.judge_candidates":
                table = candidates(sweep_dir, resamples=1000)
                assert len(table["candidates"]) == 2
                assert all(r["dev_agreement"]["value"] is not None and r["test_agreement"]["value"] is not None
                           for r in table["candidates"])
            ran.append(module)
    assert ran.count("ragexp") >= 6 and "ragexp.compare" in ran and "ragexp.judge_candidates" in ran
