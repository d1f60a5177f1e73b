"""Context compressors (``conf/compressor/``): ``none``, ``sentence``, ``truncate`` and ``llm``; each
maps ``(query, contexts, context_ids)`` to shorter, still aligned lists. Definitions: docs/pipeline.md,
"The stages in detail".

    >>> TruncateCompressor(max_tokens=5, unit="words").compress("q", ["a b c", "d e f g"], ["1", "2"])
    (['a b c', 'd e'], ['1', '2'])
    >>> s = SentenceCompressor(keep=1)
    >>> s.compress("Where is the Eiffel Tower?",
    ...            ["Paris is big. The Eiffel Tower is in Paris.", "Lyon has a river."], ["p1", "p2"])
    (['The Eiffel Tower is in Paris.'], ['p1'])
"""

from __future__ import annotations

import math

from ragexp.errors import ConfigError
from ragexp.common.text import squad_tokens
from ragexp.matchers.sentences import split_sentences
from ragexp.pipeline.chunking import join_units, load_tokenizer, split_units
from ragexp.pipeline.llm import LLMClient, check_template, render

_STOP = frozenset("""about above after again against all am and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have having he her
here hers herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
off on once only or other our ours ourselves out over own same she should so some such than that their theirs them
themselves then there these they this those through to too under until up very was we were what when where which
while who whom why will with would you your yours yourself yourselves""".split())


def content_words(text: str) -> frozenset[str]:
    """SQuAD-normalised tokens of ``text`` minus common English function words.

    >>> sorted(content_words("Where is the Eiffel Tower?"))
    ['eiffel', 'tower']
    """
    return frozenset(t for t in squad_tokens(text) if t not in _STOP)


def lexical_similarity(query_words: frozenset[str], text: str) -> float:
    """Cosine similarity of two word sets: |Q ∩ S| / sqrt(|Q| · |S|) (0 when either is empty).

    >>> lexical_similarity(frozenset({"eiffel", "tower"}), "The Eiffel Tower is tall") == 2 / math.sqrt(2 * 3)
    True
    """
    words = content_words(text)
    if not query_words or not words:
        return 0.0
    return len(query_words & words) / math.sqrt(len(query_words) * len(words))


def _kept(pieces: dict[int, str], ids: list[str] | None) -> tuple[list[str], list[str] | None]:
    """What a compressor keeps (context index → its text), in retrieved order, with the contexts' ids."""
    order = sorted(pieces)
    return [pieces[i] for i in order], (None if ids is None else [ids[i] for i in order])


class Compressor:
    name = "compressor"
    active = True

    def compress(self, query: str, contexts: list[str], ids: list[str] | None) -> tuple[list[str], list[str] | None]:
        raise NotImplementedError


class NoCompressor(Compressor):
    """``compressor=none``: contexts pass through unchanged."""

    active = False

    def __init__(self, name: str = "none"):
        self.name = name

    def compress(self, query, contexts, ids):
        return contexts, ids


class SentenceCompressor(Compressor):
    """Keep the ``keep`` sentences most similar to the query (ties: the earlier sentence).

    ``min_score`` drops kept sentences scoring below it (0 keeps ``keep`` sentences always).
    """

    def __init__(self, name: str = "sentence", keep: int = 3, similarity: str = "lexical",
                 model: str = "all-MiniLM-L6-v2", min_score: float = 0.0):
        if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
            raise ConfigError(f"compressor.keep: expected a positive number of sentences, got {keep!r}")
        if similarity not in ("lexical", "dense"):
            raise ConfigError(f"compressor.similarity: expected 'lexical' or 'dense', got {similarity!r}")
        self.name, self.keep, self.similarity, self.model, self.min_score = name, keep, similarity, model, min_score
        if similarity == "dense":
            from ragexp.pipeline.retrievers import resolve_model

            resolve_model(model)

    def _scores(self, query: str, sentences: list[str]) -> list[float]:
        if self.similarity == "lexical":
            q = content_words(query)
            return [lexical_similarity(q, s) for s in sentences]
        from ragexp.pipeline.retrievers import load_encoder

        enc = load_encoder(self.model)
        vecs = enc.encode([query, *sentences], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
        return [float(v @ vecs[0]) for v in vecs[1:]]

    def compress(self, query, contexts, ids):
        units = [(ci, s) for ci, c in enumerate(contexts) for s in split_sentences(c)]
        if not units:
            return _kept({}, ids)
        scores = self._scores(query, [s for _, s in units])
        ranked = sorted(range(len(units)), key=lambda i: (-scores[i], i))
        chosen = sorted(i for i in ranked[:self.keep] if scores[i] >= self.min_score)
        out: dict[int, list[str]] = {}
        for i in chosen:
            out.setdefault(units[i][0], []).append(units[i][1])
        return _kept({ci: " ".join(sentences) for ci, sentences in out.items()}, ids)


class TruncateCompressor(Compressor):
    """Keep at most ``max_tokens`` words or tokens of context, in rank order."""

    def __init__(self, name: str = "truncate", max_tokens: int = 256, unit: str = "tokens",
                 tokenizer: str = "cl100k_base"):
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigError(f"compressor.max_tokens: expected a positive integer, got {max_tokens!r}")
        if unit not in ("words", "tokens"):
            raise ConfigError(f"compressor.unit: expected 'words' or 'tokens', got {unit!r}")
        self.name, self.max_tokens, self.unit, self.tokenizer = name, max_tokens, unit, tokenizer
        if unit == "tokens":
            load_tokenizer(tokenizer)

    def compress(self, query, contexts, ids):
        left, kept = self.max_tokens, {}
        for i, c in enumerate(contexts):
            if left <= 0:
                break
            units = split_units(c, self.unit, self.tokenizer)
            piece = c if len(units) <= left else join_units(units[:left], self.unit, self.tokenizer)
            left -= min(len(units), left)
            if piece:
                kept[i] = piece
        return _kept(kept, ids)


class LLMCompressor(Compressor):
    """Ask a litellm model to keep only the helpful sentences of each context."""

    def __init__(self, name: str = "llm", model: str = "openai/gpt-4o-mini", prompt: str = "compress_v1",
                 api_base: str | None = None, api_key_env: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 512, timeout_s: float = 60.0, max_retries: int = 2):
        check_template(prompt, ("query", "context"), "compressor")
        self.name, self.prompt = name, prompt
        self.client = LLMClient(model, who="compressor", api_base=api_base, api_key_env=api_key_env,
                                temperature=temperature, max_tokens=max_tokens, timeout_s=timeout_s,
                                max_retries=max_retries)

    def compress(self, query, contexts, ids):
        kept = {}
        for i, c in enumerate(contexts):
            reply = self.client.complete(render(self.prompt, query=query, context=c))
            if reply and reply.strip().strip(".").upper() != "NONE":
                kept[i] = reply.strip()
        return _kept(kept, ids)
