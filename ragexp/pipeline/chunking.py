"""Cutting a corpus into retrievable chunks (``conf/chunker/``). Each chunk keeps its source passage's
id (``doc_id``), so ground truth given as ids of the original corpus still resolves after re-chunking.
Definitions: docs/pipeline.md, "The stages in detail".

    >>> chunks = Chunker(size=4, overlap=1).split({"d1": "one two three four five six seven"})
    >>> [(c.id, c.doc_id, c.text) for c in chunks]
    [('d1#0', 'd1', 'one two three four'), ('d1#1', 'd1', 'four five six seven')]
    >>> [c.text for c in Chunker(size=None).split({"d1": "kept  as it is"})]
    ['kept  as it is']
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from ragexp.common.tokenizers import load_tokenizer
from ragexp.errors import ConfigError

@dataclass(frozen=True, slots=True)
class Chunk:
    """One retrievable unit: its own id, the id of the passage it came from, and its text."""

    id: str
    doc_id: str
    text: str


class Chunker:
    """Split passages into overlapping windows of ``size`` words or tokens.

    ``size``: units per chunk, or None to keep each passage whole. ``overlap``: units shared by
    consecutive chunks (0 ≤ overlap < size). ``unit``: ``words`` (white-space separated) or
    ``tokens``. ``tokenizer``: for tokens, a tiktoken encoding name or a path to a Hugging Face
    ``tokenizer.json``.
    """

    def __init__(self, size: int | None = None, overlap: int = 0, unit: str = "words",
                 tokenizer: str = "cl100k_base", name: str | None = None):
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise ConfigError(f"chunker.size: expected a positive number of {unit} or null (keep passages whole), got {size!r}")
        if isinstance(overlap, bool) or not isinstance(overlap, int) or overlap < 0:
            raise ConfigError(f"chunker.overlap: expected a non-negative integer, got {overlap!r}")
        if size is not None and overlap >= size:
            raise ConfigError(f"chunker.overlap: expected less than chunker.size ({size}), got {overlap}")
        if unit not in ("words", "tokens"):
            raise ConfigError(f"chunker.unit: expected 'words' or 'tokens', got {unit!r}")
        self.size, self.overlap, self.unit, self.tokenizer = size, overlap, unit, tokenizer
        self.name = name or ("none" if size is None else unit)
        if size is not None and unit == "tokens":
            load_tokenizer(tokenizer)  # fail now, before any work, if it cannot be loaded offline

    def key(self) -> dict[str, Any]:
        """What determines the chunks (part of the index cache key)."""
        if self.size is None:
            return {"size": None}
        k: dict[str, Any] = {"size": self.size, "overlap": self.overlap, "unit": self.unit}
        if self.unit == "tokens":
            k["tokenizer"] = self.tokenizer
        return k

    def split(self, corpus: dict[str, str]) -> list[Chunk]:
        out: list[Chunk] = []
        for doc_id, text in corpus.items():
            for n, piece in enumerate(self._pieces(text)):
                out.append(Chunk(f"{doc_id}#{n}", doc_id, piece))
        return out

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where each chunk :meth:`split` makes of ``text`` lies in it: ``(start, end)`` character offsets, in
        order, so ``text[start:end]`` holds the chunk's words (``split`` joins words with one space; tokens
        decode to the same characters). A Hugging Face ``tokenizer.json`` gives no offsets here.

        >>> Chunker(size=2, overlap=0).spans("one  two three")
        [(0, 8), (9, 14)]
        """
        if self.size is None:
            return [(0, len(text))] if text.strip() else []
        if self.unit == "words":
            bounds = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
        else:
            enc = load_tokenizer(self.tokenizer)
            if not hasattr(enc, "decode_with_offsets"):
                raise ConfigError("chunk offsets need a tiktoken encoding (or chunker=none / words), "
                                  f"not the tokenizer file {self.tokenizer}")
            ids = enc.encode(text)
            _, starts = enc.decode_with_offsets(ids)
            ends = starts[1:] + [len(text)]
            bounds = list(zip(starts, ends))
        return [(w[0][0], w[-1][1]) for w in _windows(bounds, self.size, self.overlap) if w]

    def _pieces(self, text: str) -> list[str]:
        if self.size is None:
            return [text] if text.strip() else []
        units = split_units(text, self.unit, self.tokenizer)
        return [join_units(w, self.unit, self.tokenizer) for w in _windows(units, self.size, self.overlap)]


def _windows(units: list[Any], size: int, overlap: int) -> list[list[Any]]:
    """Consecutive windows of ``size`` units stepping by ``size - overlap``.

    >>> _windows(list("abcdefg"), 3, 1)
    [['a', 'b', 'c'], ['c', 'd', 'e'], ['e', 'f', 'g']]
    >>> _windows(list("abcd"), 3, 1)
    [['a', 'b', 'c'], ['c', 'd']]
    """
    step = size - overlap
    out = []
    start = 0
    while start < len(units):
        out.append(units[start:start + size])
        if start + size >= len(units):
            break
        start += step
    return out


def split_units(text: str, unit: str, tokenizer: str) -> list[Any]:
    """The words (white-space separated) or token ids of ``text``."""
    return text.split() if unit == "words" else load_tokenizer(tokenizer).encode(text)


def join_units(units: list[Any], unit: str, tokenizer: str) -> str:
    """The text of consecutive units: words joined by a space, or token ids decoded."""
    return " ".join(units) if unit == "words" else load_tokenizer(tokenizer).decode(units).strip()


def corpus_digest(corpus: dict[str, str]) -> str:
    """A content digest of the corpus (ids and texts, in order), for the index cache key."""
    h = hashlib.sha256()
    for doc_id, text in corpus.items():
        h.update(json.dumps([doc_id, text], ensure_ascii=False).encode("utf-8", "surrogatepass"))  # any id digests
        h.update(b"\n")
    return h.hexdigest()
