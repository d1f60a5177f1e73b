"""Answer generators (``conf/generator/``): ``precomputed``, ``llm`` and ``extractive``.

- ``precomputed`` keeps the answers the dataset brings (nothing is generated).
- ``llm`` sends the query and the numbered contexts to any litellm model through a prompt
  template (``generate_v1``, or your own file).
- ``extractive`` is an offline baseline: the answer is the context sentence most similar to
  the query (lexical cosine, as the ``sentence`` compressor), optionally without the words
  the query already holds. It makes a sweep's answer metrics mean something without an API key.

    >>> g = ExtractiveGenerator()
    >>> g.generate("When was the Eiffel Tower built?", ["Paris has a tower. The Eiffel Tower was built in 1889."])
    'The Eiffel Tower was built in 1889.'
    >>> ExtractiveGenerator(drop_query_words=True).generate("When was the Eiffel Tower built?",
    ...                                                    ["Paris has a tower. The Eiffel Tower was built in 1889."])
    'in 1889.'
"""

from __future__ import annotations

from ragexp.errors import ConfigError
from ragexp.common.text import squad_normalize
from ragexp.matchers.sentences import split_sentences
from ragexp.pipeline.compressors import content_words, lexical_similarity
from ragexp.pipeline.llm import LLMClient, check_template, render


class Generator:
    name = "generator"
    active = True

    def generate(self, query: str, contexts: list[str]) -> str | None:
        raise NotImplementedError


class PrecomputedGenerator(Generator):
    """``generator=precomputed``: the dataset's own answers are scored."""

    active = False

    def __init__(self, name: str = "precomputed"):
        self.name = name

    def generate(self, query, contexts):  # pragma: no cover - never called
        return None


class ExtractiveGenerator(Generator):
    """The most query-like sentence of the contexts (ties: the higher-ranked context).

    ``drop_query_words``: remove the words the query already holds (SQuAD normalisation),
    leaving the part of the sentence that could be the answer. ``max_words``: cut the answer.
    ``empty_answer``: the answer when there is no context at all.
    """

    def __init__(self, name: str = "extractive", drop_query_words: bool = False, max_words: int | None = None,
                 empty_answer: str = ""):
        if max_words is not None and (isinstance(max_words, bool) or not isinstance(max_words, int) or max_words < 1):
            raise ConfigError(f"generator.max_words: expected a positive integer or null, got {max_words!r}")
        self.name, self.drop_query_words, self.max_words, self.empty_answer = name, drop_query_words, max_words, empty_answer

    def generate(self, query, contexts):
        q = content_words(query)
        best, best_score = None, -1.0
        for c in contexts:
            for s in split_sentences(c):
                score = lexical_similarity(q, s)
                if score > best_score:
                    best, best_score = s, score
        if best is None:
            return self.empty_answer
        answer = best
        if self.drop_query_words:
            asked = set(squad_normalize(query).split())
            kept = [w for w in best.split() if squad_normalize(w) and squad_normalize(w) not in asked]
            answer = " ".join(kept) or best
        if self.max_words is not None:
            answer = " ".join(answer.split()[:self.max_words])
        return answer


class LLMGenerator(Generator):
    """Answer with a litellm model from the query and the numbered contexts."""

    def __init__(self, name: str = "llm", model: str = "openai/gpt-4o-mini", prompt: str = "generate_v1",
                 api_base: str | None = None, api_key_env: str | None = None, temperature: float = 0.0,
                 max_tokens: int = 256, timeout_s: float = 60.0, max_retries: int = 2):
        check_template(prompt, ("query",), "generator")
        self.name, self.prompt = name, prompt
        self.client = LLMClient(model, who="generator", api_base=api_base, api_key_env=api_key_env,
                                temperature=temperature, max_tokens=max_tokens, timeout_s=timeout_s,
                                max_retries=max_retries)

    def generate(self, query, contexts):
        return self.client.complete(render(self.prompt, query=query, contexts=contexts))
