"""What a matcher computes for one record: which retrieved components match which ground truths.

A matcher decides when a retrieved *component* is relevant to a ground-truth
component. The components are the passages themselves for a chunk matcher, the sentences of
the passages (:func:`ragexp.matchers.sentences.split_sentences`) for a sentence matcher.
:meth:`Matcher.match` returns a :class:`Matches` that every matcher-based metric reads:

- ground-truth contexts and components are de-duplicated (outer white space stripped, empty
  ones dropped): recall counts *distinct* ground truths;
- retrieved passages and their components are kept as they are, duplicates included:
  precision counts every retrieved component;
- per passage, the ground-truth components it matches and the ground-truth *contexts* those
  components belong to (what the ranked metrics call relevant items: docs/metrics.md#hit_rate).

The context metrics (one match per record for all three) and the ranked metrics on ``relevance:
matcher`` ask for the same record's match, so a matcher remembers its last 64 results (scoring goes
by blocks of 64 records), and :func:`ragexp.matchers.build_matcher` hands out one per configuration.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from ragexp.matchers.sentences import split_sentences

GRANULARITIES = ("chunk", "sentence")


@dataclass(frozen=True, slots=True)
class Matches:
    """The match relation of one record (retrieved passages × ground truths)."""

    #: per retrieved passage: how many components it has (1 for chunks, its sentences otherwise)
    n_components: tuple[int, ...]
    #: per retrieved passage: how many of its components match at least one ground-truth component
    n_matching: tuple[int, ...]
    #: per retrieved passage: indices of the distinct ground-truth components it matches
    component_hits: tuple[frozenset[int], ...]
    #: per retrieved passage: indices of the distinct ground-truth contexts it matches
    context_hits: tuple[frozenset[int], ...]
    #: distinct, non-empty ground-truth components and contexts
    n_truth_components: int
    n_truth_contexts: int

    def precision(self, k: int | None = None) -> float | None:
        """Matching retrieved components / retrieved components among the first k passages."""
        den = sum(self.n_components[:k])
        return sum(self.n_matching[:k]) / den if den else None

    def recall(self, k: int | None = None) -> float | None:
        """Distinct ground-truth components matched by the first k passages / all of them."""
        if not self.n_truth_components:
            return None
        return len(frozenset().union(*self.component_hits[:k])) / self.n_truth_components


class Matcher:
    """Base class: subclasses say when one component matches one ground-truth component.

    ``granularity`` is ``chunk`` or ``sentence``. Subclasses implement :meth:`_prepare` (turn
    the distinct ground-truth components into whatever makes comparing fast) and
    :meth:`_hits` (the indices of the prepared ground truths one retrieved component matches).
    """

    name: str = "matcher"

    def __init__(self, granularity: str, cache_size: int = 64):
        if granularity not in GRANULARITIES:
            raise ValueError(f"granularity must be one of {GRANULARITIES}, got {granularity!r}")
        self.granularity = granularity
        self._cache: OrderedDict[tuple, Matches] = OrderedDict()
        self._cache_size = cache_size
        # prepared ground truths, each with a memo of component → hits: many questions share a
        # gold passage and retrieve overlapping passages, so most components were seen before
        self._prepared: OrderedDict[tuple, tuple[Any, dict[str, frozenset[int]]]] = OrderedDict()

    # -- to implement ---------------------------------------------------------------------------
    def _prepare(self, truths: Sequence[str]) -> Any:
        raise NotImplementedError

    def _hits(self, component: str, prepared: Any) -> frozenset[int]:
        raise NotImplementedError

    def _clean(self, truth: str) -> str:
        """A ground truth (or one of its components) as it is compared and de-duplicated; "" drops it."""
        return truth.strip()

    # -- shared ---------------------------------------------------------------------------------
    def components(self, text: str) -> tuple[str, ...]:
        """The components of one passage: itself, or its sentences."""
        if self.granularity == "chunk":
            return (text,)
        return split_sentences(text)

    def is_match(self, retrieved_component: str, truth_component: str) -> bool:
        """Whether one retrieved component matches one ground-truth component."""
        return bool(self._hits(retrieved_component, self._prepare([truth_component])))

    def match(self, retrieved: Sequence[str], truths: Sequence[str]) -> Matches:
        """The match relation of a record's retrieved passages against its ground truths."""
        key = (tuple(retrieved), tuple(truths))
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return hit
        result = self._match(key[0], key[1])
        self._cache[key] = result
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return result

    def _match(self, retrieved: tuple[str, ...], truths: tuple[str, ...]) -> Matches:
        contexts: dict[str, int] = {}
        for t in truths:
            s = self._clean(t)
            if s and s not in contexts:
                contexts[s] = len(contexts)
        comp_index: dict[str, int] = {}
        owners: list[set[int]] = []
        for ctx, ci in contexts.items():
            for comp in self.components(ctx):
                comp = self._clean(comp)
                if not comp:
                    continue
                j = comp_index.get(comp)
                if j is None:
                    comp_index[comp] = j = len(owners)
                    owners.append(set())
                owners[j].add(ci)
        tkey = tuple(comp_index)
        entry = self._prepared.get(tkey)
        if entry is None:
            entry = self._prepared[tkey] = (self._prepare(list(comp_index)), {})
            if len(self._prepared) > 4 * self._cache_size:
                self._prepared.popitem(last=False)
        else:
            self._prepared.move_to_end(tkey)
        prepared, memo = entry
        n_components, n_matching, comp_hits, ctx_hits = [], [], [], []
        for passage in retrieved:
            comps = self.components(passage)
            matched = 0
            found: set[int] = set()
            for comp in comps:
                hits = memo.get(comp)
                if hits is None:
                    hits = memo[comp] = self._hits(comp, prepared) if owners else frozenset()
                if hits:
                    matched += 1
                    found |= hits
            n_components.append(len(comps))
            n_matching.append(matched)
            comp_hits.append(frozenset(found))
            ctx_hits.append(frozenset().union(*(owners[j] for j in found)) if found else frozenset())
        return Matches(tuple(n_components), tuple(n_matching), tuple(comp_hits), tuple(ctx_hits),
                       len(owners), len(contexts))

    def __repr__(self) -> str:
        return f"<matcher {self.name}>"


__all__ = ["GRANULARITIES", "Matches", "Matcher"]
