"""ROUGE-L as the ``rouge`` package (pltrdy's ``rouge`` 1.0.1) computes it — what continuous-eval 0.3's
Rouge matchers use (recall ``>=`` threshold; the package's exception is *no match*, here ``None``).
Definitions and the one deliberate difference (no recursion limit): docs/metrics.md, "Matchers".

Same numbers as the package (tests check every value against it on real text); not the same work:
the LCS is traced back (diagonal on equal words, else up when the cell above is strictly larger,
else left — the package's rule) on bit-parallel rows (Hyyrö, one big-integer step per word), and
a matcher skips the trace when the bound of shared distinct words already fails the threshold.

    >>> package_rouge_l("Paris is the capital of France.", "Paris is the capital of France and its largest city.")
    (0.6, 1.0, 0.7499999953125)
    >>> package_rouge_l("The cat sat. The dog ran.", "the cat sat")[1]   # case counts: 'cat', 'sat'
    0.4
    >>> package_rouge_l("...", "Paris.") is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass

from ragexp.common.caches import text_cache


@dataclass(frozen=True, slots=True, eq=False)
class PackageText:
    """One text as the ``rouge`` package sees it: its sentences' words and its distinct words."""

    sentences: tuple[tuple[str, ...], ...]
    words: frozenset[str]
    #: per sentence: word → bit mask of its positions (for the bit-parallel LCS rows)
    masks: tuple[dict[str, int], ...]


@text_cache(per_char=44)
def package_text(text: str) -> PackageText | None:
    """The package's sentences and words of ``text``; None when it has no sentence (the package raises)."""
    if not text:
        return None
    sentences = tuple(tuple(" ".join(piece.split()).split(" ")) for piece in text.split(".") if piece)
    if not sentences:
        return None
    masks = []
    for words in sentences:
        mask: dict[str, int] = {}
        for i, w in enumerate(words):
            mask[w] = mask.get(w, 0) | (1 << i)
        masks.append(mask)
    return PackageText(sentences, frozenset(w for s in sentences for w in s), tuple(masks))


def reconstructed_lcs(x: tuple[str, ...], y: tuple[str, ...], y_masks: dict[str, int]) -> list[str]:
    """The words of the LCS of ``x`` (reference sentence) and ``y`` that the package's backtracking
    picks, last word first. ``y_masks``: word → bit mask of its positions in ``y``."""
    ny = len(y)
    full = (1 << ny) - 1
    v = full
    rows = [v]  # rows[i]: bit j-1 clear ⇔ LCS(x[:i], y[:j]) > LCS(x[:i], y[:j-1])
    for w in x:
        u = y_masks.get(w)
        if u is not None:
            u &= v
            v = ((v + u) | (v - u)) & full
        rows.append(v)
    if v == full:
        return []
    out: list[str] = []
    i, j = len(x), ny
    while i > 0 and j > 0:
        if x[i - 1] == y[j - 1]:
            out.append(x[i - 1])
            i -= 1
            j -= 1
            continue
        low = (1 << j) - 1
        # table[i-1][j] vs table[i][j-1], each "prefix length minus the set bits below it"
        up = j - (rows[i - 1] & low).bit_count()
        left = j - 1 - (rows[i] & (low >> 1)).bit_count()
        if up > left:
            i -= 1
        else:
            j -= 1
    return out


def union_lcs(reference: PackageText, hypothesis: PackageText, stop_at: int | None = None) -> int:
    """``|U|``: the distinct words of the reconstructed LCSs of every (reference sentence,
    hypothesis sentence) pair. With ``stop_at``, counting may stop once it is reached."""
    common = reference.words & hypothesis.words
    if not common:
        return 0
    union: set[str] = set()
    target = len(common)
    if stop_at is not None and stop_at < target:
        target = stop_at
    hyp = [(s, m, frozenset(m)) for s, m in zip(hypothesis.sentences, hypothesis.masks)]
    for x in reference.sentences:
        xs = common.intersection(x)
        if not xs:
            continue
        for y, y_masks, y_words in hyp:
            shared = xs & y_words
            if not shared or shared <= union:
                continue  # this pair can add no new word to U
            union.update(reconstructed_lcs(x, y, y_masks))
            if len(union) >= target:
                return len(union)
    return len(union)


def package_rouge_l(reference: str, hypothesis: str) -> tuple[float, float, float] | None:
    """(precision, recall, F) of ``Rouge().get_scores(hypothesis, reference)[0]["rouge-l"]``
    (its ``p``, ``r``, ``f``); None where the package raises (an empty text, or only full stops)."""
    ref, hyp = package_text(reference), package_text(hypothesis)
    if ref is None or hyp is None:
        return None
    llcs = union_lcs(ref, hyp)
    r, p = llcs / len(ref.words), llcs / len(hyp.words)
    return p, r, 2.0 * ((p * r) / (p + r + 1e-8))


__all__ = ["PackageText", "package_text", "reconstructed_lcs", "union_lcs", "package_rouge_l"]
