"""Tokenisers shared by the metrics, each cached per text: :func:`squad_tokens` (SQuAD's answer
normalisation; by character in texts that hold CJK, :func:`mixed_tokens`), :func:`keywords` (docs/metrics.md, "Keywords and Chinese text"; Chinese through
:func:`ragexp.common.segmentation.segment`) and :func:`answer_tokens` (SQuAD tokens for Latin text,
jieba words for Chinese). Definitions: docs/metrics.md (``token_f1``, ``keyword_overlap``).

    >>> squad_tokens("The Cat, a dog!")
    ['cat', 'dog']
    >>> sorted(keywords("Join on customer_id, not _id_"))
    ['customer_id', 'id', 'join', 'not', 'on']
    >>> sorted(keywords("RAG是一种结合检索和生成的模型架构"))
    ['rag', '一种', '架构', '检索', '模型', '生成', '结合']
"""

from __future__ import annotations

import re
import string
import unicodedata
from typing import Iterable

from ragexp.common.caches import text_cache
from ragexp.common.segmentation import segment

_PUNCT = set(string.punctuation)
#: str.translate's table deleting SQuAD's punctuation: the same text as keeping the characters not in _PUNCT
_NO_PUNCT = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_HAN_RUN = re.compile(f"[{_CJK}]+")
# a word: letters/digits, with `_` kept inside it (customer_id is one word, as \w+ reads it) but not at
# its ends (_emphasis_, __init__ → emphasis, init)
_WORD_OR_HAN = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+(?:_+[^\\W_{_CJK}]+)*")


def squad_normalize(text: str) -> str:
    """SQuAD's official ``normalize_answer``: lower, strip punctuation and articles, fix spaces."""
    return " ".join(_squad_words(text))


def _squad_words(text: str) -> list[str]:
    """:func:`squad_normalize`'s words, before they are joined by single spaces."""
    words = _ascii_words(text)
    if words is not None:
        return [w for w in words if w not in _DROPPED]
    return _ARTICLES.sub(" ", text.lower().translate(_NO_PUNCT)).split()


#: SQuAD's punctuation, and the white space ``bytes.split`` and ``str.split`` both split an ASCII text on
_PUNCT_BYTES = string.punctuation.encode()
_SPACE_BYTES = b" \t\n\r\x0b\x0c"


def _ascii_words(text: str) -> list[str] | None:
    """An ASCII text's words after SQuAD's lowercasing and punctuation removal, articles still in, when
    they are letters and digits only (None otherwise, e.g. a control character or non-ASCII text).

    Then each article the expression ``\\b(a|an|the)\\b`` would remove is a whole word, so leaving the words
    ``a``, ``an`` and ``the`` out gives :func:`squad_normalize`'s words; the bytes' C-level lowercasing and
    deletion replace ``str.translate``'s per-character table look-ups (docs/performance.md, "Deterministic metrics").

    >>> _ascii_words("The Cat's (a) hat!"), _ascii_words("naïve"), _ascii_words("tab\\x01")
    (['the', 'cats', 'a', 'hat'], None, None)
    """
    if not text.isascii():
        return None
    kept = text.encode().lower().translate(None, _PUNCT_BYTES)
    if not kept.translate(None, _SPACE_BYTES).isalnum():  # empty, or a character neither a word's nor a space
        return None
    return kept.decode().split()


#: the characters a text is segmented one by one for (docs/metrics.md, "Keywords and Chinese text"):
#: CJK ideographs (the blocks of ``_CJK``) and Japanese kana
_ONE_BY_ONE = f"\u3040-\u30ff{_CJK}"
_HAS_CJK = re.compile(f"[{_ONE_BY_ONE}]")
_CJK_OR_RUN = re.compile(f"[{_ONE_BY_ONE}]|[^{_ONE_BY_ONE}]+")
_DROPPED = frozenset(("a", "an", "the"))


def has_cjk(text: str) -> bool:
    """True when ``text`` holds a CJK ideograph or a kana (the texts :func:`mixed_tokens` applies to)."""
    return not text.isascii() and _HAS_CJK.search(text) is not None


def mixed_tokens(text: str) -> list[str]:
    """The SQuAD tokens of a text that holds CJK, by mixed segmentation (CMRC 2018's convention):
    lowercased; ASCII punctuation removed as SQuAD removes it (``don't`` → ``dont``), any other
    punctuation (Unicode's P categories: ，。「」…) a separator; each CJK ideograph or kana a token,
    the other runs split on white space; the articles a / an / the left out as SQuAD leaves them out.

    >>> mixed_tokens("铁观音属于乌龙茶，是一种半发酵茶。")
    ['铁', '观', '音', '属', '于', '乌', '龙', '茶', '是', '一', '种', '半', '发', '酵', '茶']
    >>> mixed_tokens("The RAG模型 (v2.0)")
    ['rag', '模', '型', 'v20']
    """
    kept = "".join(" " if unicodedata.category(ch)[0] == "P" else ch for ch in text.lower() if ch not in _PUNCT)
    return [m.group(0) for piece in kept.split() for m in _CJK_OR_RUN.finditer(piece)
            if m.group(0) not in _DROPPED]


def answer_normalize(text: str) -> str:
    """What ``exact_match`` compares: :func:`squad_normalize`, or the mixed tokens joined by spaces
    when the text holds CJK."""
    return " ".join(mixed_tokens(text)) if has_cjk(text) else squad_normalize(text)


@text_cache(per_char=16)  # bytes an entry holds: docs/performance.md, "Scale"
def _squad_tokens(text: str) -> tuple[str, ...]:
    return tuple(_token_list(text))


def _token_list(text: str) -> list[str]:
    """:func:`squad_tokens`, uncached: :func:`mixed_tokens` for a text with CJK, else the words of
    ``squad_normalize(text)`` (not joined and split again)."""
    return mixed_tokens(text) if has_cjk(text) else _squad_words(text)


def squad_tokens(text: str) -> list[str]:
    """Tokens of ``text`` after SQuAD normalisation; by :func:`mixed_tokens` when it holds CJK."""
    return list(_squad_tokens(text))


@text_cache(per_char=26)
def squad_counts(text: str) -> tuple[dict[str, int], int]:
    """The SQuAD tokens of ``text`` counted (token → occurrences), and how many there are (cached: a
    run meets the same reference in several metrics; the tokens themselves are not kept).

    >>> squad_counts("The cat and the hat, a cat.")
    ({'cat': 2, 'and': 1, 'hat': 1}, 4)
    """
    words = _ascii_words(text)
    if words is None:
        toks = _token_list(text)
        return token_counts(toks), len(toks)
    counts = token_counts(words)  # the articles counted, then taken out: one pass, no filtered list
    n = len(words)
    for article in _DROPPED:
        if article in counts:
            n -= counts.pop(article)
    return counts, n


def squad_bag(text: str) -> tuple[list[str], int]:
    """The SQuAD tokens of ``text`` as a list to count other texts' tokens in (``list.count``, in C), and how
    many tokens it has; uncached (an answer is met once per metric). The list of an ASCII text may still
    hold the articles a / an / the, which are never a SQuAD token: count in it only the tokens of
    :func:`squad_counts` or :func:`squad_tokens`.

    >>> words, n = squad_bag("The cat saw a cat.")
    >>> n, words.count("cat"), words.count("saw")
    (3, 2, 1)
    """
    words = _ascii_words(text)
    if words is None:
        words = _token_list(text)
        return words, len(words)
    return words, len(words) - sum(map(words.count, _DROPPED))


def bag_overlap(words: list[str], counts: dict[str, int]) -> int:
    """The multiset overlap of :func:`squad_bag`'s list and another text's :func:`squad_counts`, walking the
    counts (:func:`overlap` of the two texts' counts, without counting the list while the counts are a few:
    a reference answer's; each ``list.count`` walks the whole list).

    >>> bag_overlap(squad_bag("the cat saw a cat")[0], {"cat": 1, "dog": 2})
    1
    """
    if len(counts) > 8:  # a long text's counts: the list counted once costs less than a walk per token
        return overlap(token_counts(words), counts)
    same = 0
    for token, c in counts.items():
        k = words.count(token)
        same += c if c < k else k
    return same


def token_counts(tokens: Iterable[str]) -> dict[str, int]:
    """Each token's occurrences, in first-seen order: what ``dict(Counter(tokens))`` holds, without a Counter
    made and copied (a run counts every answer and reference; docs/performance.md).

    >>> token_counts(["the", "cat", "the"])
    {'the': 2, 'cat': 1}
    """
    counts: dict[str, int] = {}
    get = counts.get
    for t in tokens:
        counts[t] = get(t, 0) + 1
    return counts


def overlap(a: dict, b: dict) -> int:
    """The multiset overlap of two counts, ``sum((Counter(a) & Counter(b)).values())``, walking the smaller.

    >>> overlap({"a": 2, "b": 1}, {"a": 1, "c": 4})
    1
    """
    if len(a) > len(b):
        a, b = b, a
    return sum(min(c, b[t]) for t, c in a.items() if t in b)


@text_cache(per_char=20)
def _word_tokens(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for m in _WORD_OR_HAN.finditer(text.lower()):
        piece = m.group(0)
        if _HAN_RUN.fullmatch(piece):
            out.extend(w for w in segment(piece) if w.strip())  # jieba is imported when Chinese text appears
        else:
            out.append(piece)
    return tuple(out)


def word_tokens(text: str) -> list[str]:
    """Lowercased word tokens; Chinese runs segmented by jieba; punctuation dropped."""
    return list(_word_tokens(text))


#: A short English stop-word list (function words only), used when ``stopwords: english``.
ENGLISH_STOPWORDS = frozenset(
    """a an the and or but if then else of to in on at by for with from as into onto over under
    about above below between through during before after is are was were be been being am do
    does did doing have has had having it its it's this that these those there here what which
    who whom whose when where why how i me my we our you your he him his she her they them their
    not no nor so too very can could should would will shall may might must just than also only
    such each both all any some more most other own same again once up down out off""".split()
)


def stopword_set(stopwords: str | list[str] | None) -> frozenset[str]:
    """Resolve the ``stopwords`` option: None/'none', 'english', or an explicit list."""
    if stopwords is None or stopwords == "none":
        return frozenset()
    if stopwords == "english":
        return ENGLISH_STOPWORDS
    if isinstance(stopwords, str):
        raise ValueError(f"stopwords must be 'none', 'english' or a list of words, got {stopwords!r}")
    return frozenset(w.lower() for w in stopwords)


@text_cache(per_char=30)
def keywords(text: str, stopwords: frozenset[str] = frozenset(), min_len: int = 2) -> frozenset[str]:
    """The keyword set of docs/metrics.md#keyword_overlap: distinct lowercased words of ``min_len`` or more characters (cached)."""
    return frozenset(t for t in _word_tokens(text) if len(t) >= min_len and t not in stopwords)


def answer_tokens(text: str) -> list[str]:
    """SQuAD tokens for Latin-script text, jieba words (punctuation dropped) when it holds Chinese."""
    if _HAN_RUN.search(text):
        return word_tokens(text)
    return squad_tokens(text)
