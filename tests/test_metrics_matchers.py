"""Matchers (SPEC §2.2): the sentence splitter, exact and ROUGE matching, and agreement of our
fast ROUGE with rouge-score on real SQuAD text (identical floats, every pair)."""

from __future__ import annotations

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from ragexp.errors import ConfigError
from ragexp.matchers import MATCHER_NAMES, build_matcher, split_sentences
from ragexp.matchers.rouge import lcs_length, rouge_l, rouge_n, tokens

SCORER = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"])
STEMMED = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


@pytest.fixture(scope="module")
def squad_paragraphs(data_dir):
    d = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    return [p["context"] for a in d["data"] for p in a["paragraphs"]]


# -- the sentence splitter -------------------------------------------------------------------

def test_splitter_keeps_abbreviations_initials_and_numbers_together():
    text = "Mr. J. R. R. Tolkien was born in 1892. He taught at Oxford, e.g. at Pembroke. It cost $3.50!"
    assert split_sentences(text) == ("Mr. J. R. R. Tolkien was born in 1892.", "He taught at Oxford, e.g. at Pembroke.",
                                     "It cost $3.50!")


def test_splitter_blank_lines_quotes_and_lower_case_continuations():
    assert split_sentences('He said "Stop." Then left.\n\nnew paragraph here') == (
        'He said "Stop."', "Then left.", "new paragraph here")
    assert split_sentences("version 2.0 is out. and more") == ("version 2.0 is out. and more",)
    assert split_sentences("   \n ") == ()


def test_splitter_loses_no_text_on_squad(squad_paragraphs):
    for p in squad_paragraphs[:200]:
        sentences = split_sentences(p)
        assert "".join(sentences).replace(" ", "") == "".join(p.split()).replace(" ", "")
        assert all(s == s.strip() and s for s in sentences)


# -- ROUGE identical to rouge-score ----------------------------------------------------------

WORDS = st.sampled_from(["the", "cat", "dog", "sat", "on", "mat", "a", "ran", "Cat!", "running", "3.5", "é", "x-y"])


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=30), st.lists(WORDS, max_size=30))
def test_rouge_scores_identical_to_rouge_score(target, prediction):
    t, p = " ".join(target), " ".join(prediction)
    ref = SCORER.score(t, p)
    assert rouge_l(t, p) == tuple(ref["rougeL"])
    assert rouge_n(t, p, 1) == tuple(ref["rouge1"])
    assert rouge_n(t, p, 2) == tuple(ref["rouge2"])
    stem = STEMMED.score(t, p)
    assert rouge_l(t, p, use_stemmer=True) == tuple(stem["rougeL"])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_tokens_identical_to_rouge_score_tokenizer(text):
    from rouge_score import tokenize

    assert list(tokens(text).seq) == tokenize.tokenize(text, None)


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(max_codepoint=127), max_size=80))
def test_ascii_tokens_identical_to_rouge_score_tokenizer(text):
    """An ASCII text is tokenised byte by byte (bytes.translate), any other by the expression: both as rouge-score."""
    from rouge_score import tokenize

    assert list(tokens(text).seq) == tokenize.tokenize(text, None)
    assert tokens(text).repeats == len(tokens(text).seq) - len(set(tokens(text).seq))


@settings(max_examples=300, deadline=None)
@given(st.lists(WORDS, max_size=40), st.lists(WORDS, max_size=40))
def test_lcs_length_is_symmetric(a, b):
    ta, tb = tokens(" ".join(a)), tokens(" ".join(b))
    assert lcs_length(ta, tb) == lcs_length(tb, ta)


def test_rouge_l_identical_on_squad_sentences_and_paragraphs(squad_paragraphs):
    rng = random.Random(7)
    sentences = [s for p in squad_paragraphs for s in split_sentences(p)]
    pairs = [(rng.choice(sentences), rng.choice(sentences)) for _ in range(1500)]
    pairs += [(rng.choice(squad_paragraphs), rng.choice(squad_paragraphs)) for _ in range(150)]
    # pairs that share a lot: a paragraph against one of its own sentences
    pairs += [(p, rng.choice(split_sentences(p))) for p in squad_paragraphs[:150]]
    for target, prediction in pairs:
        ref = SCORER.score(target, prediction)
        assert rouge_l(target, prediction) == tuple(ref["rougeL"])
        assert rouge_l(prediction, target) == tuple(SCORER.score(prediction, target)["rougeL"])


# -- matchers: SPEC test vectors and thresholds ----------------------------------------------

PARIS = ["Paris is the capital of France and also the largest city in the country.", "Lyon is a major city in France."]
PARIS_GT = ["Paris is the capital of France."]
SHAKESPEARE = ["Shakespeare was a playwright.", "Romeo and Juliet is a play by Shakespeare."]
SHAKESPEARE_GT = ["Shakespeare was a playwright.", "Romeo and Juliet is a play by William Shakespeare."]


def test_rouge_recall_is_of_the_retrieved_component_against_the_ground_truth():
    m = build_matcher("rouge_chunk")
    assert rouge_l(PARIS_GT[0], PARIS[0])[1] == 6 / 6      # the whole ground truth is in the passage
    assert rouge_l(PARIS_GT[0], PARIS[1])[1] == 2 / 6      # "is", "france"
    assert m.is_match(PARIS[0], PARIS_GT[0]) and not m.is_match(PARIS[1], PARIS_GT[0])


@pytest.mark.parametrize("name", ["rouge_chunk", "rouge_sentence"])
def test_shakespeare_matches_with_both_rouge_matchers(name):
    r = build_matcher(name).match(SHAKESPEARE, SHAKESPEARE_GT)
    assert (r.precision(), r.recall()) == (1.0, 1.0)
    # 8 of the 9 ground-truth tokens, in order
    assert rouge_l(SHAKESPEARE_GT[1], SHAKESPEARE[1])[1] == 8 / 9


def test_threshold_is_strict_unless_inclusive():
    gt = "one two three four five six seven eight nine ten"
    retrieved = "one two three four five six seven"          # recall 7/10 = 0.7 exactly
    assert rouge_l(gt, retrieved)[1] == 0.7
    assert not build_matcher("rouge_chunk").is_match(retrieved, gt)
    assert build_matcher({"name": "rouge_chunk", "inclusive": True}).is_match(retrieved, gt)
    assert build_matcher({"name": "rouge_chunk", "threshold": 0.6}).is_match(retrieved, gt)


def test_exact_matchers_strip_outer_white_space_only():
    assert build_matcher("exact_chunk").is_match("  Paris.\n", "Paris.")
    assert not build_matcher("exact_chunk").is_match("paris.", "Paris.")
    r = build_matcher("exact_sentence").match(["A b. C d.", "E f."], ["C d. X y."])
    assert (r.precision(), r.recall()) == (1 / 3, 1 / 2)


def test_ground_truth_duplicates_and_empties_count_once():
    m = build_matcher("exact_chunk")
    r = m.match(["a", "a", "b"], ["a", " a ", "", "c"])
    assert r.n_truth_components == 2                    # a, c
    assert (r.precision(), r.recall()) == (2 / 3, 1 / 2)
    assert r.recall(k=1) == 1 / 2 and r.precision(k=1) == 1.0


def test_build_matcher_refuses_unknown_names_and_options():
    with pytest.raises(ConfigError, match="unknown name 'rouge'"):
        build_matcher("rouge")
    with pytest.raises(ConfigError, match="has no option 'treshold'"):
        build_matcher({"name": "rouge_chunk", "treshold": 0.5})
    with pytest.raises(ConfigError, match="threshold must be a number in"):
        build_matcher({"name": "rouge_chunk", "threshold": 7})


# -- the matcher relation agrees with a direct rouge-score computation on SQuAD --------------

def _reference_relation(retrieved, truths, threshold, sentences):
    """SPEC §2.2 straight from its words, with rouge-score doing the ROUGE-L."""
    split = split_sentences if sentences else (lambda t: (t,))
    gt = list(dict.fromkeys(c.strip() for t in dict.fromkeys(x.strip() for x in truths if x.strip())
                            for c in split(t) if c.strip()))
    comps = [c for p in retrieved for c in split(p)]
    matched_gt, matching = set(), 0
    for c in comps:
        hits = {j for j, g in enumerate(gt) if SCORER.score(g, c)["rougeL"].recall > threshold}
        matching += bool(hits)
        matched_gt |= hits
    return matching / len(comps), len(matched_gt) / len(gt)


@pytest.mark.slow
def test_rouge_matchers_agree_with_rouge_score_on_bm25_runs(squad_run):
    for name, threshold, sentences, n in [("rouge_chunk", 0.7, False, 120), ("rouge_sentence", 0.8, True, 40)]:
        m = build_matcher(name)
        for rec in squad_run[:n]:
            # ground truth: the gold paragraph and one other retrieved paragraph's first half
            truths = [rec["gt_contexts"][0], rec["contexts"][3][: len(rec["contexts"][3]) // 2]]
            r = m.match(rec["contexts"], truths)
            assert (r.precision(), r.recall()) == _reference_relation(rec["contexts"], truths, threshold, sentences)


@pytest.fixture(scope="module")
def squad_run(data_dir):
    from squad_bm25 import squad_bm25_run

    return squad_bm25_run(str(data_dir), 300)


def test_a_ground_truth_of_many_distinct_words_matches_as_rouge_score_says():
    # a long text's token masks are built in one pass (ragexp.matchers.rouge._bits);
    # OR-ing one bit at a time was quadratic in the vocabulary (200,000 distinct words: 30.6 s, now 2.0 s)

    truth = " ".join(f"w{i}" for i in range(3000))
    retrieved = [" ".join(f"w{i}" for i in range(0, 3000, 2)), " ".join(f"w{i}" for i in range(2500)), "w1 w2"]
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    expected = [scorer.score(truth, r)["rougeL"].recall > 0.6 for r in retrieved]
    assert expected == [False, True, False]
    result = build_matcher({"name": "rouge_chunk", "threshold": 0.6}).match(retrieved, [truth])
    assert result.precision() == sum(expected) / len(retrieved) and result.recall() == 1.0
