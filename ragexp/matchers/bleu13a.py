"""Sentence BLEU with the 13a tokenisation and exponential smoothing exactly as sacrebleu computes it
(``BLEU(tokenize="13a", smooth_method="exp", effective_order=True).sentence_score``: the same floats;
docs/metrics.md, ``bleu``), without sacrebleu's per-call machinery: each text tokenised once, its
n-grams counted order by order (1 to 4) with ``zip`` over the token list, only up to the first order
without a match, the clipped matches and the score computed in sacrebleu's order of operations. Not
cached: a run scores an answer once.

    >>> tokens_13a("The dog bit the man.")
    ['The', 'dog', 'bit', 'the', 'man', '.']
    >>> tokens_13a("It's 3.5-4 km, (roughly).")      # sacrebleu's Tokenizer13a gives these tokens
    ["It's", '3.5', '-', '4', 'km', ',', '(', 'roughly', ')', '.']
    >>> bleu_13a_exp("The dog bit the man.", ["The dog had bit the man.", "The man had bitten the dog."],
    ...              lowercase=True) == 51.15078115793242
    True
"""

from __future__ import annotations

import math
import re
from typing import Sequence

#: the punctuation 13a sets apart, each character with a space either side: ``{ | } ~``, ``[ \\ ] ^ _ ```,
#: ``! " # $ % &``, ``( ) * +``, ``: ; < = > ? @`` and ``/`` (not ``' , - .``: the rules below). 13a pads the
#: space too; a space padded or not splits the same, and the rules below see a space beside it either way
_PADDED = {c: f" {c} " for c in "{|}~" + "[\\]^_`" + "!\"#$%&" + "()*+" + ":;<=>?@" + "/"}
_APART = re.compile("[" + re.escape("".join(_PADDED)) + "]")
#: a period or comma after a non-digit, a period or comma before a non-digit, a dash after a digit
_AFTER_NON_DIGIT = re.compile(r"([^0-9])([\.,])")
_BEFORE_NON_DIGIT = re.compile(r"([\.,])([^0-9])")
_DASH_AFTER_DIGIT = re.compile(r"([0-9])(-)")
#: what 13a reads as markup: the escapes it unescapes, in its order
_ENTITIES = (("&quot;", '"'), ("&amp;", "&"), ("&lt;", "<"), ("&gt;", ">"))
MAX_ORDER = 4


def _padded(m: re.Match) -> str:
    return _PADDED[m.group()]


def _spaced_after(m: re.Match) -> str:  # the first group, a space, the second, a space
    return f"{m.group(1)} {m.group(2)} "


def _spaced_before(m: re.Match) -> str:  # a space, the first group, a space, the second
    return f" {m.group(1)} {m.group(2)}"


def tokens_13a(line: str) -> list[str]:
    """The tokens of mteval-v13a's tokenisation as sacrebleu applies it (``Tokenizer13a``): ``<skipped>``
    and ``-`` + newline removed, newlines made spaces, four HTML escapes undone, punctuation set apart
    (periods and commas only next to a non-digit, a dash only after a digit), split on white space."""
    line = line.replace("<skipped>", "").replace("-\n", "").replace("\n", " ")
    if "&" in line:
        for escaped, plain in _ENTITIES:
            line = line.replace(escaped, plain)
    line = _APART.sub(_padded, f" {line} ")
    if "." in line or "," in line:
        line = _AFTER_NON_DIGIT.sub(_spaced_after, line)
        line = _BEFORE_NON_DIGIT.sub(_spaced_before, line)
    if "-" in line:
        line = _DASH_AFTER_DIGIT.sub(_spaced_after, line)
    return line.split()


def _counts(tokens: list[str], n: int) -> dict:
    """The counts of the n-grams of order ``n + 1`` (order 1 keyed by the token, the others by tuples)."""
    counts: dict = {}
    get = counts.get
    for g in (tokens if n == 0 else zip(*(tokens[i:] for i in range(n + 1)))):
        counts[g] = get(g, 0) + 1
    return counts


def _closest(hyp_len: int, ref_lens: Sequence[int]) -> int:
    """The reference length closest to the hypothesis's, the shorter on a tie (the first such)."""
    best_diff, best = -1, -1
    for n in ref_lens:
        diff = abs(hyp_len - n)
        if best_diff == -1 or diff < best_diff:
            best_diff, best = diff, n
        elif diff == best_diff and n < best:
            best = n
    return best


def bleu_13a_exp(hypothesis: str, references: Sequence[str], *, lowercase: bool = False) -> float:
    """sacrebleu's sentence BLEU (0-100) of ``hypothesis`` against every reference at once, with the 13a
    tokenisation, exponential smoothing and the effective order: per order the matches clipped by the
    largest count in any reference, the brevity penalty from the closest reference length. An order with
    no match ends the counting: a longer n-gram that matched would have its first n tokens matched."""
    def prepared(text: str) -> list[str]:
        return tokens_13a((text.lower() if lowercase else text).rstrip())

    hyp, refs = prepared(hypothesis), [prepared(r) for r in references]
    sys_len = len(hyp)
    correct, total = [0] * MAX_ORDER, [max(sys_len - n, 0) for n in range(MAX_ORDER)]
    for n in range(MAX_ORDER):
        if not total[n]:
            break
        most = _counts(refs[0], n)
        for other in refs[1:]:
            for g, c in _counts(other, n).items():
                if c > most.get(g, 0):
                    most[g] = c
        correct[n] = sum(min(c, most[g]) for g, c in _counts(hyp, n).items() if g in most)
        if not correct[n]:
            break
    return _score(correct, total, sys_len, _closest(sys_len, [len(r) for r in refs]))


def _score(correct: list[int], total: list[int], sys_len: int, ref_len: int) -> float:
    """The BLEU of the sufficient statistics, exponential smoothing, effective order, sacrebleu's arithmetic."""
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    if not any(correct):
        return 0.0
    precisions = [0.0] * MAX_ORDER
    smooth, order = 1.0, MAX_ORDER
    for n in range(MAX_ORDER):
        if total[n] == 0:
            break
        order = n + 1
        if correct[n] == 0:
            smooth *= 2
            precisions[n] = 100.0 / (smooth * total[n])
        else:
            precisions[n] = 100.0 * correct[n] / total[n]
    return bp * math.exp(sum([-9999999999 if p == 0.0 else math.log(p) for p in precisions[:order]]) / order)
