"""The filters that need no model (docs/testset.md, "Filters"): each returns the reason a candidate is
dropped, or None.

- ``refusal``: the reference answer declines ("not in the context", "cannot be determined", ...);
- ``length``: question of ``q_words`` words (min, max), answer of at most ``a_max_words`` and not empty;
- ``language``: the question's language is not the passage's (langdetect, seeded): different writing
  systems always count; within one script only when the question shares fewer than half of its words
  (3+ letters) with the passage and langdetect gives it another language with probability ≥ 0.9, for a
  question of at least 6 words (short questions are guessed poorly);
- ``near_duplicate``: the question's keyword set (:func:`ragexp.common.text.keywords`) has Jaccard
  similarity ≥ ``threshold`` (``filters.duplicate_similarity``) with an earlier kept question's, or the same normalised text.

    >>> refusal("The context does not mention it."), refusal("Paris")
    ('does not mention', None)
    >>> near_duplicates(["Who built the tower?", "Who built the tower ?", "When did it open?"], threshold=0.8)
    [None, 0, None]
"""

from __future__ import annotations

import math
import re
import threading
import unicodedata
from collections import Counter
from functools import lru_cache

from ragexp.common.text import keywords

_REFUSAL = re.compile(
    r"\b(?:not (?:mentioned|stated|present|provided|given|found|specified|available|included|covered|answerable)"
    r"|(?:does|do|did) not (?:mention|say|state|provide|specify|contain|include|answer)"
    r"|(?:cannot|can ?not|can't|unable to) (?:be )?(?:answer|determine|find|tell|know|infer)\w*"
    r"|no (?:information|mention|answer)|unanswerable|i don'?t know|not in the (?:context|passage|text))\b"
    r"|^\s*(?:n/?a|none|unknown)\s*\.?\s*$", re.I)


def refusal(answer: str) -> str | None:
    m = _REFUSAL.search(answer or "")
    return m.group(0).strip().lower() if m else None


def length(question: str, answer: str, q_words: tuple[int, int], a_max_words: int, answerable: bool = True) -> str | None:
    nq, na = len(question.split()), len(answer.split())
    if nq < q_words[0]:
        return f"question of {nq} words (< {q_words[0]})"
    if nq > q_words[1]:
        return f"question of {nq} words (> {q_words[1]})"
    if answerable and na == 0:
        return "empty reference answer"
    if na > a_max_words:
        return f"answer of {na} words (> {a_max_words})"
    return None


@lru_cache(maxsize=65536)
def _script_of(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return "CJK" if name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL")) else name.split(" ")[0]


def script(text: str) -> str | None:
    """The writing system most letters of ``text`` belong to (LATIN, CJK, CYRILLIC, ARABIC, ...); a tie goes to
    the one met first.

    >>> script("Où est la gare ?"), script("東京タワーは Tokyo"), script("12 34")
    ('LATIN', 'CJK', None)
    """
    counts: dict[str, int] = {}
    for ch, k in Counter(text).items():  # each distinct character named once, in order of first appearance
        if ch.isalpha():
            s = _script_of(ch)
            counts[s] = counts.get(s, 0) + k
    return max(counts, key=counts.get) if counts else None  # type: ignore[arg-type]


#: Chinese characters, as ragexp.common.text segments them (a question without any shares no Chinese word)
_HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
#: held while langdetect loads its language profiles (:func:`warm`), so no detection reads them half-loaded
_LOADING = threading.Lock()


def warm(chinese: bool = False) -> None:
    """Load langdetect's profiles now (about half a second of CPU), and with ``chinese`` jieba's dictionary
    (about a second): ``ragexp.generate`` does it in a thread while its first requests are out, instead of on
    the judge's event loop at the first detection or the first question quoting Chinese characters, where
    it held every request in flight (benchmarks/bench_generate.py). jieba and :data:`_LOADING` make a
    filter that needs either wait for the load to finish, never read it half-done."""
    detect("warm up the language profiles")
    if chinese:
        keywords("预热")  # jieba loads its dictionary under its own lock at the first Chinese text


def has_chinese(text: str) -> bool:
    """True when ``text`` holds a Chinese character (which the keyword rule segments with jieba)."""
    return _HAN.search(text) is not None


@lru_cache(maxsize=4096)
def detect(text: str) -> list[tuple[str, float]]:
    """langdetect's (language, probability) guesses, seeded so the same text always gets the same answer."""
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

    with _LOADING:
        DetectorFactory.seed = 0
        try:
            return [(g.lang, g.prob) for g in detect_langs(text)]
        except LangDetectException:
            return []


def language(question: str, passage: str) -> tuple[str | None, str | None]:
    """(the passage's language when it was detected, the reason to drop the question or None). A question
    that shares at least half of its keywords with the passage is in the passage's language (shared words are
    shared language): nothing is detected. Otherwise the passage's first 400 characters and the question are."""
    sp, sq = script(passage), script(question)
    if sp and sq and sp != sq:
        return None, f"question in {sq} script, passage in {sp}"
    q_kw = keywords(question, min_len=3)
    if not _HAN.search(question):  # its words cannot be Chinese ones: the passage's Chinese is not segmented (jieba)
        passage_words = keywords(_HAN.sub(" ", passage), min_len=3)
    else:
        passage_words = keywords(passage, min_len=3)
    if q_kw and len(q_kw & passage_words) >= len(q_kw) / 2:
        return None, None  # not detected: the shared words settle it
    guesses = detect(passage[:400])
    lang = guesses[0][0] if guesses else None
    if lang and len(question.split()) >= 6:
        q = detect(question)
        if q and q[0][0] != lang and q[0][1] >= 0.9:
            return lang, f"question in '{q[0][0]}' ({q[0][1]:.2f}), passage in '{lang}'"
    return lang, None


def _norm(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def near_duplicates(questions: list[str], threshold: float) -> list[int | None]:
    """For each question, the index of the earlier non-duplicate it repeats (module docstring), or None.

    Only the earlier questions that could reach ``threshold`` are compared (prefix filtering: with the words of
    every set in one order, two sets of Jaccard similarity ≥ t share a word among the first
    ``len - ceil(t * len) + 1`` of each), so 1,000 templated questions take milliseconds, not a second.
    """
    sets = [keywords(q) for q in questions]
    norms = [_norm(q) for q in questions]
    freq = Counter(w for kw in sets for w in kw)
    by_norm: dict[str, int] = {}  # the first kept question of each normalised text
    posting: dict[str, list[int]] = {}  # word -> kept questions with it in their prefix, in order
    out: list[int | None] = []
    for i, (kw, norm) in enumerate(zip(sets, norms)):
        twin = by_norm.get(norm)
        if kw and threshold > 0:
            ordered = sorted(kw, key=lambda w: (freq[w], w))  # rarest first: short postings
            prefix = ordered[:len(kw) - math.ceil(threshold * len(kw) - 1e-9) + 1]
            seen: set[int] = set()
            for w in prefix:
                for j in posting.get(w, ()):
                    if j in seen or (twin is not None and j >= twin):
                        continue
                    seen.add(j)
                    kj = sets[j]
                    if len(kw & kj) / len(kw | kj) >= threshold:
                        twin = j
        elif kw:  # threshold 0: any earlier kept question with words repeats it
            twin = min([j for j in range(i) if out[j] is None and sets[j]] + ([twin] if twin is not None else []),
                       default=None)
        out.append(twin)
        if twin is None:
            by_norm.setdefault(norm, i)
            if kw and threshold > 0:
                for w in prefix:
                    posting.setdefault(w, []).append(i)
    return out
