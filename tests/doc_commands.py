"""Running the shell commands a page shows (README.md, docs/*.md) as written, from an empty folder, with the
installed package: tests/test_readme_commands.py and tests/test_docs_commands.py share this.

A page's ``bash`` blocks give its commands (continued lines joined, comments and blank lines left out). They
run in one ``bash`` script, in the page's order, so a command that builds on an earlier one (a compare after
its sweep) finds what the page's earlier commands left; after each command the script echoes its exit status.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

MARK = "[doc-command]"


def blocks(text: str) -> list[str]:
    """The page's ``bash`` code blocks."""
    return re.findall(r"```bash\n(.*?)```", text, re.S)


def commands(block: str) -> list[str]:
    """The block's commands: continued lines joined, comments and blank lines left out (a trailing
    comment stays; bash ignores it)."""
    text = block.replace("\\\n", " ")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]


def background(cmd: str) -> bool:
    """A command the page starts in the background or stops (no exit status of its own to check)."""
    return cmd.split("#", 1)[0].strip().endswith("&") or cmd.startswith("kill ")


def port_taken(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def run_script(cmds: list[str], cwd: Path, data_dir: Path, timeout: float = 1500) -> tuple[subprocess.CompletedProcess,
                                                                                               dict[int, int]]:
    """The commands run by one bash in ``cwd``: the process and each command's exit status by its index.
    The public data is found through ``$RAGEXP_DATA_DIR`` (what the README tells a user to set)."""
    lines = []
    for n, cmd in enumerate(cmds):
        lines.append(cmd)
        if not background(cmd):
            lines.append(f'echo "{MARK} {n} exit $?"')
    lines.append("kill $(jobs -p) 2>/dev/null; wait 2>/dev/null; true")  # nothing the script started outlives it
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "RAGEXP_DATA_DIR": str(data_dir), "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    proc = subprocess.run(["bash", "-c", "\n".join(lines)], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    exits = {int(m.group(1)): int(m.group(2)) for m in re.finditer(rf"^{re.escape(MARK)} (\d+) exit (\d+)$",
                                                                    proc.stdout, re.M)}
    return proc, exits


def expected_exit(cmd: str) -> int:
    """0, or 1 for a gate recipe (a floor or an allowance the demo misses on purpose is shown failing)."""
    return 1 if "gate.min." in cmd or "gate.max_drop." in cmd else 0


def failures(cmds: list[str], proc: subprocess.CompletedProcess, exits: dict[int, int],
             expected: dict[int, int] | None = None) -> list[str]:
    """One line per command that did not end as the page says, with the output's tail once."""
    bad = [f"{cmd!r} exited {exits.get(n)}, expected {(expected or {}).get(n, expected_exit(cmd))}"
           for n, cmd in enumerate(cmds)
           if not background(cmd) and exits.get(n) != (expected or {}).get(n, expected_exit(cmd))]
    if bad:
        bad.append(f"STDOUT:\n{proc.stdout[-4000:]}\nSTDERR:\n{proc.stderr[-4000:]}")
    return bad
