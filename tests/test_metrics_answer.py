"""Answer metrics (SPEC §2.4): AutoRAG's test vectors, agreement with rouge-score and sacrebleu
on real answers, and AutoRAG's own stored per-sample BLEU and ROUGE values."""

from __future__ import annotations

import json
import re
import string
from collections import Counter

import pandas as pd
import pytest
import sacrebleu
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from ragexp.common.text import squad_normalize
from ragexp.metrics.answer import answer_token_f1, bleu, exact_match, rouge1, rouge2, rougeL, squad_f1

DOG_REFS = ["The dog had bit the man.", "The man had bitten the dog."]
ARTIST_REFS = ["I want to be a artist, but I end up to be a programmer."]
ARTIST = "It really like to be a programmer, but I think artist is my passion."


def test_autorag_rouge_vectors():
    assert rougeL("The dog bit the man.", DOG_REFS) == 2 * (5 / 5 * 5 / 6) / (5 / 5 + 5 / 6)   # 0.909…
    assert round(rougeL("The dog bit the man.", DOG_REFS), 3) == 0.909
    # LCS "to be a … but i": 5 tokens, of 14 in the answer and 14 in the reference
    assert rougeL(ARTIST, ARTIST_REFS) == 2 * (5 / 14 * 5 / 14) / (5 / 14 + 5 / 14)
    assert round(rougeL(ARTIST, ARTIST_REFS), 5) == 0.35714
    assert rougeL(ARTIST, [ARTIST]) == 1.0


def test_autorag_bleu_vectors_with_lowercase():
    assert round(bleu("The dog bit the man.", DOG_REFS, lowercase=True), 4) == 51.1508
    assert round(bleu(ARTIST, ARTIST_REFS, lowercase=True), 4) == 23.5783
    assert round(bleu(ARTIST, [ARTIST], lowercase=True), 9) == 100.0


def test_exact_match_and_token_f1_follow_squad():
    assert exact_match("The  Beatles!", ["beatles", "Rolling Stones"]) == 1.0
    assert exact_match("Beatles band", ["beatles"]) == 0.0
    assert answer_token_f1("the Beatles band", ["Beatles", "a band of four"]) == max(
        2 * (1 / 2 * 1) / (1 / 2 + 1), 2 * (1 / 2 * 1 / 3) / (1 / 2 + 1 / 3))
    assert squad_f1("the", "a") == 1.0 and squad_f1("the", "cat") == 0.0   # SQuAD v2's no-token rule
    assert exact_match("x", []).status == "undefined"     # an empty ground truth
    assert exact_match("", ["x"]) == 0.0                    # an empty answer is a wrong answer


def _official_normalize(s):
    """The official SQuAD v2 script's normalize_answer, written out."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    return " ".join(re.sub(r"\b(a|an|the)\b", " ", s).split())


def _official_f1(prediction, truth):
    """The official SQuAD v2 script's compute_f1, written out."""
    p, t = _official_normalize(prediction).split(), _official_normalize(truth).split()
    if not p or not t:
        return float(p == t)
    same = sum((Counter(p) & Counter(t)).values())
    if same == 0:
        return 0.0
    return 2 * (same / len(p)) * (same / len(t)) / (same / len(p) + same / len(t))


# ASCII texts (the fast path: bytes lowercased and stripped of punctuation) with the articles beside
# punctuation, control characters (\x01: no word character and no space) and str.split's extra white
# space (\x1c-\x1f), and non-ASCII ones (the expression's path)
TRICKY = ["The cat.", "a.the an,A", "the\x01cat the", "an\x1ca\x1dthe cat", "  the\tA\n", "x_the_y an_", "",
          "!!!", "The café", "theatre an apple", "A-an-THE", "thé the", "the…a"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["the", "a", "an", "The", "cat", "A", " ", ".", ",", "'", "-", "\x01", "\x1c",
                                 "\t", "é", "7", "_"]), max_size=12).map("".join),
       st.lists(st.sampled_from(["the", "a", "cat", "A", " ", ".", "\x1f", "é", "7"]), max_size=8).map("".join))
def test_token_f1_is_the_official_squad_arithmetic_on_any_text(answer, reference):
    assert squad_normalize(answer) == _official_normalize(answer)
    assert squad_f1(answer, reference) == _official_f1(answer, reference)
    if reference.strip():
        assert answer_token_f1(answer, [reference, "cat"]) == max(_official_f1(answer, reference),
                                                                   _official_f1(answer, "cat"))


def test_token_f1_is_the_official_squad_arithmetic_on_real_answers(answer_pairs):
    long = [(a, [" ".join(TRICKY) + " the cat", "the cat"]) for a in TRICKY + [" ".join(TRICKY * 3)]]  # > 8 tokens
    for answer, refs in answer_pairs + [(a, [r for r in TRICKY if r.strip()]) for a in TRICKY] + long:
        assert answer_token_f1(answer, refs) == max(_official_f1(answer, r) for r in refs), (answer, refs)


def _squad_answers(data_dir, n):
    """Real answer/reference pairs: SQuAD answer strings of one question scored against those of
    another question of the same paragraph, and against the full answer sentence."""
    d = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    pairs = []
    for article in d["data"]:
        for para in article["paragraphs"]:
            qas = [qa for qa in para["qas"] if qa["answers"]]
            for a, b in zip(qas, qas[1:]):
                refs = list(dict.fromkeys(x["text"] for x in b["answers"]))
                pairs.append((a["answers"][0]["text"], refs))
                pairs.append((a["question"] + " " + a["answers"][0]["text"], refs + [b["question"]]))
    return pairs[:n]


@pytest.fixture(scope="module")
def answer_pairs(data_dir):
    pairs = _squad_answers(data_dir, 1500)
    tonic = json.loads((data_dir / "tonic_paul_graham" / "qa_pairs.json").read_text(encoding="utf-8"))
    pairs += [(t["quote"], [t["answer"]]) for t in tonic] + [(t["answer"], [t["quote"], t["question"]]) for t in tonic]
    return pairs


def test_rouge_identical_to_rouge_score_score_multi(answer_pairs):
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    stemmed = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    for answer, refs in answer_pairs:
        ref = scorer.score_multi(refs, answer)
        assert (rouge1(answer, refs), rouge2(answer, refs), rougeL(answer, refs)) == (
            ref["rouge1"].fmeasure, ref["rouge2"].fmeasure, ref["rougeL"].fmeasure)
        assert rougeL(answer, refs, use_stemmer=True) == stemmed.score_multi(refs, answer)["rougeL"].fmeasure


def test_bleu_identical_to_sacrebleu_sentence_bleu(answer_pairs):
    for answer, refs in answer_pairs[::3]:
        assert bleu(answer, refs) == sacrebleu.sentence_bleu(answer, refs).score
        assert bleu(answer, refs, lowercase=True) == sacrebleu.sentence_bleu(answer, refs, lowercase=True).score


def test_autorag_stored_bleu_and_rouge_values(data_dir):
    d = pd.read_parquet(data_dir / "autorag" / "result_generator_best_0.parquet")
    for _, row in d.iterrows():
        refs, answer = list(row["generation_gt"]), row["generated_texts"]
        assert bleu(answer, refs) == pytest.approx(row["bleu"], abs=1e-6)
        assert rougeL(answer, refs) == pytest.approx(row["rouge"], abs=1e-6)


def test_a_long_answer_scores_as_rouge_score_and_sacrebleu_score_it(answer_pairs):
    # 40,000 tokens of real answers against a short reference: the positions of a token are kept as
    # one bit mask built when the LCS asks for it (ragexp.matchers.rouge.Tokens), not one OR per token
    answers = [a for a, _ in answer_pairs]
    long_answer = " ".join(answers * (40_000 // sum(len(a.split()) for a in answers) + 1))
    refs = answer_pairs[0][1]
    assert len(long_answer.split()) > 40_000
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
    theirs = scorer.score_multi(refs, long_answer)
    assert rougeL(long_answer, refs) == theirs["rougeL"].fmeasure
    assert rouge1(long_answer, refs) == theirs["rouge1"].fmeasure
    assert rouge2(long_answer, refs) == theirs["rouge2"].fmeasure
    assert bleu(long_answer, refs) == sacrebleu.sentence_bleu(long_answer, refs).score
