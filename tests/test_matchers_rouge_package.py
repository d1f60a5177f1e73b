"""ROUGE as the `rouge` package computes it (what continuous-eval 0.3's matchers use), checked
against the package itself on real passages perturbed the ways real text differs: capitals,
punctuation, accents, numbers with a decimal point, several sentences, outer white space."""

from __future__ import annotations

import json
import random

import pytest
from rouge import Rouge

from ragexp.errors import ConfigError
from ragexp.matchers import build_matcher
from ragexp.matchers.rouge import rouge_l
from ragexp.matchers.rouge_package import package_rouge_l

ROUGE = Rouge()


def reference_rouge_l(reference: str, hypothesis: str):
    """The package's ROUGE-L (p, r, f) as continuous-eval calls it; None where it raises."""
    try:
        s = ROUGE.get_scores(hypothesis, reference, ignore_empty=True)[0]["rouge-l"]
    except Exception:  # continuous-eval: any exception → no match
        return None
    return s["p"], s["r"], s["f"]


def reference_is_relevant(retrieved: str, truth: str, threshold: float, inclusive: bool = True) -> bool:
    """continuous-eval's RougeChunkMatch.is_relevant, from its definition (>=, `r` of rouge-l)."""
    s = reference_rouge_l(truth, retrieved)
    if s is None:
        return False
    return s[1] >= threshold if inclusive else s[1] > threshold


ACCENTED = str.maketrans({"e": "é", "a": "à", "o": "ö", "u": "ü", "c": "ç"})


def _perturb(text: str, rng: random.Random) -> str:
    """A retrieved passage that differs from `text` as real ones do."""
    words = text.split()
    out = []
    for w in words:
        r = rng.random()
        if r < 0.12:
            continue                                   # a word dropped
        if r < 0.22:
            w = w.upper() if rng.random() < 0.3 else w.lower() if w[:1].isupper() else w.capitalize()
        elif r < 0.30:
            w = w + rng.choice([",", ";", "!", "?", ":", ".", " ."])
        elif r < 0.36:
            w = w.translate(ACCENTED)
        elif r < 0.40:
            w = w.rstrip(".,;:")                       # punctuation dropped
        out.append(w)
        if rng.random() < 0.03:
            out.append(rng.choice(["3.5", "Dr.", "e.g.", "U.S.", "—", "(see", "below)"]))
    if rng.random() < 0.2 and "." in " ".join(out):   # two sentences swapped
        parts = " ".join(out).split(". ")
        rng.shuffle(parts)
        return ". ".join(parts)
    return " ".join(out)


def _window(paragraph: str, rng: random.Random) -> str:
    """One to three consecutive sentences of a paragraph (cut at '. ')."""
    sentences = paragraph.split(". ")
    i = rng.randrange(len(sentences))
    text = ". ".join(sentences[i:i + rng.randint(1, 3)])
    return text + rng.choice(["", "", " ", ". ", "\n"])   # outer white space changes the package's sentences


@pytest.fixture(scope="module")
def pairs(data_dir):
    """(ground truth, retrieved) pairs: about 600, from SQuAD and continuous-eval passages."""
    rng = random.Random(13)
    squad = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    paragraphs = [p["context"] for a in squad["data"] for p in a["paragraphs"]]
    rows = [json.loads(line) for line in (data_dir / "continuous_eval" / "retrieval_sm.jsonl").open(encoding="utf-8")]
    passages = [c for r in rows for c in r["retrieved_contexts"] + r["ground_truth_contexts"]]
    out = []
    for _ in range(500):
        truth = _window(rng.choice(paragraphs), rng)
        kind = rng.random()
        if kind < 0.7:
            retrieved = _perturb(truth, rng)
        elif kind < 0.85:
            retrieved = truth.strip() + " " + _window(rng.choice(paragraphs), rng)   # the truth and more
        else:
            retrieved = _window(rng.choice(paragraphs), rng)                          # another passage
        out.append((truth, retrieved))
    for truth in passages:
        out.append((truth, _perturb(truth, rng)))
        out.append((truth, truth.lower()))
    out += [("Paris.", ""), ("", "Paris."), ("...", "Paris."), ("Paris.", ". . ."), (" ", " "), ("Paris. ", "Paris.")]
    return out


def test_package_rouge_l_identical_to_the_rouge_package(pairs):
    for truth, retrieved in pairs:
        assert package_rouge_l(truth, retrieved) == reference_rouge_l(truth, retrieved), (truth, retrieved)


def test_the_pairs_span_the_thresholds(pairs):
    # the agreement below means something only if recalls fall on both sides of both thresholds
    recalls = [s[1] for s in (reference_rouge_l(t, r) for t, r in pairs) if s is not None]
    for threshold in (0.7, 0.8):
        assert sum(r >= threshold for r in recalls) > 50 and sum(r < threshold for r in recalls) > 50


@pytest.mark.parametrize("threshold", [0.7, 0.8])
@pytest.mark.parametrize("inclusive", [True, False])
def test_rouge_package_match_decisions_identical(pairs, threshold, inclusive):
    m = build_matcher({"name": "rouge_chunk", "threshold": threshold, "inclusive": inclusive, "implementation": "rouge_package"})
    for truth, retrieved in pairs:
        assert m.is_match(retrieved, truth) == reference_is_relevant(retrieved, truth, threshold, inclusive), (
            truth, retrieved)


def test_decisions_on_exact_ties_follow_inclusive():
    # 7 of 10 distinct reference words recovered: recall exactly 0.7
    truth = "one two three four five six seven eight nine ten"
    retrieved = "one two three four five six seven"
    assert reference_rouge_l(truth, retrieved)[1] == 7 / 10
    assert build_matcher({"name": "rouge_chunk", "threshold": 0.7, "inclusive": True, "implementation": "rouge_package"}).is_match(retrieved, truth)
    assert not build_matcher({"name": "rouge_chunk", "threshold": 0.7, "implementation": "rouge_package"}).is_match(retrieved, truth)


def test_case_and_punctuation_count_for_the_package_not_for_rouge_score():
    truth, retrieved = "Paris is the capital of France.", "paris is the capital of france, and its largest city."
    score = build_matcher({"name": "rouge_chunk", "threshold": 0.7, "inclusive": True})
    package = build_matcher({"name": "rouge_chunk", "threshold": 0.7, "inclusive": True, "implementation": "rouge_package"})
    assert rouge_l(truth, retrieved)[1] == 6 / 6
    assert package_rouge_l(truth, retrieved)[1] == 4 / 6 == reference_rouge_l(truth, retrieved)[1]
    assert score.is_match(retrieved, truth) and not package.is_match(retrieved, truth)


# -- the continuous_eval suite reproduces continuous-eval's PrecisionRecallF1 and ranked metrics --

def _continuous_eval_metrics(retrieved: list[str], truths: list[str]) -> dict[str, float]:
    """continuous-eval 0.3's PrecisionRecallF1(RougeChunkMatch()) and its reciprocal rank, from
    their definitions, with the rouge package deciding relevance (>= 0.7)."""
    rel = [[reference_is_relevant(r, g, 0.7) for g in truths] for r in retrieved]
    distinct = list(dict.fromkeys(truths))
    hit = {g for r in retrieved for g in distinct if reference_is_relevant(r, g, 0.7)}
    p = sum(any(row) for row in rel) / len(retrieved) if retrieved else 0.0
    r = len(hit) / len(distinct) if distinct else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    rr = next((1 / (i + 1) for i, row in enumerate(rel) if any(row)), 0.0)
    return {"context_precision": p, "context_recall": r, "context_f1": f1, "mrr": rr}


@pytest.fixture(scope="module")
def records(data_dir, pairs):
    rng = random.Random(7)
    rows = [json.loads(line) for line in (data_dir / "continuous_eval" / "retrieval_sm.jsonl").open(encoding="utf-8")]
    out = [(r["retrieved_contexts"], r["ground_truth_contexts"]) for r in rows]
    truths = [t for t, _ in pairs[:500]]
    retrieved = [r for _, r in pairs[:500]]
    for _ in range(150):
        n = rng.randint(1, 3)
        idx = rng.sample(range(500), n)
        gts = [truths[i] for i in idx]
        ret = [retrieved[i] for i in idx] + rng.sample(retrieved, rng.randint(0, 3))
        rng.shuffle(ret)
        out.append((ret, gts))
    return out


def test_continuous_eval_suite_reproduces_continuous_eval(compose, records):
    from ragexp.core.scoring import build_metrics

    cfg = compose("metric=continuous_eval")
    specs = {s.key: s for s in build_metrics(cfg.metric, cfg.matcher)[0]}
    assert specs["context_precision"].matcher.implementation == "rouge_package"
    differs_from_rouge_score = 0
    plain = build_matcher({"name": "rouge_chunk", "inclusive": True})
    for retrieved, truths in records:
        expected = _continuous_eval_metrics(retrieved, truths)
        for key, value in expected.items():
            assert specs[key].call(retrieved, truths) == pytest.approx(value, abs=1e-12), (key, retrieved, truths)
        m = plain.match(retrieved, truths)
        differs_from_rouge_score += (m.precision(), m.recall()) != (expected["context_precision"],
                                                                   expected["context_recall"])
    # the records exercise what the option changes (rouge-score would have disagreed on these)
    assert differs_from_rouge_score >= 20


def test_rouge_score_stays_the_default(compose):
    for name in ("rouge_chunk", "rouge_sentence"):
        assert compose(f"matcher={name}").matcher.implementation == "rouge_score"
        assert build_matcher(name).implementation == "rouge_score"


def test_build_matcher_refuses_an_unknown_implementation_and_a_stemmed_package():
    with pytest.raises(ConfigError, match="implementation must be one of rouge_score, rouge_package, got 'rouge'"):
        build_matcher({"name": "rouge_chunk", "implementation": "rouge"})
    with pytest.raises(ConfigError, match="'rouge_package' has no stemmer"):
        build_matcher({"name": "rouge_chunk", "implementation": "rouge_package", "use_stemmer": True})


@pytest.mark.integration
@pytest.mark.parametrize("overrides, expected", [
    (["matcher.implementation=rouge"],
     "ragexp: error: matcher 'rouge_chunk': implementation must be one of rouge_score, rouge_package, got 'rouge'"),
    (["matcher.implementation=rouge_package", "matcher.use_stemmer=true"],
     "ragexp: error: matcher 'rouge_chunk': use_stemmer is rouge-score's option; implementation 'rouge_package' "
     "has no stemmer (set use_stemmer=false)"),
])
def test_a_bad_implementation_is_one_line_on_the_command_line(data_dir, tmp_path, overrides, expected):
    from cli import run_cli

    proc = run_cli(f"data_dir={data_dir}", "matcher=rouge_chunk", *overrides, "progress=false", cwd=tmp_path,
                   check=False, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == expected
    assert "Traceback" not in proc.stderr
