"""Metrics: one module per family (SPEC §2), each metric a registered pure function.

- ``token``    token precision / recall / F1 of passages (§2.1)
- ``context``  context precision / recall / F1 through a matcher (§2.2)
- ``ranking``  hit rate, MRR, nDCG, MAP, precision@k, recall@k (§2.3)
- ``answer``   exact match, answer token F1, BLEU, ROUGE (§2.4)
- ``keyword``  keyword overlap, confusion metrics, coverage, latency (§2.5)
- ``judge``    the LLM-judge metrics (§2.6, §2.7)
"""

from ragexp.metrics.base import REGISTRY, STATUSES, MetricInfo, Score, load_all, register

__all__ = ["REGISTRY", "STATUSES", "MetricInfo", "Score", "load_all", "register"]
