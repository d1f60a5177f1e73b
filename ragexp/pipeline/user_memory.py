"""``memory_layer=custom``: the one place ragexp calls the user's memory layer (its ``add`` and ``search``).

The factory (``memory_layer.factory=module:function``, called with ``memory_layer.kwargs``) returns an
object with ``add(conversation_id, messages)`` and ``search(conversation_id, query, k)``. Each call runs
through :class:`ragexp.common.isolation.UserCode`: timed, bounded by ``memory_layer.timeout_s`` and kept from
stopping the run (an exception, a ``SystemExit`` or a call that does not return in time becomes a reason
that the caller records as that question's status). A factory that cannot be imported, fails, or builds an
object without ``add``/``search`` is a :class:`ConfigError` naming the factory (one line, exit 2).
Definitions: docs/memory-layers.md, "Your own memory layer".
"""

from __future__ import annotations

from typing import Any, Mapping

from ragexp.common.isolation import DEFAULT_TIMEOUT_S, UserCode, load
from ragexp.errors import ConfigError


class UserMemory:
    """The user's memory layer, built once per job, each call bounded (module docstring)."""

    def __init__(self, factory: str, kwargs: Mapping[str, Any] | None = None,
                 timeout_s: float | None = DEFAULT_TIMEOUT_S):
        if factory in (None, "", "???"):
            raise ConfigError("memory_layer=custom needs your factory: memory_layer.factory=my_module:build (a "
                              "function returning an object with add(conversation_id, messages) and "
                              "search(conversation_id, query, k))")
        if not isinstance(kwargs or {}, Mapping):
            raise ConfigError(f"memory_layer.kwargs: expected a mapping of keyword arguments, got {kwargs!r}")
        self.factory, self.kwargs = str(factory), dict(kwargs or {})
        self.code = UserCode(f"memory_layer.factory {self.factory}", timeout_s=timeout_s)
        build = load(self.factory, "memory_layer.factory")
        if not callable(build):
            raise ConfigError(f"memory_layer.factory {self.factory}: expected a function that builds your memory "
                              f"layer, got {type(build).__name__}")
        obj = self.code.build(build, **self.kwargs)
        lacking = [m for m in ("add", "search") if not callable(getattr(obj, m, None))]
        if lacking:
            raise ConfigError(f"memory_layer.factory {self.factory}: the object it returned ({type(obj).__name__}) "
                              f"has no {' and no '.join(lacking)} method; expected add(conversation_id, messages) "
                              "and search(conversation_id, query, k)")
        self.memory = obj

    def add(self, conversation_id: str, messages: list[dict[str, Any]]) -> tuple[float, str | None]:
        """Give the memory one session's messages: (seconds, None) or (seconds, why it failed)."""
        out = self.code.call(self.memory.add, conversation_id, messages, label=f"add, conversation {conversation_id}")
        return out.seconds, None if out.ok else f"{out.status}: {out.reason}"

    def search(self, conversation_id: str, query: str, k: int) -> tuple[list[dict[str, Any]] | None, float, str | None]:
        """The memory's hits for ``query`` (at most ``k``, each checked): (hits, seconds, None) or (None, seconds, why)."""
        def ask() -> tuple[list[dict[str, Any]], str | None]:  # a lazy result is read inside the bounded call too
            return check_hits(self.memory.search(conversation_id, query, k))

        out = self.code.call(ask, label=f"search, conversation {conversation_id}")
        if not out.ok:
            return None, out.seconds, f"{out.status}: {out.reason}"
        checked, problem = out.value
        if problem is not None:
            return None, out.seconds, problem
        return checked[:k], out.seconds, None


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


__all__ = ["UserMemory", "check_hits"]
