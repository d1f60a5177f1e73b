"""Keyword correctness, the confusion metrics, coverage and latency (seed ``004_…``).

Keywords of a text are its distinct lowercased words of two or more characters, Chinese
segmented with jieba (:func:`ragexp.common.text.keywords`). A word is a run of letters and digits with
``_`` kept inside it: ``customer_id`` is one keyword (not customer + id), ``_emphasis_`` is
``emphasis``; any other punctuation separates words. An answer is judged correct when
``|kw(reference) ∩ kw(answer)| / |kw(reference)| > threshold`` (conf/keyword_verdict_base.yaml;
``inclusive: true`` makes it ≥). The judgement is set against the human ``label`` (is the
reference correct?): [1,1] TP, [1,0] FN, [0,1] FP, [0,0] TN. The four confusion metrics are
``keyword_verdict_accuracy``, ``_precision``, ``_recall`` and ``_f1``: how far the keyword verdict agrees
with people, not a property of the answers (logged as ``accuracy`` … ``f1`` before; those keys are
still read, :mod:`ragexp.common.renamed`).

    >>> keyword_overlap("Paris is the capital", ["The capital is Paris, France"])
    0.8
    >>> labels = [True, True, False, False]
    >>> answers = ["paris capital", "berlin", "paris capital", "rome"]
    >>> refs = [["paris capital"]] * 4
    >>> keyword_verdict_accuracy(labels, answers, refs) == (1 + 1) / 4   # TP=1, FN=1, FP=1, TN=1
    True
"""

from __future__ import annotations

import math
import warnings
from ragexp.common.caches import text_cache
from typing import Sequence

from ragexp.common.paths import conf_file
from ragexp.common.text import keywords, stopword_set
from ragexp.metrics.base import Score, is_number, register

#: the keyword verdict's settings: conf/keyword_verdict_base.yaml, their one place (the four keyword_verdict_*
#: configs include it); the confusion functions' keyword defaults are these
THRESHOLD, INCLUSIVE, STOPWORDS, ZERO_DIVISION = (conf_file("keyword_verdict_base")[k] for k in (
    "threshold", "inclusive", "stopwords", "zero_division"))

#: what the options' types cannot say (:attr:`~ragexp.metrics.base.MetricInfo.option_rules`)
_RULES = {
    "threshold": (lambda v: is_number(v) and 0 <= v <= 1, lambda: "a number in [0, 1]"),
    "stopwords": (lambda v: v is None or v in ("none", "english")
                  or (isinstance(v, list) and all(isinstance(w, str) for w in v)),
                  lambda: "null, 'none', 'english' or a list of words"),
}


@register(option_rules=_RULES)
def keyword_overlap(answer: str, reference_answers: list[str], *, stopwords: str | list[str] | None = None) -> float | Score:
    """Share of the reference's keywords found in the answer; range [0, 1]. Max over references.

    An empty answer scores 0 (a wrong answer). A reference without any keyword (empty, or only
    one-character pieces such as the Chinese date 1月3日) is left out; when no reference has a
    keyword the value is undefined (status ``undefined``).

    >>> keyword_overlap("", ["Paris, France"]), keyword_overlap("1月3日", ["1月3日"]).status
    (0.0, 'undefined')

    The reference below has 9 keywords (embedding 模型 用于 文本 转换 向量 支持 相似 搜索, jieba's
    segmentation), 6 of them in the answer:

    >>> keyword_overlap("Embedding模型用于将文本转换为向量", ["Embedding模型用于将文本转换为向量以支持相似度搜索"]) == 6 / 9
    True
    """
    stops = stopword_set(stopwords)
    found = keywords(answer, stops)
    values = [len(kw & found) / len(kw) for ref in dict.fromkeys(reference_answers) if (kw := keywords(ref, stops))]
    if not values:
        return Score.undefined("the reference answers hold no keyword (of two characters or more)")
    return max(values)


@text_cache(per_char=2)  # a verdict per record: the texts' own bytes
def _judged(answer: str, refs: tuple[str, ...], threshold: float, inclusive: bool, stops: frozenset[str]) -> bool | None:
    # the four confusion metrics and their intervals judge the same records: once per record
    value = keyword_overlap(answer, list(refs), stopwords=sorted(stops))
    if isinstance(value, Score):
        return None
    return value >= threshold if inclusive else value > threshold


def confusion(labels: Sequence[bool | None], answers: Sequence[str | None], references: Sequence[Sequence[str] | None],
              *, threshold: float = THRESHOLD, inclusive: bool = INCLUSIVE, stopwords=STOPWORDS) -> dict[str, int]:
    """Counts of TP, FN, FP, TN, and ``skipped`` rows: no label, no answer (``None``), no reference,
    or a reference without a keyword. An empty answer (``""``) is judged wrong, not skipped."""
    stops = stopword_set(stopwords)
    counts = {"tp": 0, "fn": 0, "fp": 0, "tn": 0, "skipped": 0}
    for label, answer, refs in zip(labels, answers, references):
        judged = None if (label is None or answer is None or not refs) else _judged(answer, tuple(refs), threshold, inclusive, stops)
        if judged is None:
            counts["skipped"] += 1
        elif label and judged:
            counts["tp"] += 1
        elif label:
            counts["fn"] += 1
        elif judged:
            counts["fp"] += 1
        else:
            counts["tn"] += 1
    return counts


def _counts(label, answer, reference_answers, *, threshold: float = THRESHOLD, inclusive: bool = INCLUSIVE,
            stopwords=STOPWORDS, zero_division: float = ZERO_DIVISION) -> tuple[int, int, int, int]:
    """One record's (TP, FN, FP, TN): what a confusion metric's interval resamples."""
    c = confusion([label], [answer], [reference_answers], threshold=threshold, inclusive=inclusive, stopwords=stopwords)
    return c["tp"], c["fn"], c["fp"], c["tn"]


def _verdict(label, answer, reference_answers, **options) -> float | None:
    """One record's keyword verdict (1.0 judged correct), None where it is skipped: what ``label`` is set against."""
    tp, fn, fp, tn = _counts(label, answer, reference_answers, **options)
    return None if tp + fn + fp + tn == 0 else float(tp + fp)


_CONFUSION = dict(level="dataset", option_rules=_RULES, label_verdict=("keyword_verdict", _verdict))


def _ratio(num: int, den: int, name: str, zero_division: float) -> float:
    if den == 0:
        warnings.warn(f"{name}: the denominator is 0 (no sample in it); the value is {zero_division}", RuntimeWarning, stacklevel=3)
        return zero_division
    return num / den


@register(**_CONFUSION, ratio=(_counts, lambda tp, fn, fp, tn: tp + tn, lambda tp, fn, fp, tn: tp + fn + fp + tn))
def keyword_verdict_accuracy(label, answer, reference_answers, *, threshold: float = THRESHOLD, inclusive: bool = INCLUSIVE,
                             stopwords=STOPWORDS, zero_division: float = ZERO_DIVISION) -> float:
    """How often the keyword verdict agrees with people's label: (TP + TN) / all labelled samples; range
    [0, 1]. ``zero_division`` when there are none. Logged as ``accuracy`` before."""
    c = confusion(label, answer, reference_answers, threshold=threshold, inclusive=inclusive, stopwords=stopwords)
    return _ratio(c["tp"] + c["tn"], c["tp"] + c["tn"] + c["fp"] + c["fn"], "keyword_verdict_accuracy", zero_division)


@register(**_CONFUSION, ratio=(_counts, lambda tp, fn, fp, tn: tp, lambda tp, fn, fp, tn: tp + fp))
def keyword_verdict_precision(label, answer, reference_answers, *, threshold: float = THRESHOLD, inclusive: bool = INCLUSIVE,
                              stopwords=STOPWORDS, zero_division: float = ZERO_DIVISION) -> float:
    """TP / (TP + FP): of the answers the keyword verdict calls correct, how many people label correct.
    Logged as ``precision`` before.

    Labels and judged answers [1,1], [1,0], [1,1], [0,1] give TP = 2, FP = 1:

    >>> refs = [["paris capital"]] * 4
    >>> answers = ["paris capital", "rome", "capital paris", "paris capital"]
    >>> keyword_verdict_precision([True, True, True, False], answers, refs) == 2 / (2 + 1)
    True
    """
    c = confusion(label, answer, reference_answers, threshold=threshold, inclusive=inclusive, stopwords=stopwords)
    return _ratio(c["tp"], c["tp"] + c["fp"], "keyword_verdict_precision", zero_division)


@register(**_CONFUSION, ratio=(_counts, lambda tp, fn, fp, tn: tp, lambda tp, fn, fp, tn: tp + fn))
def keyword_verdict_recall(label, answer, reference_answers, *, threshold: float = THRESHOLD, inclusive: bool = INCLUSIVE,
                           stopwords=STOPWORDS, zero_division: float = ZERO_DIVISION) -> float:
    """TP / (TP + FN): of the samples people label correct, how many the keyword verdict calls correct.
    Logged as ``recall`` before."""
    c = confusion(label, answer, reference_answers, threshold=threshold, inclusive=inclusive, stopwords=stopwords)
    return _ratio(c["tp"], c["tp"] + c["fn"], "keyword_verdict_recall", zero_division)


@register(**_CONFUSION, ratio=(_counts, lambda tp, fn, fp, tn: 2 * tp, lambda tp, fn, fp, tn: 2 * tp + fp + fn))
def keyword_verdict_f1(label, answer, reference_answers, *, threshold: float = THRESHOLD, inclusive: bool = INCLUSIVE,
                       stopwords=STOPWORDS, zero_division: float = ZERO_DIVISION) -> float:
    """2TP / (2TP + FP + FN) of the keyword verdict against the label, on the positive class as the seed
    writes it. Logged as ``f1`` before."""
    c = confusion(label, answer, reference_answers, threshold=threshold, inclusive=inclusive, stopwords=stopwords)
    return _ratio(2 * c["tp"], 2 * c["tp"] + c["fp"] + c["fn"], "keyword_verdict_f1", zero_division)


def _coverage_fields(options: dict) -> tuple[str, ...]:
    against = options.get("against", "answer")
    if against not in ("answer", "reference"):
        raise ValueError(f"against must be 'answer' or 'reference', got {against!r}")
    return ("contexts", "answer") if against == "answer" else ("contexts", "reference_answers")


@register(fields_for=_coverage_fields, option_rules=_RULES)
def avg_coverage(contexts: list[str], text: str | list[str], *, against: str = "answer", stopwords=None) -> float | Score:
    """Share of a text's keywords found in the contexts; range [0, 1]. Averaged per run.

    ``against: answer`` is the seed's definition, ``|kw(contexts) ∩ kw(answer)| / |kw(answer)|``
    (reads ``contexts`` and ``answer``). ``against: reference`` is what the seed's own code
    computes, ``|kw(contexts) ∩ kw(reference)| / |kw(reference)|`` with the first reference
    answer (reads ``contexts`` and ``reference_answers``). A text without keywords has no value.

    >>> avg_coverage(["Paris is in France", "Lyon too"], "Paris France capital") == 2 / 3
    True
    >>> avg_coverage(["Paris is in France"], ["capital Paris"], against="reference") == 1 / 2
    True
    """
    if against not in ("answer", "reference"):
        raise ValueError(f"against must be 'answer' or 'reference', got {against!r}")
    stops = stopword_set(stopwords)
    if against == "reference":
        if not text:
            return Score.undefined("no reference answer (empty ground truth)")
        text = text[0]
    kw = keywords(text, stops)
    if not kw:
        return Score.undefined(f"the {against} holds no keyword (of two characters or more)")
    unseen = kw
    for c in contexts:
        unseen = unseen - keywords(c, stops)  # a walk over the few keywords, not a union of the contexts'
    return (len(kw) - len(unseen)) / len(kw)


@register(bounds=(0.0, math.inf), higher_is_better=False)
def avg_latency(latency_s: float) -> float:
    """End-to-end seconds per sample, averaged over the run; lower is better.

    >>> avg_latency(0.25)
    0.25
    """
    return float(latency_s)
