"""The text caches are bounded in bytes (ragexp/common/caches.py; docs/performance.md, "Scale"):
distinct texts without end leave a cache within its budget, a text in use stays cached, and a
cached function returns what the function itself returns."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from ragexp.common import caches
from ragexp.common.caches import text_cache
from ragexp.common.text import squad_counts
from ragexp.matchers import rouge


def test_distinct_texts_stay_within_the_budget():
    calls = []

    @text_cache(max_bytes=10_000, per_entry=100, per_char=10)
    def length(text: str) -> int:
        calls.append(text)
        return len(text)

    for i in range(5_000):  # 5,000 distinct texts of 10-14 characters: 200-240 estimated bytes each
        assert length(f"answer {i:06d}") == 7 + 6
        assert length.cache_info()["bytes"] <= 10_000
    # each generation fills to half the budget: at most 2 x 5,000 / 200 entries are held
    assert length.cache_info()["entries"] <= 2 * 5_000 // 200
    assert len(calls) == 5_000


def test_a_text_in_use_stays_and_is_computed_once():
    calls = []

    @text_cache(max_bytes=4_000, per_entry=0, per_char=10)
    def upper(text: str) -> str:
        calls.append(text)
        return text.upper()

    for i in range(1_000):  # the reference comes back between every two distinct answers
        upper("reference")
        upper(f"answer {i}")
    assert calls.count("reference") == 1
    assert upper("Reference ", ) == "REFERENCE " and upper(text="x") == "X"  # keyword arguments work too


def test_a_tokeniser_is_keyed_by_its_text_alone():
    """A function of one argument ``text`` gets the one-argument wrapper: ``f(t)`` and ``f(text=t)`` are one
    entry, charged the text's length; a function of more arguments keeps the general key."""
    calls = []

    @text_cache(max_bytes=10_000, per_entry=100, per_char=10)
    def words(text: str) -> tuple[str, ...]:
        calls.append(text)
        return tuple(text.split())

    assert words("a b") == words(text="a b") == ("a", "b") and calls == ["a b"]
    assert words.cache_info() == {"entries": 1, "bytes": 100 + 10 * 3, "max_bytes": 10_000}

    @text_cache(max_bytes=10_000, per_entry=100, per_char=10)
    def joined(text: str, sep: str = " ") -> str:
        calls.append(text)
        return sep.join(text)

    assert joined("ab") == joined("ab") == "a b" and calls == ["a b", "ab"]
    assert joined.cache_info()["bytes"] == 100 + 10 * 2


@pytest.mark.slow  # about 10 s: tracemalloc watching 3.6 M characters tokenised
def test_real_caches_hold_their_budget_in_memory():
    """150 distinct long answers (about 24,000 characters each) through the SQuAD counts and rouge's
    tokens: the memory the caches keep, as tracemalloc counts it, stays under their budgets, where
    an entry-count bound (lru_cache) kept all 150 (about 0.35 GB)."""
    caches.clear_all()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i in range(150):
        text = " ".join(f"record{i} says the Normans named Normandy in {j} AD." for j in range(500))
        squad_counts(text)
        rouge.rouge_l(text, "The Normans gave their name to Normandy")
        assert squad_counts.cache_info()["bytes"] <= squad_counts.cache_info()["max_bytes"]
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    # three caches: squad_counts, the _squad_tokens under it, rouge's _plain_tokens
    budget = squad_counts.cache_info()["max_bytes"] * 3
    assert 0 < held < budget, (held, budget)
    assert squad_counts.cache_info()["entries"] < 150
    caches.clear_all()


def test_cached_values_equal_uncached_ones():
    for text in ("The cat sat.", "A dog, a cat!", "", "乌龙茶，是一种半发酵茶。"):
        assert squad_counts(text) == squad_counts.__wrapped__(text)
        assert rouge.tokens(text).seq == rouge._plain_tokens.__wrapped__(text).seq


def test_a_streamed_run_end_empties_them():
    """core.scoring.clear_text_caches (a streamed run's last step) finds these caches as it finds lru_caches."""
    from ragexp.core.scoring import clear_text_caches

    squad_counts("a text to be forgotten")
    assert squad_counts.cache_info()["entries"] > 0
    clear_text_caches()
    assert squad_counts.cache_info()["entries"] == 0 and rouge._plain_tokens.cache_info()["entries"] == 0
