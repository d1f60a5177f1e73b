"""The tests' handle on the scripted stand-in judge: the server itself is packaged as
``python -m ragexp.standin_judge`` (:mod:`ragexp.cli.standin_judge`, one copy); this module adds what
only the tests need. ``python tests/judge_server.py --port 8000`` still serves it.
"""

from __future__ import annotations

from ragexp.cli.standin_judge import *  # noqa: F401,F403 - JudgeServer, Reply, Request, sensible, blocks, ...
from ragexp.cli.standin_judge import main


#: each judge metric's module in ragexp/metrics/judged/
_MODULE = {"answer_similarity": "similarity", "retrieval_precision": "relevance", "augmentation_accuracy": "usage",
           "augmentation_precision": "relevant_usage", "answer_consistency": "main_points",
           "answer_consistency_binary": "full_support", "overall_score": "overall", "questeval_recall": "questeval",
           "questeval_precision": "questeval"}


def judge_specs(*names: str, **options: dict):
    """Built specs of the named judge metrics (``options[name]`` holds a metric's options), as tests score them."""
    from ragexp.core.scoring import build_metrics

    cfg = {n: {"_target_": f"ragexp.metrics.judged.{_MODULE[n]}.{n}", **options.get(n, {})} for n in names}
    return build_metrics(cfg)[0]


if __name__ == "__main__":
    main()
