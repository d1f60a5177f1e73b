"""ragexp's sentence BLEU (ragexp.metrics.answer.sentence_bleu) against sacrebleu's ``sentence_score`` on real
answers, under every smoothing method and several tokenizers, and on the edge cases where BLEU's
rules branch (an empty hypothesis, one word, no 4-gram or no match at all, ties in reference length)."""

from __future__ import annotations

import json
import math

import pytest
from sacrebleu.metrics import BLEU

from ragexp.metrics.answer import bleu, sentence_bleu

SETTINGS = [
    dict(),
    dict(lowercase=True),
    dict(smooth_method="floor"),
    dict(smooth_method="floor", smooth_value=0.3),
    dict(smooth_method="add-k"),
    dict(smooth_method="add-k", smooth_value=2),
    dict(smooth_method="none"),
    dict(tokenize="none"),
    dict(tokenize="intl"),
    dict(tokenize="char"),
]


def _sacrebleu(hypothesis, references, **options):
    return BLEU(effective_order=True, **options).sentence_score(hypothesis, references).score


@pytest.fixture(scope="module")
def pairs(data_dir):
    """Real answer/references pairs: HaluEval's right and hallucinated answers against its right one,
    SQuAD answers of one question against another question's answers of the same paragraph, and the
    Paul Graham quotes against their answers."""
    halu = [json.loads(line) for line in
            (data_dir / "halueval" / "qa_one-turn_data.json").read_text(encoding="utf-8").splitlines()[:150]]
    out = [(h["right_answer"], [h["right_answer"], h["knowledge"]]) for h in halu]
    out += [(h["hallucinated_answer"], [h["right_answer"]]) for h in halu]
    squad = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    qas = [qa for article in squad["data"][:6] for para in article["paragraphs"] for qa in para["qas"] if qa["answers"]]
    out += [(a["question"] + " " + a["answers"][0]["text"], [x["text"] for x in b["answers"]] + [b["question"]])
            for a, b in zip(qas[:200], qas[1:201])]
    tonic = json.loads((data_dir / "tonic_paul_graham" / "qa_pairs.json").read_text(encoding="utf-8"))
    out += [(t["answer"], [t["quote"]]) for t in tonic[:60]]
    return out


def test_the_real_pairs_cover_many_answers(pairs):
    assert len(pairs) >= 500 and len({a for a, _ in pairs}) >= 400


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
def test_sentence_bleu_equals_sacrebleu_on_real_answers(pairs, options):
    for hypothesis, references in pairs:
        ours = sentence_bleu(hypothesis, references, **options)
        theirs = _sacrebleu(hypothesis, references, **options)
        assert ours == pytest.approx(theirs, rel=1e-12, abs=1e-9), (hypothesis, references)


EDGES = [
    ("", ["a reference"]),                       # an empty hypothesis
    ("   ", ["a reference"]),                    # blank
    ("word", ["word"]),                          # one word, matching: order 1 only
    ("word", ["other"]),                         # one word, no match
    ("word", ["a longer reference here"]),       # brevity penalty, one order
    ("the cat sat", ["the cat sat on the mat"]), # no 4-gram in the hypothesis
    ("the cat sat on it", ["a dog ran"]),        # no match at all
    ("a b c d e", ["a x c y e"]),                # unigrams only: exp smoothing halves per missing order
    ("a b c d", [""]),                           # an empty reference
    ("a b c d", ["", "a b c d"]),                # an empty reference among others
    ("a b c", ["a b", "a b c d"]),               # two references as close: the shorter length counts
    ("x y z w v", ["x y z w v u t", "x y z"]),   # closest reference length above and below
    ("Hello, world! &amp; more -\nlines", ["hello world & more lines"]),  # 13a's entities and hyphenation
    ("Trailing space   ", ["Trailing space"]),
]


@pytest.mark.parametrize("options", SETTINGS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()) or "default")
@pytest.mark.parametrize("hypothesis,references", EDGES)
def test_sentence_bleu_equals_sacrebleu_on_edge_cases(hypothesis, references, options):
    assert sentence_bleu(hypothesis, references, **options) == pytest.approx(
        _sacrebleu(hypothesis, references, **options), rel=1e-12, abs=1e-9)


def test_bleu_metric_keeps_its_rules_around_the_computation():
    assert bleu("", ["a reference"]) == 0.0                    # an empty answer is a miss
    assert bleu("text", ["", "  "]).status == "undefined"      # no reference left
    assert bleu("the same words", ["the same words"]) == pytest.approx(100.0, rel=1e-12)
    # the docstring's example by hand: "the dog bit the man ." (6 tokens), closest reference 7 tokens;
    # matches per order 6/6, 4/5, 2/4, 1/3
    by_hand = math.exp(1 - 7 / 6) * math.exp(
        (math.log(100 * 6 / 6) + math.log(100 * 4 / 5) + math.log(100 * 2 / 4) + math.log(100 * 1 / 3)) / 4)
    assert bleu("The dog bit the man.", ["The dog had bit the man.", "The man had bitten the dog."],
                lowercase=True) == pytest.approx(by_hand, rel=1e-12)
    # one word matched, nothing else to compare: effective order 1, no brevity penalty
    assert sentence_bleu("word", ["word"]) == pytest.approx(100 * 1 / 1, rel=1e-12)


def test_unknown_smoothing_is_refused():
    with pytest.raises(ValueError, match="smooth_method"):
        sentence_bleu("a", ["a"], smooth_method="magic")
