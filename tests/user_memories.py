"""Memory layers as users write them, for tests/test_memory_layers.py (``memory_layer.factory=user_memories:...``):
one that records every call and answers by shared words, one whose search raises on a word, one whose search
calls ``sys.exit``, one whose search hangs on a word, and a factory whose object has no ``search``."""

from __future__ import annotations

import sys
import threading

#: every call of the last recording memory built: ("add", conversation id, message ids) / ("search", id, query, k)
CALLS: list[tuple] = []
RELEASE = threading.Event()  # a hanging search waits on it (set by the test when it ends)


class WordMemory:
    """Keeps each conversation's messages; a search ranks them by words shared with the query."""

    def __init__(self, fail_on: str | None = None, how: str = "raise"):
        self.fail_on, self.how = fail_on, how
        self.messages: dict[str, list[dict]] = {}
        if how == "hang":
            RELEASE.clear()
        CALLS.clear()

    def add(self, conversation_id, messages):
        CALLS.append(("add", conversation_id, [m["id"] for m in messages]))
        self.messages.setdefault(conversation_id, []).extend(messages)

    def search(self, conversation_id, query, k):
        CALLS.append(("search", conversation_id, query, k))
        if self.fail_on and self.fail_on in query.lower():
            if self.how == "exit":
                sys.exit(4)
            if self.how == "hang":
                RELEASE.wait(60)
            raise RuntimeError(f"index corrupted near {self.fail_on!r}")
        words = set(query.lower().split())
        ranked = sorted(self.messages.get(conversation_id, []),
                        key=lambda m: -len(words & set(m["text"].lower().split())))
        return [{"text": m["text"], "id": m["id"], "score": float(len(words & set(m["text"].lower().split())))}
                for m in ranked[: k + 3]]  # more than k on purpose: ragexp keeps the first k


def build(fail_on: str | None = None, how: str = "raise") -> WordMemory:
    return WordMemory(fail_on, how)


def no_search():
    class AddOnly:
        def add(self, conversation_id, messages):
            pass

    return AddOnly()
