"""How many processes a run scores on, and the pool of forked processes that does it: one rule for the
in-memory scoring (:func:`ragexp.core.scoring.score`) and the streamed one (:mod:`ragexp.workflow.streaming`).

A second process helps only where a core is idle: with the setting left to the machine (None), a run uses
one process per core while the load average is below the cores - 1/2, where the system forks
(docs/performance.md, "Scale").
"""

from __future__ import annotations

import multiprocessing
import os
from typing import Any, Callable


def can_fork() -> bool:
    """True where this process may fork scoring processes (Linux, and not itself a pool's worker)."""
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


def processes_for(setting: Any) -> int:
    """``setting`` (``execution.processes``) as a number of processes; None: one per core while a core is free."""
    if setting is not None:
        return max(1, int(setting))
    if not can_fork():
        return 1
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores if os.getloadavg()[0] < cores - 0.5 else 1


def fork_pool(processes: int, initializer: Callable[..., None], initargs: tuple) -> Any:
    """A pool of ``processes`` forked processes, each given ``initargs`` by ``initializer`` once: what they
    inherit is never pickled. Shut it down with ``pool.shutdown(cancel_futures=True)``."""
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(processes, multiprocessing.get_context("fork"), initializer, initargs)
