"""Caches keyed by texts, bounded in bytes (docs/performance.md, "Scale"): what the metrics and
matchers keep of a text they have seen (its tokens, counts, keyword set) costs memory in proportion
to the text's length, so a cache is bounded by the bytes its entries take, not by their number — a
run whose every answer differs holds no more than one whose answers repeat.

An entry's bytes are estimated, not measured (measuring costs more than the work cached): a fixed
``per_entry`` plus ``per_char`` for each character of the text arguments of the call (strings, and
strings inside tuples), the key's own text included. The figures each cache passes are upper bounds
measured with ``tracemalloc`` on English answers, references and paragraphs.

Eviction is generational, an O(1) stand-in for least-recently-used: new entries go to a young
generation; when the next entry would take it past half the budget it becomes the old one (the
previous old one is dropped); a hit in the old generation moves the entry back to the young one. A
text used at least once while half the budget fills stays; the cache never holds more than its
budget (but for one entry larger than half of it, held alone).

A tokeniser (a function of one argument, ``text``) gets a wrapper of that one argument, keyed by the text
itself: the per-call cost of a lookup is a dictionary probe, which a run that scores every text once pays
on each record (docs/performance.md, "Deterministic metrics").

    >>> calls = []
    >>> @text_cache(max_bytes=1_000, per_entry=0, per_char=10)
    ... def upper(text):
    ...     calls.append(text)
    ...     return text.upper()
    >>> upper("abc"), upper("abc"), calls
    ('ABC', 'ABC', ['abc'])
    >>> for word in ("x" * 20, "y" * 20, "z" * 20):   # 3 x 200 estimated bytes: the young generation fills
    ...     _ = upper(word)
    >>> upper.cache_info()["bytes"] <= 1_000
    True
    >>> upper.cache_clear(); upper.cache_info()
    {'entries': 0, 'bytes': 0, 'max_bytes': 1000}
"""

from __future__ import annotations

import inspect
from typing import Any, Callable

_MISS = object()
#: every cache made here, for :func:`clear_all`
_ALL: list[Any] = []


def _chars(args: tuple) -> int:
    n = 0
    for a in args:
        if isinstance(a, str):
            n += len(a)
        elif isinstance(a, tuple):  # a tuple of texts (reference answers); a frozenset is an option (stop words)
            n += sum(len(x) for x in a if isinstance(x, str))
    return n


def _one_text(fn: Callable) -> bool:
    """True when ``fn`` takes one argument, ``text``, and nothing else (the tokenisers): its cache is keyed by the
    text alone. A keyword call ``fn(text=...)`` keys the same as ``fn(...)``."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return False
    return (len(params) == 1 and params[0].name == "text" and params[0].default is params[0].empty
            and params[0].kind == params[0].POSITIONAL_OR_KEYWORD)


def text_cache(max_bytes: int = 32 * 2 ** 20, *, per_entry: int = 256, per_char: int = 48) -> Callable:
    """Decorate a function of texts (hashable arguments; keyword arguments are part of the key as
    given) with a cache of at most ``max_bytes`` estimated bytes (see the module's docstring)."""
    half = max_bytes // 2

    def decorate(fn: Callable) -> Callable:
        young: dict = {}
        old: dict = {}
        used = 0

        def keep(key, value, cost):
            # a value missed in the young generation, kept there (a hit's path stays inline in the wrappers)
            nonlocal young, old, used
            if used + cost > half:  # the young generation is full: it becomes the old one
                old, young, used = young, {}, 0
            young[key] = value
            used += cost
            return value

        def cached_text(text):
            # a function of one text: keyed by the text itself, no argument tuple packed or walked
            value = young.get(text, _MISS)
            if value is not _MISS:
                return value
            value = old.pop(text, _MISS)
            if value is _MISS:
                value = fn(text)
            return keep(text, value, per_entry + per_char * (len(text) if type(text) is str else _chars((text,))))

        def cached(*args, **options):
            key = (args[0] if len(args) == 1 else args) if not options else (args, tuple(options.items()))
            value = young.get(key, _MISS)
            if value is not _MISS:
                return value
            value = old.pop(key, _MISS)
            if value is _MISS:
                value = fn(*args, **options)
            return keep(key, value, per_entry + per_char * _chars(args))

        def cache_clear() -> None:
            nonlocal young, old, used
            young, old, used = {}, {}, 0

        def cache_info() -> dict:
            held = sum(per_entry + per_char * _chars(k if isinstance(k, tuple) else (k,)) for k in old)
            return {"entries": len(young) + len(old), "bytes": used + held, "max_bytes": max_bytes}

        def cache_parameters() -> dict:
            # as functools.lru_cache reports them; maxsize: the most entries the budget can hold (each is
            # charged per_entry bytes or more), which core.scoring.clear_text_caches reads to find the caches
            return {"maxsize": max_bytes // max(per_entry, 1), "typed": False, "max_bytes": max_bytes}

        if _one_text(fn):
            cached = cached_text
        cached.cache_clear, cached.cache_info, cached.cache_parameters = cache_clear, cache_info, cache_parameters
        cached.__wrapped__, cached.__doc__, cached.__name__ = fn, fn.__doc__, fn.__name__
        cached.__qualname__, cached.__module__ = fn.__qualname__, fn.__module__
        _ALL.append(cached)
        return cached

    return decorate


def clear_all() -> None:
    """Empty every cache made by :func:`text_cache` (a streamed run's last step: the caller's process
    keeps no text of the run)."""
    for cached in _ALL:
        cached.cache_clear()
