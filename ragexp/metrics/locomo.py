"""LoCoMo's own scores (docs/metrics.md#locomo_qa): the category-aware QA score and the evidence recall,
computed as the benchmark's official evaluation (``task_eval/evaluation.py`` of snap-research/LoCoMo)
computes them, question by question; ragexp's code, checked against the official functions on all 1,986
questions of ``locomo10.json`` with answers and retrievals of many kinds (largest difference 1.1e-16).

The QA score is a token F1 over normalized, Porter-stemmed words: lower case, punctuation and commas
dropped, the words ``a an the and`` dropped. A multi-hop question's answer is split at commas and each
reference part takes its best-matching answer part (the mean over the reference parts); an open-domain
reference counts up to its first ``;``; an adversarial question (the answer is not in the conversation)
scores 1 when the answer says ``no information available`` or ``not mentioned``, else 0. A category
LoCoMo does not have is scored as ``single_hop``.

What it rewards: the reference's words, in any order, and few others — a short answer in the
reference's own words scores highest. What it does not: meaning. ``She moved in 2022`` against ``2022``
is 0.4, a correct paraphrase (``last summer`` for ``June 2023``) is 0, a wrong answer sharing words
(``7 May 2022`` for ``7 May 2023``) is 0.67; a refusal worded otherwise (``I don't know``) is 0 on an
adversarial question, and a refusal on any other question is 0 whatever the truth. Read it beside a
judged correctness (``answer_correct`` with a judge), as memory-layer papers report both.

The evidence recall is the share of a question's evidence entries retrieved: turn ids compared as
written, or, when the first retrieved id is a session (``S3``), the sessions of the evidence. Nothing
retrieved is 0 (LoCoMo's code stops with an error there); a question without a recorded retrieval has no
value (``missing_field``), where LoCoMo's code writes 1. Two choices are LoCoMo's, kept for equality: a question without evidence (4 in the
file) scores 1, and an entry naming no turn (``D8:6; D9:17``) is read as written — never matched at turn
level, matched by its session number (``8``) at session level. ``recall_at_k``, ``mrr`` and ``ndcg`` in
``metric=locomo`` read the ids at the retrieval's granularity (their option ``group_ids``): with session ids
retrieved, each evidence turn counts as its session, the sessions counted once each
(docs/metrics.md#ranked-ids-of-two-granularities).
"""

from __future__ import annotations

import math
import string
from collections import Counter
from functools import lru_cache

import regex

from ragexp.metrics.base import Score, register

#: what LoCoMo's normalization drops as words (its articles, and "and"): word boundaries as the ``regex``
#: package draws them, as LoCoMo's scoring does (``re`` differs beside characters such as ``½``)
_DROPPED = regex.compile(r"\b(a|an|the|and)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
#: the phrases that make an adversarial question's answer right: it says the answer is not there
REFUSALS = ("no information available", "not mentioned")


def normalize(text: str) -> str:
    """LoCoMo's answer normalization: commas out, lower case, punctuation out, ``a an the and`` out, spaces
    collapsed.

    >>> normalize("The cat, and a Dog!")
    'cat dog'
    """
    text = text.replace(",", "").lower().translate(_PUNCTUATION)
    return " ".join(_DROPPED.sub(" ", text).split())


@lru_cache(maxsize=1)
def _stemmer():
    from nltk.stem import PorterStemmer  # NLTK's Porter stemmer, in its default mode, as LoCoMo's scoring uses

    return PorterStemmer()


@lru_cache(maxsize=65536)
def _stem(word: str) -> str:
    return _stemmer().stem(word)


def stemmed_f1(answer: str, reference: str) -> float:
    """Token F1 of the stemmed, normalized words (each word counted as often as it occurs in both).

    >>> stemmed_f1("She went running", "running")  # 'she went run' vs 'run': P 1/3, R 1
    0.5
    """
    got = [_stem(w) for w in normalize(answer).split()]
    want = [_stem(w) for w in normalize(reference).split()]
    same = sum((Counter(got) & Counter(want)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(got), same / len(want)
    return (2 * precision * recall) / (precision + recall)


def partial_f1(answer: str, reference: str) -> float:
    """Multi-hop: both split at commas; each reference part's best :func:`stemmed_f1` over the answer's
    parts, averaged over the reference parts.

    >>> partial_f1("Paris, Rome", "Rome, Oslo")  # Rome 1, Oslo 0
    0.5
    """
    parts = [p.strip() for p in answer.split(",")]
    wanted = [w.strip() for w in reference.split(",")]
    return math.fsum(max(stemmed_f1(p, w) for p in parts) for w in wanted) / len(wanted)


def refused(answer: str) -> bool:
    """True when the answer says the conversation does not hold it (LoCoMo's refusal phrases)."""
    low = answer.lower()
    return any(phrase in low for phrase in REFUSALS)


def locomo_qa_value(answer: str, reference: str, category: str) -> float:
    """One answer's score against one reference under the category's rule; a category LoCoMo does not
    have is scored as ``single_hop`` (plain :func:`stemmed_f1`).

    >>> locomo_qa_value("in 2022", "2022; or 2021", "open_domain")  # reference cut to "2022": P 1/2, R 1, F1 2/3
    0.6666666666666666
    >>> locomo_qa_value("Not mentioned in the conversation", "Not mentioned in the conversation", "adversarial")
    1.0
    """
    if category == "adversarial":
        return 1.0 if refused(answer) else 0.0
    if category == "multi_hop":
        return partial_f1(answer, reference)
    if category == "open_domain":
        reference = reference.split(";")[0].strip()
    return stemmed_f1(answer, reference)


@register()
def locomo_qa(answer: str, reference_answers: list[str], category: str) -> float | Score:
    """LoCoMo's category-aware QA score (the best over the reference answers); range [0, 1]. An empty
    answer is 0, a miss.

    >>> locomo_qa("Paris, Rome", ["Rome, Oslo"], "multi_hop")
    0.5
    """
    refs = [r for r in reference_answers if r.strip()]
    if category != "adversarial" and not refs:
        return Score.undefined("no reference answer (empty ground truth)")
    return max(locomo_qa_value(answer, ref, category) for ref in refs or [""])


def evidence_recall_value(context_ids: list[str], evidence: list[str]) -> float:
    """The share of evidence entries retrieved. Session-level when the first retrieved id starts with
    ``S`` (``S3``): an entry counts when its session (the number between ``D`` and ``:``) is retrieved;
    else turn-level: an entry counts when it is one of the retrieved ids, exactly as written. An entry
    that names no turn (``D``, ``D8:6; D9:17``) is read the same way, so it is a miss at turn level.

    >>> evidence_recall_value(["D1:3", "D2:1"], ["D1:3", "D4:4"]), evidence_recall_value(["S4"], ["D1:3", "D4:4"])
    (0.5, 0.5)
    """
    if not context_ids:
        return 0.0
    if context_ids[0].startswith("S"):
        sessions = [c[1:] for c in context_ids]
        hits = sum(e.split(":")[0][1:] in sessions for e in evidence)
    else:
        hits = sum(e in context_ids for e in evidence)
    return hits / len(evidence)


@register()
def locomo_evidence_recall(context_ids: list[str], gt_context_ids: list[str]) -> float | Score:
    """LoCoMo's evidence recall of the retrieved ids (turn ids, or session ids ``S<n>``); range [0, 1].
    Nothing retrieved is 0; a question without evidence is 1, as LoCoMo's scoring counts it.

    >>> locomo_evidence_recall(["D1:3"], ["D1:3", "D4:4"]), locomo_evidence_recall([], ["D1:3"])
    (0.5, 0.0)
    """
    if not gt_context_ids:
        return Score(1.0, detail="no evidence: 1, as LoCoMo's scoring counts a question without evidence")
    return evidence_recall_value(context_ids, gt_context_ids)


__all__ = ["REFUSALS", "evidence_recall_value", "locomo_evidence_recall", "locomo_qa", "locomo_qa_value",
           "normalize", "partial_f1", "refused", "stemmed_f1"]
