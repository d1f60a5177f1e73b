"""Tokenizers by name, loaded offline: a tiktoken encoding (``cl100k_base``, ``o200k_base``; the files litellm
bundles, never a download) or a Hugging Face ``tokenizer.json``. Used by the chunker, the compressor and the
``context_tokens`` metric (docs/pipeline.md, docs/metrics.md#context_tokens)."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from ragexp.errors import ConfigError


class _HFTokenizer:
    def __init__(self, path: Path):
        from tokenizers import Tokenizer

        self._tok = Tokenizer.from_file(str(path))

    def encode(self, text: str) -> list[int]:
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tok.decode(ids)


@lru_cache(maxsize=8)
def load_tokenizer(name: str):
    """A tokenizer with ``encode``/``decode``: a tiktoken encoding by name, or a tokenizer.json path."""
    p = Path(str(name)).expanduser()
    if p.is_dir():
        p = p / "tokenizer.json"
    if p.suffix == ".json":
        if not p.exists():
            raise ConfigError(f"tokenizer: file not found: {p}")
        return _HFTokenizer(p)
    offline_tiktoken()
    import tiktoken

    try:
        return tiktoken.get_encoding(str(name))
    except Exception as exc:  # noqa: BLE001 - tiktoken raises plain errors (unknown name, no network)
        raise ConfigError(f"tokenizer {name!r} cannot be loaded offline ({type(exc).__name__}); use cl100k_base, "
                          "o200k_base or a path to a tokenizer.json") from None


def offline_tiktoken() -> None:
    """Point tiktoken at the encodings litellm bundles, so no download is ever attempted."""
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return
    import importlib.util

    spec = importlib.util.find_spec("litellm")
    for base in (spec.submodule_search_locations or []) if spec else []:
        d = Path(base) / "litellm_core_utils" / "tokenizers"
        if d.is_dir():
            os.environ["TIKTOKEN_CACHE_DIR"] = str(d)
            return


__all__ = ["load_tokenizer", "offline_tiktoken"]
