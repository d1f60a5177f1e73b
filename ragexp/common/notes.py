"""Lines about a data file that every job of a sweep would repeat, said once.

What a file holds (LoCoMo's nine evidence entries that name no turn) is a fact about the file, not about a
job: in a sweep (a Hydra multirun job) each distinct line is said the first time this process says it, so the
basic launcher, which runs every job in one process, says it once per sweep, and joblib's or Ray's workers
once each. A single run, ``ragexp.evaluate`` and a notebook cell say it every time they load the file.
"""

from __future__ import annotations

import sys

#: the lines already said in this process's sweep jobs
_SAID: set[str] = set()


def in_sweep() -> bool:
    """True inside a job of a Hydra multirun (``python -m ragexp -m ...``)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        return HydraConfig.initialized() and str(HydraConfig.get().mode) == "RunMode.MULTIRUN"
    except Exception:  # noqa: BLE001 - Hydra absent, or its config without a mode
        return False


def say_once_per_sweep(line: str) -> None:
    """Print ``line`` on stderr, unless a job of this sweep said the same line already in this process."""
    if in_sweep():
        if line in _SAID:
            return
        _SAID.add(line)
    print(line, file=sys.stderr, flush=True)
