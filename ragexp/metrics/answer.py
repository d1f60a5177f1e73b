"""Answer metrics against the reference answers.

- ``exact_match``: 1 if the SQuAD-normalised answer equals a normalised reference, else 0.
- ``answer_token_f1``: SQuAD's token F1 (multiset overlap of normalised tokens), max over references.
- ``bleu``: sacrebleu's sentence BLEU of the answer against all references at once, 0–100.
- ``rouge1``, ``rouge2``, ``rougeL``: rouge-score's F-measure (default tokenizer, no stemmer
  unless ``use_stemmer``), max over references — the same floats as
  ``RougeScorer([...]).score_multi(references, answer)``, computed by :mod:`ragexp.matchers.rouge`.

An empty answer against non-empty references is a wrong answer: 0 on every metric here. Blank
references are left out; when none remains (an empty ground truth) the value is undefined
(status ``undefined``); an absent answer or reference list is ``missing_field``.

AutoRAG's test vectors:

    >>> DOG = dict(answer="The dog bit the man.",
    ...            reference_answers=["The dog had bit the man.", "The man had bitten the dog."])
    >>> rougeL(**DOG) == 2 * (5/5 * 5/6) / (5/5 + 5/6)     # LCS 5 of 5 and of 6 tokens
    True
    >>> round(bleu(**DOG, lowercase=True), 4)
    51.1508
    >>> rougeL("It really like to be a programmer, but I think artist is my passion.",
    ...        ["I want to be a artist, but I end up to be a programmer."]) == 2 * (5/14 * 5/14) / (5/14 + 5/14)
    True
"""

from __future__ import annotations

from functools import lru_cache, partial

from ragexp.common.caches import text_cache
from ragexp.matchers.rouge import rouge_l_of, rouge_n, tokens
from ragexp.common.text import answer_normalize, bag_overlap, overlap, squad_bag, squad_counts
from ragexp.metrics.base import Score, is_number, register


def _references(answer: str, reference_answers: list[str], **_) -> tuple[str, list[str]] | Score:
    """What every metric here reads (their shared ``prepare``): the answer and its distinct non-blank
    references, or an ``undefined`` Score when there is none. A repeated reference changes no value
    (a max over references; BLEU clips by the largest count in any reference and takes the closest
    length), and SQuAD repeats about half of its answers."""
    refs = [r for r in reference_answers if r.strip()]
    if len(refs) > 1:
        refs = list(dict.fromkeys(refs))
    return (answer, refs) if refs else Score.undefined("no reference answer (empty ground truth)")


def _scored(finish, answer: str, reference_answers: list[str], **options) -> float | Score:
    prepared = _references(answer, reference_answers)
    return prepared if isinstance(prepared, Score) else finish(prepared, **options)


def _exact_match(prepared: tuple[str, list[str]], **_) -> float:
    norm = _normalized(prepared[0])
    return 1.0 if any(norm == _normalized(r) for r in prepared[1]) else 0.0


@register(prepare=_references, finish=_exact_match)
def exact_match(answer: str, reference_answers: list[str]) -> float | Score:
    """1.0 if the answer equals a reference after SQuAD normalisation (lowercase, no
    punctuation, no articles, single spaces), else 0.0.

    >>> exact_match("The Eiffel tower!", ["eiffel Tower", "Tour Eiffel"])
    1.0
    """
    return _scored(_exact_match, answer, reference_answers)


#: each text normalised once: a run meets the same reference (and answer) in several metrics
_normalized = text_cache(per_char=8)(answer_normalize)


def squad_f1(prediction: str, reference: str) -> float:
    """SQuAD v2's token F1 of one prediction against one reference.

    When either has no token after normalisation, the value is 1 if both have none, else 0
    (the official SQuAD v2 script's rule).

    >>> squad_f1("the cat sat", "a cat sat down") == 2 * (2/2 * 2/3) / (2/2 + 2/3)
    True
    """
    (p_counts, p_len), (r_counts, r_len) = squad_counts(prediction), squad_counts(reference)
    return _f1(overlap(p_counts, r_counts), p_len, r_len)


def _f1(same: int, p_len: int, r_len: int) -> float:
    """:func:`squad_f1` from the tokens two texts share (a multiset overlap) and their numbers of tokens."""
    if not p_len or not r_len:
        return float(p_len == r_len)
    if same == 0:
        return 0.0
    precision, recall = same / p_len, same / r_len
    return 2 * precision * recall / (precision + recall)


def _answer_token_f1(prepared: tuple[str, list[str]], **_) -> float:
    # the answer's tokens once for all its references, not counted (an answer is met once): each reference's
    # tokens, a few, are counted in them (bag_overlap); a reference's counts are cached (a run meets it again)
    words, n = squad_bag(prepared[0])
    return max(_f1(bag_overlap(words, r_counts), n, r_len) for r_counts, r_len in map(squad_counts, prepared[1]))


@register(prepare=_references, finish=_answer_token_f1)
def answer_token_f1(answer: str, reference_answers: list[str]) -> float | Score:
    """SQuAD token F1 of the answer, max over references; range [0, 1].

    >>> answer_token_f1("in Paris, France", ["Paris", "Lyon"]) == 2 * (1/3 * 1) / (1/3 + 1)
    True
    """
    return _scored(_answer_token_f1, answer, reference_answers)


def _bleu(prepared: tuple[str, list[str]], **options) -> float:
    if not prepared[0].strip():
        return 0.0  # an empty answer: no n-gram matches (sacrebleu says 0.0 too)
    return float(sentence_bleu(*prepared, **options))


def _tokenizers() -> tuple[str, ...]:
    from sacrebleu.metrics.bleu import BLEU

    return tuple(BLEU.TOKENIZERS)


@register(bounds=(0.0, 100.0), prepare=_references, finish=_bleu, option_rules={
    "smooth_method": (lambda v: v in ("exp", "floor", "add-k", "none"),
                      lambda: "one of 'exp', 'floor', 'add-k', 'none' (sacrebleu's smoothing)"),
    "smooth_value": (lambda v: v is None or (is_number(v) and v >= 0), lambda: "a number >= 0 or null"),
    "tokenize": (lambda v: isinstance(v, str) and v in _tokenizers(),
                 lambda: "one of sacrebleu's tokenizers: " + ", ".join(map(repr, _tokenizers())))})
def bleu(answer: str, reference_answers: list[str], *, lowercase: bool = False, tokenize: str = "13a",
         smooth_method: str = "exp", smooth_value: float | None = None) -> float | Score:
    """sacrebleu's sentence BLEU against all references at once; range [0, 100].

    sacrebleu's own number: ``BLEU(..., effective_order=True).sentence_score(answer, references)``
    with these options (:func:`sentence_bleu`).

    >>> round(bleu("It really like to be a programmer, but I think artist is my passion.",
    ...            ["I want to be a artist, but I end up to be a programmer."], lowercase=True), 4)
    23.5783
    >>> round(bleu("Same text here.", ["Same text here."]), 9)
    100.0
    """
    return _scored(_bleu, answer, reference_answers, lowercase=lowercase, tokenize=tokenize,
                   smooth_method=smooth_method, smooth_value=smooth_value)


@lru_cache(maxsize=16)  # one scorer per option set
def _bleu_scorer(lowercase: bool, tokenize: str, smooth_method: str, smooth_value: float | None):
    from sacrebleu.metrics import BLEU

    return BLEU(lowercase=lowercase, tokenize=tokenize, smooth_method=smooth_method, smooth_value=smooth_value,
                effective_order=True)


def sentence_bleu(hypothesis: str, references: list[str], *, lowercase: bool = False, tokenize: str = "13a",
                  smooth_method: str = "exp", smooth_value: float | None = None) -> float:
    """sacrebleu's sentence BLEU (effective order), 0-100: one sacrebleu scorer per option set.

    >>> sentence_bleu("The dog bit the man.", ["The dog had bit the man.", "The man had bitten the dog."],
    ...               lowercase=True) == 51.15078115793242
    True
    """
    if smooth_method not in ("none", "floor", "add-k", "exp"):
        raise ValueError(f"smooth_method must be one of none, floor, add-k, exp, got {smooth_method!r}")
    scorer = _bleu_scorer(bool(lowercase), tokenize, smooth_method, smooth_value)
    return scorer.sentence_score(hypothesis, list(references)).score


def _best(prepared: tuple[str, list[str]], *, n: int | None, use_stemmer: bool = False, **_) -> float:
    answer, refs = prepared
    if n is None:
        p = tokens(answer, use_stemmer)  # once for all its references
        return max(rouge_l_of(tokens(r, use_stemmer), p)[2] for r in refs)
    return max(rouge_n(r, answer, n, use_stemmer)[2] for r in refs)


@register(prepare=_references, finish=partial(_best, n=1))
def rouge1(answer: str, reference_answers: list[str], *, use_stemmer: bool = False) -> float | Score:
    """rouge-score's ROUGE-1 F-measure (unigram overlap), max over references; range [0, 1].

    >>> rouge1("the cat was found under the bed", ["the cat was under the bed"]) == 2 * (6/7 * 6/6) / (6/7 + 1)
    True
    """
    return _scored(_best, answer, reference_answers, n=1, use_stemmer=use_stemmer)


@register(prepare=_references, finish=partial(_best, n=2))
def rouge2(answer: str, reference_answers: list[str], *, use_stemmer: bool = False) -> float | Score:
    """rouge-score's ROUGE-2 F-measure (bigram overlap), max over references; range [0, 1].

    >>> rouge2("the cat was found under the bed", ["the cat was under the bed"]) == 2 * (4/6 * 4/5) / (4/6 + 4/5)
    True
    """
    return _scored(_best, answer, reference_answers, n=2, use_stemmer=use_stemmer)


@register(prepare=_references, finish=partial(_best, n=None))
def rougeL(answer: str, reference_answers: list[str], *, use_stemmer: bool = False) -> float | Score:  # noqa: N802
    """rouge-score's ROUGE-L F-measure (longest common subsequence), max over references; range [0, 1].

    >>> rougeL("Identical text.", ["Identical text."])
    1.0
    """
    return _scored(_best, answer, reference_answers, n=None, use_stemmer=use_stemmer)
