"""The tests' handle on the scripted stand-in judge: the server itself is packaged as
``python -m ragexp.standin_judge`` (:mod:`ragexp.offline.standin_judge`, one copy); this module adds what
only the tests need. ``python tests/judge_server.py --port 8000`` still serves it.
"""

from __future__ import annotations

from ragexp.offline.standin_judge import *  # noqa: F401,F403 - JudgeServer, Reply, Request, sensible, blocks, ...
from ragexp.offline.standin_judge import main


def judge_specs(*names: str, **options: dict):
    """Built specs of the named judge metrics (``options[name]`` holds a metric's options), as tests score them."""
    from ragexp.core.scoring import build_metrics
    from ragexp.metrics.base import load_all

    cfg = {n: {"_target_": f"{load_all()[n].fn.__module__}.{n}", **options.get(n, {})} for n in names}
    return build_metrics(cfg)[0]


if __name__ == "__main__":
    main()
