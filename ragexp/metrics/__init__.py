"""Metrics: one module per family (docs/metrics.md), each metric a registered pure function.

- ``token``    token precision / recall / F1 of passages
- ``context``  context precision / recall / F1 through a matcher
- ``ranking``  hit rate, MRR, nDCG, MAP, precision@k, recall@k
- ``answer``   exact match, answer token F1, BLEU, ROUGE
- ``keyword``  keyword overlap, confusion metrics, coverage, latency
- ``judge``    the LLM-judge metrics
"""

from ragexp.metrics.base import REGISTRY, STATUSES, MetricInfo, Score, load_all, register

__all__ = ["REGISTRY", "STATUSES", "MetricInfo", "Score", "load_all", "register"]
