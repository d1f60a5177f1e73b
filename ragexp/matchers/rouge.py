"""ROUGE exactly as rouge-score computes it (same floats; docs/metrics.md, "Matchers"), fast: each text
is tokenised once (:class:`Tokens` keeps its tokens, their set and per-token bit masks, so the work
stays linear in a text's length); the LCS length is Allison & Dix's bit-vector algorithm in Hyyrö's
formulation on Python integers; a matcher first bounds the LCS from above (distinct shared tokens
plus repeats) and skips it when that bound already fails the threshold.

    >>> rouge_l("Paris is the capital of France.",
    ...         "Paris is the capital of France and also the largest city in the country.")
    (0.42857142857142855, 1.0, 0.6)
    >>> lcs_length(tokens("a b c d e"), tokens("x b d e"))
    3
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from typing import Sequence

from ragexp.common.caches import text_cache
from ragexp.common.text import overlap, token_counts

_NON_ALNUM = re.compile(r"[^a-z0-9]+")
#: up to this many tokens a text's bit masks are all built at once (see Tokens.masks_for)
_EAGER = 2048


class Tokens:
    """One text's rouge-score tokens, with what the LCS and the bounds need. The bit mask of a token's
    positions is built when the LCS first asks for it (:meth:`mask`), from a positions index made once:
    linear in the text's length (one mask per token shared with the other text, not one per token)."""

    __slots__ = ("seq", "set", "n", "repeats", "_positions", "_masks", "_all")

    def __init__(self, seq: tuple[str, ...]):
        self.seq, self.n = seq, len(seq)
        self.set = frozenset(seq)
        self.repeats = self.n - len(self.set)  # occurrences beyond each token's first
        self._positions: dict[str, list[int]] | None = None
        self._masks: dict[str, int] = {}
        self._all = False

    def masks_for(self, other: "Tokens") -> dict[str, int]:
        """The masks of the tokens ``other`` shares with this text. A text of up to ``_EAGER`` tokens
        (a sentence, a passage) builds all of its masks at once, one OR per position (cheap while
        the integers are short); a longer one only the shared tokens', each in one pass."""
        if self.n > _EAGER:
            return {tok: self.mask(tok) for tok in self.set & other.set}
        if not self._all:
            masks: dict[str, int] = {}
            for i, tok in enumerate(self.seq):
                masks[tok] = masks.get(tok, 0) | (1 << i)
            self._masks, self._all = masks, True
        return self._masks

    def mask(self, tok: str) -> int:
        """The token's positions as bits (bit i set where ``seq[i] == tok``); 0 when it does not occur."""
        m = self._masks.get(tok)
        if m is None:
            if self._positions is None:
                positions: dict[str, list[int]] = {}
                for i, t in enumerate(self.seq):
                    positions.setdefault(t, []).append(i)
                self._positions = positions
            m = self._masks[tok] = _bits(self._positions.get(tok, ()))
        return m


@text_cache(per_char=56)  # with the bit masks the LCS adds
def _plain_tokens(text: str) -> Tokens:
    # Same tokens as rouge_score.tokenize.tokenize(text, None): after the substitution only
    # [a-z0-9] and spaces remain, so str.split() yields exactly its valid, non-empty tokens. An ASCII
    # text gets the same substitution byte by byte in C (lowercased, every byte but [a-z0-9] a space).
    if text.isascii():
        return Tokens(tuple(text.encode().lower().translate(_SPACED).decode().split()))
    return Tokens(tuple(_NON_ALNUM.sub(" ", text.lower()).split()))


#: bytes.translate's table: [a-z0-9] kept, any other byte a space (what _NON_ALNUM's substitution does)
_SPACED = bytes(b if b in b"abcdefghijklmnopqrstuvwxyz0123456789" else 32 for b in range(256))


_STEMMER = None


@text_cache(per_char=56)
def _stemmed_tokens(text: str) -> Tokens:
    global _STEMMER
    from rouge_score import tokenize

    if _STEMMER is None:
        from nltk.stem import porter

        _STEMMER = porter.PorterStemmer()
    return Tokens(tuple(tokenize.tokenize(text, _STEMMER)))


def _bits(indices) -> int:
    """An integer with the given bits set, in one pass (OR-ing ``1 << i`` one by one is quadratic)."""
    indices = list(indices)
    buf = bytearray((max(indices) >> 3) + 1 if indices else 0)
    for i in indices:
        buf[i >> 3] |= 1 << (i & 7)
    return int.from_bytes(buf, "little")


def tokens(text: str, use_stemmer: bool = False) -> Tokens:
    """rouge-score's default tokenisation of ``text`` (cached)."""
    return _stemmed_tokens(text) if use_stemmer else _plain_tokens(text)


def lcs_length(a: Tokens, b: Tokens) -> int:
    """Length of the longest common subsequence of two token sequences (bit-parallel)."""
    if a.n < b.n:
        a, b = b, a  # bits over the longer text, one step per token of the shorter
    m = a.n
    if m == 0 or b.n == 0:
        return 0
    masks = a.masks_for(b)
    full = (1 << m) - 1
    v = full
    for tok in b.seq:
        u = masks.get(tok)
        if u is None:
            continue
        u &= v
        v = ((v + u) | (v - u)) & full
    return m - v.bit_count()


def fmeasure(precision: float, recall: float) -> float:
    """rouge-score's F-measure: ``2PR / (P + R)``, 0 when both are 0."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def rouge_l(target: str, prediction: str, use_stemmer: bool = False) -> tuple[float, float, float]:
    """(precision, recall, F) of ROUGE-L, as ``RougeScorer(['rougeL']).score(target, prediction)``."""
    return rouge_l_of(tokens(target, use_stemmer), tokens(prediction, use_stemmer))


def rouge_l_of(t: Tokens, p: Tokens) -> tuple[float, float, float]:
    """:func:`rouge_l` of two texts' tokens (a prediction tokenised once for all its targets)."""
    if not t.n or not p.n:
        return 0.0, 0.0, 0.0
    lcs = lcs_length(t, p)
    precision, recall = lcs / p.n, lcs / t.n
    return precision, recall, fmeasure(precision, recall)


def _ngrams(seq: Sequence[str], n: int) -> Counter:
    return Counter(zip(*(seq[i:] for i in range(n)))) if len(seq) >= n else Counter()


@text_cache(per_char=64)
def _ngram_counts(text: str, n: int, use_stemmer: bool) -> tuple[dict[tuple[str, ...], int], int]:
    # a text's n-gram counts and their total, once per text: a run scores the same reference
    # (and rouge1/rouge2 the same answer) many times
    tok = tokens(text, use_stemmer)
    if n == 1:
        return token_counts(tok.seq), tok.n  # the unigrams are the tokens (keyed by token, not 1-tuple: both sides alike)
    counts = _ngrams(tok.seq, n)
    return dict(counts), sum(counts.values())


def rouge_n(target: str, prediction: str, n: int, use_stemmer: bool = False) -> tuple[float, float, float]:
    """(precision, recall, F) of ROUGE-N, as rouge-score's ``rouge{n}``."""
    t, t_total = _ngram_counts(target, n, use_stemmer)
    p, p_total = _ngram_counts(prediction, n, use_stemmer)
    same = overlap(t, p)
    precision = same / max(p_total, 1)
    recall = same / max(t_total, 1)
    return precision, recall, fmeasure(precision, recall)


@lru_cache(maxsize=4096)
def min_passing_lcs(n_target: int, threshold: float, inclusive: bool) -> int | None:
    """The least LCS whose recall ``lcs / n_target`` clears the threshold, in the same float
    arithmetic as a direct comparison; None when no LCS can (e.g. a threshold of 1, strict)."""
    if n_target == 0:
        recall = 0.0  # rouge-score's value for an empty target
        return 0 if (recall >= threshold if inclusive else recall > threshold) else None
    for lcs in range(n_target + 1):
        recall = lcs / n_target
        if recall >= threshold if inclusive else recall > threshold:
            return lcs
    return None


__all__ = ["Tokens", "tokens", "lcs_length", "fmeasure", "rouge_l", "rouge_l_of", "rouge_n", "min_passing_lcs"]


# -- the matcher -------------------------------------------------------------------------------

from ragexp.matchers.base import Matcher  # noqa: E402  (the matcher builds on the functions above)
from ragexp.matchers.rouge_package import package_text, union_lcs  # noqa: E402

#: Whose ROUGE-L a matcher computes: rouge-score's (the default) or the ``rouge`` package's,
#: which continuous-eval uses (:mod:`ragexp.matchers.rouge_package`).
IMPLEMENTATIONS = ("rouge_score", "rouge_package")


class RougeMatcher(Matcher):
    """A retrieved component matches a ground-truth component when rouge-score's ROUGE-L recall
    of the retrieved component against the ground truth, ``LCS / |ground truth|``, is
    ``> threshold`` (``>= threshold`` with ``inclusive``). With ``implementation="rouge_package"``
    the recall is the ``rouge`` package's instead (continuous-eval's matchers: case kept,
    punctuation kept, sentences cut at every full stop, union LCS over distinct words; see
    :mod:`ragexp.matchers.rouge_package`); a text the package cannot score matches nothing.

    The test vectors: the seed's Paris example and continuous-eval's Shakespeare one:

    >>> from ragexp.matchers import build_matcher
    >>> chunk = build_matcher("rouge_chunk")
    >>> r = chunk.match(["Paris is the capital of France and also the largest city in the country.",
    ...                  "Lyon is a major city in France."], ["Paris is the capital of France."])
    >>> r.precision(), r.recall()
    (0.5, 1.0)
    >>> sentence = build_matcher("rouge_sentence")
    >>> r = sentence.match(["Shakespeare was a playwright.", "Romeo and Juliet is a play by Shakespeare."],
    ...                    ["Shakespeare was a playwright.", "Romeo and Juliet is a play by William Shakespeare."])
    >>> r.precision(), r.recall()
    (1.0, 1.0)
    """

    def __init__(self, granularity: str, *, threshold: float, inclusive: bool, use_stemmer: bool, implementation: str):
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be a number in [0, 1], got {threshold!r}")
        if implementation not in IMPLEMENTATIONS:
            raise ValueError(f"implementation must be one of {', '.join(IMPLEMENTATIONS)}, got {implementation!r}")
        if use_stemmer and implementation != "rouge_score":
            raise ValueError("use_stemmer is rouge-score's option; implementation 'rouge_package' has no stemmer "
                             "(set use_stemmer=false)")
        super().__init__(granularity)
        self.name = f"rouge_{granularity}"
        self.threshold = float(threshold)
        self.inclusive = bool(inclusive)
        self.use_stemmer = bool(use_stemmer)
        self.implementation = implementation
        if implementation == "rouge_package":
            self._prepare = self._prepare_package  # type: ignore[method-assign]
            self._hits = self._hits_package  # type: ignore[method-assign]

    def _clean(self, truth: str) -> str:
        if self.implementation == "rouge_package":
            # continuous-eval compares and de-duplicates ground truths as given: outer white space
            # changes the package's sentences ("Paris. " has an empty last one)
            return truth if truth.strip() else ""
        return truth.strip()

    def _prepare(self, truths: Sequence[str]) -> tuple:
        # Every distinct token a retrieved component c shares with ground truth j adds at most one
        # to their LCS, plus the repeats: LCS ≤ |shared distinct tokens| + min(repeats in j, in c).
        # Only the ground truths whose bound reaches the least passing LCS get the exact LCS.
        always, candidates = [], []
        for j, t in enumerate(truths):
            tok = tokens(t, self.use_stemmer)
            need = min_passing_lcs(tok.n, self.threshold, self.inclusive)
            if need == 0:
                always.append(j)
            elif need is not None:
                candidates.append((need, j, tok))
        return always, sorted(candidates, key=lambda cand: cand[0])

    def _hits(self, component: str, prepared: tuple) -> frozenset[int]:
        always, candidates = prepared
        c = tokens(component, self.use_stemmer)
        n, words, repeats = c.n, c.set, c.repeats
        found = list(always)
        for need, j, tok in candidates:  # by the least passing LCS, so the first out of reach ends the walk
            if n < need:
                break
            if c.seq == tok.seq:  # the same tokens (the gold passage retrieved): LCS = n ≥ need
                found.append(j)
                continue
            shared = len(words & tok.set)
            if shared and shared + (repeats if repeats < tok.repeats else tok.repeats) >= need \
                    and lcs_length(tok, c) >= need:
                found.append(j)
        return frozenset(found)

    # -- implementation: rouge_package (continuous-eval's numbers) -------------------------------
    def _prepare_package(self, truths: Sequence[str]) -> tuple:
        # R = |U| / m with m the truth's distinct words and U ⊆ the words both texts share, so
        # only truths sharing at least `need` distinct words with a component get the union LCS
        always, candidates = [], []
        for j, t in enumerate(truths):
            text = package_text(t)
            if text is None:
                continue  # the package raises: never a match
            need = min_passing_lcs(len(text.words), self.threshold, self.inclusive)
            if need == 0:
                always.append(j)
            elif need is not None:
                candidates.append((j, text, need))
        return always, candidates

    def _hits_package(self, component: str, prepared: tuple) -> frozenset[int]:
        always, candidates = prepared
        c = package_text(component)
        if c is None:
            return frozenset()
        found = list(always)
        words = c.words
        for j, text, need in candidates:
            if len(text.words & words) >= need and union_lcs(text, c, stop_at=need) >= need:
                found.append(j)
        return frozenset(found)


__all__ += ["IMPLEMENTATIONS", "RougeMatcher"]
