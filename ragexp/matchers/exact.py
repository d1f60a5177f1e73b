"""Exact matchers: a component matches when it equals a ground-truth component
after outer white space is stripped from both.

``exact_chunk`` compares whole passages, ``exact_sentence`` their sentences.

    >>> m = ExactMatcher("sentence")
    >>> r = m.match(["Paris is in France. It is big.", "Lyon is a city."], ["It is big."])
    >>> r.precision(), r.recall()
    (0.3333333333333333, 1.0)
    >>> ExactMatcher("chunk").is_match("  Paris.\\n", "Paris.")
    True
"""

from __future__ import annotations

from typing import Sequence

from ragexp.matchers.base import Matcher


class ExactMatcher(Matcher):
    """String equality after stripping outer white space."""

    def __init__(self, granularity: str = "chunk"):
        super().__init__(granularity)
        self.name = f"exact_{granularity}"

    def _prepare(self, truths: Sequence[str]) -> dict[str, int]:
        return {t.strip(): j for j, t in enumerate(truths)}

    def _hits(self, component: str, prepared: dict[str, int]) -> frozenset[int]:
        j = prepared.get(component.strip())
        return frozenset() if j is None else frozenset((j,))


__all__ = ["ExactMatcher"]
