"""A stand-in for "your own RAG system", evaluated with ``pipeline=custom``.

ragexp calls ``KeywordRAG(**kwargs)`` once (the keys of the ``pipeline`` config other than
``_target_``) and then the instance with each query. It returns a dict with any of
``contexts``, ``context_ids``, ``answer`` and ``timings`` (stage → seconds); ragexp times the
whole call and fills ``timings["total"]`` and ``latency_s`` itself.

This toy system retrieves SQuAD paragraphs by word overlap and answers with the best sentence.
Its passage ids are ``<article>-<paragraph>``, the ids the ``squad2`` dataset uses for its
ground truth, so id-based recall@k is meaningful.
"""

from __future__ import annotations

import json
import re
import time

_WORD = re.compile(r"\w+")
_STOP = {"the", "a", "an", "of", "in", "on", "to", "and", "is", "was", "what", "who", "when", "which", "did", "does",
         "how", "for", "by", "with", "as", "at", "from", "that", "it", "be", "were", "are", "many", "much"}


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP}


class KeywordRAG:
    def __init__(self, corpus_path: str, top_k: int = 3):
        with open(corpus_path, encoding="utf-8") as fh:
            data = json.load(fh)["data"]
        self.passages = {f"{a}-{p}": para["context"]
                         for a, article in enumerate(data) for p, para in enumerate(article["paragraphs"])}
        self.index = {pid: _words(text) for pid, text in self.passages.items()}
        self.top_k = top_k

    def __call__(self, query: str) -> dict:
        t0 = time.perf_counter()
        q = _words(query)
        ranked = sorted(self.index, key=lambda pid: -len(q & self.index[pid]))[: self.top_k]
        t1 = time.perf_counter()
        sentences = [s for pid in ranked for s in re.split(r"(?<=[.!?])\s+", self.passages[pid])]
        answer = max(sentences, key=lambda s: len(q & _words(s)), default="")
        t2 = time.perf_counter()
        return {
            "contexts": [self.passages[pid] for pid in ranked],
            "context_ids": ranked,
            "answer": answer,
            "timings": {"retrieve": t1 - t0, "generate": t2 - t1},
        }
