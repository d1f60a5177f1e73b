"""The filters that need no model (docs/testset.md, "Filters"): each returns the reason a candidate is
dropped, or None.

- ``refusal``: the reference answer declines ("not in the context", "cannot be determined", ...);
- ``length``: question of ``q_words`` words (min, max), answer of at most ``a_max_words`` and not empty;
- ``language``: the question's language is not the passage's (langdetect, seeded): different writing
  systems always count; within one script only when the question shares fewer than half of its words
  (3+ letters) with the passage and langdetect gives it another language with probability ≥ 0.9, for a
  question of at least 6 words (short questions are guessed poorly);
- ``near_duplicate``: the question's keyword set (:func:`ragexp.common.text.keywords`) has Jaccard
  similarity ≥ ``threshold`` (0.8) with an earlier kept question's, or the same normalised text.

    >>> refusal("The context does not mention it."), refusal("Paris")
    ('does not mention', None)
    >>> near_duplicates(["Who built the tower?", "Who built the tower ?", "When did it open?"])
    [None, 0, None]
"""

from __future__ import annotations

import re
import unicodedata
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


def script(text: str) -> str | None:
    """The writing system most letters of ``text`` belong to (LATIN, CJK, CYRILLIC, ARABIC, ...)."""
    counts: dict[str, int] = {}
    for ch in text:
        if ch.isalpha():
            name = unicodedata.name(ch, "")
            s = "CJK" if name.startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL")) else name.split(" ")[0]
            counts[s] = counts.get(s, 0) + 1
    return max(counts, key=counts.get) if counts else None  # type: ignore[arg-type]


@lru_cache(maxsize=4096)
def detect(text: str) -> list[tuple[str, float]]:
    """langdetect's (language, probability) guesses, seeded so the same text always gets the same answer."""
    from langdetect import DetectorFactory, detect_langs
    from langdetect.lang_detect_exception import LangDetectException

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
    if q_kw and len(q_kw & keywords(passage, min_len=3)) >= len(q_kw) / 2:
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


def near_duplicates(questions: list[str], threshold: float = 0.8) -> list[int | None]:
    """For each question, the index of the earlier non-duplicate it repeats (module docstring), or None."""
    kept: list[tuple[int, frozenset[str], str]] = []
    out: list[int | None] = []
    for i, q in enumerate(questions):
        kw, norm = keywords(q), _norm(q)
        twin = None
        for j, kj, nj in kept:
            if norm == nj or (kw and kj and len(kw & kj) / len(kw | kj) >= threshold):
                twin = j
                break
        out.append(twin)
        if twin is None:
            kept.append((i, kw, norm))
    return out
