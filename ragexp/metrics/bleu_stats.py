"""Sentence BLEU with sacrebleu's numbers, without its per-call overhead.

``sentence_bleu(hypothesis, references, ...)`` is the float
``sacrebleu.metrics.BLEU(..., effective_order=True).sentence_score(hypothesis, references).score``
gives, computed the same way: sacrebleu's own tokenizer object (``13a`` by default) on the
lowercased (optionally), right-stripped text; n-grams of orders 1-4 of the white-space tokens;
each reference n-gram's count the largest over the references; the reference length the one
closest to the hypothesis length (the shorter on a tie); then sacrebleu's ``compute_bleu``
arithmetic, in its order — brevity penalty, smoothing (``exp``, ``floor``, ``add-k``, ``none``),
effective order, ``bp * exp(sum(log p) / order)`` with log 0 taken as -9999999999.

What differs is the work: a text's tokens and n-gram counts (orders 1-4 in one Counter) are computed once and
cached (a suite or a run meets the same reference many times), the references' merged counts
too, and no score object with its formatted strings is built per call.

    >>> sentence_bleu("The dog bit the man.", ["The dog had bit the man.", "The man had bitten the dog."],
    ...               lowercase=True) == 51.15078115793242
    True
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache
from typing import Sequence

MAX_ORDER = 4
#: sacrebleu's default smoothing value per method (BLEU.SMOOTH_DEFAULTS)
_SMOOTH_DEFAULTS = {"none": None, "floor": 0.1, "add-k": 1, "exp": None}
_LOG_ZERO = -9999999999  # sacrebleu's my_log(0.0)


@lru_cache(maxsize=None)
def _tokenizer(tokenize: str):
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize=tokenize, effective_order=True).tokenizer


@lru_cache(maxsize=200_000)
def segment_ngrams(text: str, lowercase: bool = False, tokenize: str = "13a") -> tuple[Counter, int]:
    """The counts of the text's n-grams of orders 1-4 (after sacrebleu's preprocessing; an n-gram
    is a tuple of n tokens, so its length is its order), and its number of tokens.

    >>> counts, n = segment_ngrams("a b a b")
    >>> n, counts[("a",)], counts[("a", "b")], counts[("b", "a")], counts[("a", "b", "a", "b")]
    (4, 2, 2, 1, 1)
    """
    if lowercase:
        text = text.lower()
    toks = _tokenizer(tokenize)(text.rstrip()).split()
    counts = Counter(zip(toks))
    counts.update(zip(toks, toks[1:]))
    counts.update(zip(toks, toks[1:], toks[2:]))
    counts.update(zip(toks, toks[1:], toks[2:], toks[3:]))
    return counts, len(toks)


@lru_cache(maxsize=100_000)
def _references(references: tuple[str, ...], lowercase: bool, tokenize: str) -> tuple[dict, tuple[int, ...]]:
    """The references' n-gram counts, each the largest over the references, and their lengths."""
    merged: dict | None = None
    lengths = []
    for i, ref in enumerate(references):
        counts, n = segment_ngrams(ref, lowercase, tokenize)
        lengths.append(n)
        if i == 0:
            merged = counts  # one reference: its own (cached, never changed) counts
            continue
        if i == 1:
            merged = dict(merged)  # a second one: merge into a copy
        for gram, c in counts.items():
            if c > merged.get(gram, 0):
                merged[gram] = c
    return merged if merged is not None else {}, tuple(lengths)


def _closest(hyp_len: int, ref_lens: Sequence[int]) -> int:
    best_diff, best = -1, -1
    for length in ref_lens:
        diff = abs(hyp_len - length)
        if best_diff == -1 or diff < best_diff:
            best_diff, best = diff, length
        elif diff == best_diff and length < best:
            best = length
    return best


def sentence_bleu(hypothesis: str, references: Sequence[str], *, lowercase: bool = False, tokenize: str = "13a",
                  smooth_method: str = "exp", smooth_value: float | None = None) -> float:
    """sacrebleu's sentence BLEU (effective order) of ``hypothesis`` against ``references``, 0-100."""
    if smooth_method not in _SMOOTH_DEFAULTS:
        raise ValueError(f"smooth_method must be one of {', '.join(_SMOOTH_DEFAULTS)}, got {smooth_method!r}")
    hyp, hyp_len = segment_ngrams(hypothesis, lowercase, tokenize)
    ref, ref_lens = _references(tuple(references), lowercase, tokenize)
    ref_len = _closest(hyp_len, ref_lens)
    correct = [0] * MAX_ORDER
    for gram in hyp.keys() & ref.keys():
        c, r = hyp[gram], ref[gram]
        correct[len(gram) - 1] += c if c < r else r
    total = [max(hyp_len - n, 0) for n in range(MAX_ORDER)]  # the number of n-grams of each order
    return _compute(correct, total, hyp_len, ref_len, smooth_method, smooth_value)


def _compute(correct: list, total: list, sys_len: int, ref_len: int, smooth_method: str,
             smooth_value: float | None) -> float:
    """sacrebleu's ``BLEU.compute_bleu(...).score`` with ``effective_order=True``, step for step."""
    if smooth_value is None:
        smooth_value = _SMOOTH_DEFAULTS[smooth_method]
    bp = 1.0
    if sys_len < ref_len:
        bp = math.exp(1 - ref_len / sys_len) if sys_len > 0 else 0.0
    if not any(correct):
        return 0.0
    precisions = [0.0] * MAX_ORDER
    smooth_mteval = 1.0
    eff_order = MAX_ORDER
    for n in range(1, MAX_ORDER + 1):
        if smooth_method == "add-k" and n > 1:
            correct[n - 1] += smooth_value
            total[n - 1] += smooth_value
        if total[n - 1] == 0:
            break
        eff_order = n
        if correct[n - 1] == 0:
            if smooth_method == "exp":
                smooth_mteval *= 2
                precisions[n - 1] = 100. / (smooth_mteval * total[n - 1])
            elif smooth_method == "floor":
                precisions[n - 1] = 100. * smooth_value / total[n - 1]
        else:
            precisions[n - 1] = 100. * correct[n - 1] / total[n - 1]
    return bp * math.exp(sum([math.log(p) if p != 0.0 else _LOG_ZERO for p in precisions[:eff_order]]) / eff_order)
