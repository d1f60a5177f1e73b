"""The RAG pipeline under test: corpus → chunker → retriever → compressor → generator.

``build_pipeline(cfg, dataset)`` returns None when every stage is off (``retriever=none``,
``compressor=none``, ``generator=precomputed``): the dataset's own contexts and answers are
scored as they are.
"""

from __future__ import annotations

from typing import Any


def build_pipeline(cfg: Any, dataset: Any):
    retriever = (cfg.get("retriever") or {}).get("name", "none")
    compressor = (cfg.get("compressor") or {}).get("name", "none")
    generator = (cfg.get("generator") or {}).get("name", "precomputed")
    if retriever == "none" and compressor == "none" and generator == "precomputed":
        return None
    raise NotImplementedError("pipeline stages are not built yet")
