"""Realistic evaluation records for the scale benchmarks and the streaming tests: what a RAG system's
logged traffic looks like, about 5.8 KB of JSONL per record, every answer its own.

    python benchmarks/realistic_records.py OUT.jsonl 100000 [--seed 0]

Each record takes a SQuAD v2 question with an answer (``/work/shared/data/squad2``, or
``$RAGEXP_DATA_DIR/squad2``) in turn and gives it:

- ``contexts`` / ``context_ids``: five retrieved paragraphs of the question's article (the gold
  paragraph at a random rank in four records of five, absent in the fifth), ids ``<article>-<paragraph>``;
- ``gt_contexts`` / ``gt_context_ids``: the gold paragraph;
- ``answer``: a sentence — the gold paragraph's sentence holding the answer (three times in four),
  else a sentence of another retrieved paragraph — reworded as a generator would, so that answers
  differ from record to record as a real system's do (:func:`reworded`: an opening phrase from a
  few templates, now and then a word dropped or two neighbours swapped, a closing remark; about 99%
  of the answers are distinct); ``reference_answers``: SQuAD's distinct answers;
- ``id`` (``q0000001``), ``latency_s`` (log-normal around 0.8 s, in ms), ``label`` (whether the
  answer sentence holds a reference answer: what a person would mark correct).

Every choice comes from ``random.Random(seed * 1_000_003 + i)``: the same file for the same size
and seed, and record i the same whatever the size.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import sys
from functools import lru_cache
from pathlib import Path

DATA = Path(os.environ.get("RAGEXP_DATA_DIR", Path(__file__).resolve().parents[2] / "shared" / "data")).resolve()
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'])")


@lru_cache(maxsize=1)
def squad() -> tuple[list[tuple[int, str, str]], list[list[int]], list[tuple[int, str, list[str]]]]:
    """(paragraphs as (article, id, text), paragraph indices per article, questions as (paragraph, question,
    distinct answers)) of SQuAD v2's dev set, answerable questions only."""
    d = json.loads((DATA / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    paragraphs, articles, questions = [], [], []
    for ai, article in enumerate(d["data"]):
        articles.append([])
        for pi, para in enumerate(article["paragraphs"]):
            articles[-1].append(len(paragraphs))
            paragraphs.append((ai, f"{ai}-{pi}", para["context"]))
            for qa in para["qas"]:
                answers = list(dict.fromkeys(a["text"] for a in qa["answers"]))
                if answers:
                    questions.append((len(paragraphs) - 1, qa["question"], answers))
    return paragraphs, articles, questions


def sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()] or [text]


_OPENINGS = ("", "", "", "Based on the context, ", "According to the passage, ", "The documents say that ",
             "In short, ", "From what I found, ", "The answer is: ", "As the text explains, ", "Yes - ",
             "It seems that ", "To answer your question, ", "The retrieved paragraph states that ")
_CLOSINGS = ("", "", "", "", " This is stated in the retrieved text.", " I hope this helps.",
             " (source {k} of 5)", " Let me know if you need more detail.", " This answers the question.",
             " See paragraph {k}.", " Confidence: {p}%.")


def reworded(sentence: str, rng: random.Random) -> str:
    """``sentence`` as a generator might have phrased it: a template's opening (its first letter
    lowered after one), each word dropped with probability 0.04, two neighbouring words swapped one
    time in three, a closing remark (some with a number); the words a reference matches mostly stay."""
    words = sentence.split()
    words = [w for w in words if rng.random() >= 0.04] or words
    if len(words) > 3 and rng.random() < 1 / 3:
        j = rng.randrange(len(words) - 1)
        words[j], words[j + 1] = words[j + 1], words[j]
    opening = rng.choice(_OPENINGS)
    text = " ".join(words)
    if opening and text[:1].isupper() and not text[1:2].isupper():
        text = text[0].lower() + text[1:]
    closing = rng.choice(_CLOSINGS).format(k=rng.randint(1, 5), p=rng.randint(55, 99))
    return opening + text + closing


def record(i: int, seed: int = 0, broken: bool = False) -> dict:
    """Record ``i`` of the stream (``broken``: its query blank, a bad row)."""
    paragraphs, articles, questions = squad()
    rng = random.Random(seed * 1_000_003 + i)
    gold, question, answers = questions[i % len(questions)]
    article = paragraphs[gold][0]
    others = [p for p in articles[article] if p != gold]
    while len(others) < 5:  # a short article: paragraphs of the next ones
        article = (article + 1) % len(articles)
        others += [p for p in articles[article] if p != gold and p not in others]
    retrieved = rng.sample(others, 5)
    if rng.random() < 0.8:
        retrieved[rng.randrange(5)] = gold
    gold_sentences = sentences(paragraphs[gold][2])
    holding = [s for s in gold_sentences if any(a in s for a in answers)]
    if holding and rng.random() < 0.75:
        answer = holding[0]
    else:
        answer = rng.choice(sentences(paragraphs[rng.choice([p for p in retrieved if p != gold] or others)][2]))
    answer = reworded(answer.strip(), rng)
    return {
        "id": f"q{i:07d}",
        "query": "" if broken else question,
        "answer": answer.strip(),
        "reference_answers": answers,
        "contexts": [paragraphs[p][2] for p in retrieved],
        "context_ids": [paragraphs[p][1] for p in retrieved],
        "gt_contexts": [paragraphs[gold][2]],
        "gt_context_ids": [paragraphs[gold][1]],
        "latency_s": round(math.exp(rng.gauss(math.log(0.8), 0.4)), 3),
        "label": any(a.lower() in answer.lower() for a in answers),
    }


def write_records(path: Path | str, n: int, seed: int = 0, broken: bool = False) -> Path:
    """Write ``n`` records as JSONL (``broken``: the middle record's query blank); return the path."""
    path = Path(path)
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps(record(i, seed, broken and i == n // 2), ensure_ascii=False) + "\n")
    return path


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("n", type=int)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    write_records(a.out, a.n, a.seed)
    size = a.out.stat().st_size
    print(f"{a.n:,} records, {size / 2 ** 20:.1f} MB ({size / a.n / 1024:.2f} KB each) in {a.out}", file=sys.stderr)
