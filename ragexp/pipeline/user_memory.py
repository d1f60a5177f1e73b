"""``memory_layer=custom``: the one place ragexp calls the user's memory layer (its ``add`` and ``search``).

The factory (``memory_layer.factory=module:function``, called with ``memory_layer.kwargs``) returns an
object with ``add(conversation_id, messages)`` and ``search(conversation_id, query, k)``. Each call is
timed, bounded by ``memory_layer.timeout_s`` and kept from stopping the run: an exception, a
``SystemExit`` or a call that does not return in time becomes a reason (a string) that the caller
records as that question's status. A factory that cannot be imported, fails, or builds an object
without ``add``/``search`` is a :class:`ConfigError` naming the factory (one line, exit 2).
Definitions: docs/memory-layers.md, "Your own memory layer".
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

from ragexp.common.targets import resolve
from ragexp.errors import ConfigError


def _reason(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.splitlines()[0][:300] if text.strip() else type(exc).__name__


def call_with_deadline(fn: Callable[..., Any], args: tuple, timeout_s: float | None) -> tuple[Any, float, str | None]:
    """``fn(*args)`` in a worker thread: (its result, seconds, None), or (None, seconds, the reason it gave none):
    an exception or ``SystemExit`` it raised, or ``timeout after N s`` (the thread is left behind, a daemon).

        >>> call_with_deadline(lambda: 1 / 0, (), 5)[2]
        'ZeroDivisionError: division by zero'
        >>> call_with_deadline(lambda: time.sleep(1), (), 0.05)[2]
        'timeout after 0.05 s'
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - the user's code: SystemExit too becomes a reason
            box["error"] = _reason(exc)

    t0 = time.perf_counter()
    worker = threading.Thread(target=work, name="ragexp-memory-layer", daemon=True)
    worker.start()
    worker.join(timeout_s)
    seconds = time.perf_counter() - t0
    if worker.is_alive():
        return None, seconds, f"timeout after {timeout_s:g} s"
    return box.get("value"), seconds, box.get("error")


class UserMemory:
    """The user's memory layer, built once per job, each call bounded (module docstring)."""

    def __init__(self, factory: str, kwargs: Mapping[str, Any] | None = None, timeout_s: float | None = 60.0):
        if factory in (None, "", "???"):
            raise ConfigError("memory_layer=custom needs your factory: memory_layer.factory=my_module:build (a "
                              "function returning an object with add(conversation_id, messages) and "
                              "search(conversation_id, query, k))")
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or timeout_s <= 0):
            raise ConfigError(f"memory_layer.timeout_s: expected a positive number of seconds or null, got {timeout_s!r}")
        if not isinstance(kwargs or {}, Mapping):
            raise ConfigError(f"memory_layer.kwargs: expected a mapping of keyword arguments, got {kwargs!r}")
        self.factory, self.kwargs, self.timeout_s = str(factory), dict(kwargs or {}), timeout_s
        build = resolve(self.factory, "memory_layer.factory")
        if not callable(build):
            raise ConfigError(f"memory_layer.factory {self.factory}: expected a function that builds your memory "
                              f"layer, got {type(build).__name__}")
        obj, _, error = call_with_deadline(lambda: build(**self.kwargs), (), timeout_s)
        if error is not None:
            raise ConfigError(f"memory_layer.factory {self.factory} failed: {error}")
        lacking = [m for m in ("add", "search") if not callable(getattr(obj, m, None))]
        if lacking:
            raise ConfigError(f"memory_layer.factory {self.factory}: the object it returned ({type(obj).__name__}) "
                              f"has no {' and no '.join(lacking)} method; expected add(conversation_id, messages) "
                              "and search(conversation_id, query, k)")
        self.memory = obj

    def add(self, conversation_id: str, messages: list[dict[str, Any]]) -> tuple[float, str | None]:
        """Give the memory one session's messages: (seconds, None) or (seconds, why it failed)."""
        _, seconds, error = call_with_deadline(self.memory.add, (conversation_id, messages), self.timeout_s)
        return seconds, error

    def search(self, conversation_id: str, query: str, k: int) -> tuple[list[dict[str, Any]] | None, float, str | None]:
        """The memory's hits for ``query`` (at most ``k``, each checked): (hits, seconds, None) or (None, seconds, why)."""
        hits, seconds, error = call_with_deadline(self.memory.search, (conversation_id, query, k), self.timeout_s)
        if error is not None:
            return None, seconds, error
        checked, problem = check_hits(hits)
        if problem is not None:
            return None, seconds, problem
        return checked[:k], seconds, None


def check_hits(hits: Any) -> tuple[list[dict[str, Any]], str | None]:
    """The search's result as a list of ``{"text", "id"?, "score"?}``, or the reason it is not one.

        >>> check_hits([{"text": "a", "id": 3, "score": 0.5}, {"text": "b"}])
        ([{'text': 'a', 'id': '3', 'score': 0.5}, {'text': 'b'}], None)
        >>> check_hits([{"id": "x"}])[1]
        "bad search result: hit 0 has no text (expected a dict with 'text', optional 'id' and 'score')"
    """
    expected = "(expected a dict with 'text', optional 'id' and 'score')"
    if hits is None or isinstance(hits, (str, bytes, Mapping)) or not hasattr(hits, "__iter__"):
        return [], f"bad search result: expected a list of hits, got {type(hits).__name__} {expected}"
    out = []
    for i, hit in enumerate(hits):
        if not isinstance(hit, Mapping):
            return [], f"bad search result: hit {i} is a {type(hit).__name__} {expected}"
        if not isinstance(hit.get("text"), str):
            return [], f"bad search result: hit {i} has no text {expected}"
        one: dict[str, Any] = {"text": hit["text"]}
        if hit.get("id") is not None:
            one["id"] = str(hit["id"])
        score = hit.get("score")
        if score is not None:
            if isinstance(score, bool) or not isinstance(score, (int, float)):
                return [], f"bad search result: hit {i}'s score is {type(score).__name__}, expected a number"
            one["score"] = float(score)
        out.append(one)
    return out, None


__all__ = ["UserMemory", "call_with_deadline", "check_hits"]
