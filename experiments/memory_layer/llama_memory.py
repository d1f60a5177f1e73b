"""A memory layer under test: one LlamaIndex vector store per conversation, offline.

ragexp calls ``build(**memory_layer.kwargs)`` once per job, then ``add(conversation_id, messages)`` once per
session, in order, and ``search(conversation_id, query, k)`` once per question (README.md). Each message
becomes a LlamaIndex ``TextNode`` whose id is the turn's id, so ragexp can score evidence recall on what the
search returns. The embedding is a hashed bag of words (a LlamaIndex ``BaseEmbedding``): no model, no
network, and it ranks by shared words, unlike LlamaIndex's ``MockEmbedding``, whose vectors are all equal.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from llama_index.core import VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.schema import TextNode

_WORD = re.compile(r"[a-z0-9']+")
_STOP = frozenset("a an and are as at be but by did do does for from had has have he her his how i in is it its "
                  "me my of on or she so that the their them they this to was we were what when where which who "
                  "why will with you your".split())


class HashedWords(BaseEmbedding):
    """Each content word hashed into one of ``dim`` buckets, the vector scaled to length 1."""

    dim: int = 512

    def _vector(self, text: str) -> list[float]:
        v = [0.0] * self.dim
        for w in _WORD.findall(text.lower()):
            if w not in _STOP:
                v[int(hashlib.md5(w.encode()).hexdigest(), 16) % self.dim] += 1.0
        norm = math.sqrt(sum(x * x for x in v)) or 1.0
        return [x / norm for x in v]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


class LlamaIndexMemory:
    """A vector store per conversation; ``with_time`` puts the session's date-time before each message."""

    def __init__(self, dim: int = 512, with_time: bool = True):
        self.embed = HashedWords(dim=dim)
        self.with_time = with_time
        self.stores: dict[str, VectorStoreIndex] = {}

    def add(self, conversation_id: str, messages: list[dict[str, Any]]) -> None:
        nodes = []
        for m in messages:
            text = f"{m['speaker']}: {m['text']}"
            if m.get("image_caption"):
                text += f" [shared an image: {m['image_caption']}]"
            if self.with_time and m.get("time"):
                text = f"[{m['time']}] {text}"
            nodes.append(TextNode(id_=m["id"], text=text, metadata={"speaker": m["speaker"], "time": m.get("time")}))
        if conversation_id not in self.stores:
            self.stores[conversation_id] = VectorStoreIndex(nodes=[], embed_model=self.embed)
        self.stores[conversation_id].insert_nodes(nodes)

    def search(self, conversation_id: str, query: str, k: int) -> list[dict[str, Any]]:
        store = self.stores.get(conversation_id)
        if store is None:
            return []
        found = store.as_retriever(similarity_top_k=k).retrieve(query)
        return [{"text": n.node.get_content(), "id": n.node.node_id, "score": n.score} for n in found]


def build(dim: int = 512, with_time: bool = True) -> LlamaIndexMemory:
    """The factory ragexp calls: ``memory_layer.factory=llama_memory:build``."""
    return LlamaIndexMemory(dim=dim, with_time=with_time)
