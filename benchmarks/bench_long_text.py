"""Long answers: every deterministic answer metric's seconds on one answer of 1, 2, 4, 8 MB (``--sizes``).

    python benchmarks/bench_long_text.py                    # 1,2,4,8 MB
    python benchmarks/bench_long_text.py --sizes 1,10,50    # up to the 50 MB docs/guarantees.md promises
    python benchmarks/bench_long_text.py --whole-run --sizes 4,8,16,50

``--whole-run``: ``ragexp.evaluate`` of three records (suite ``default``, ``log=False``) whose first
answer is N MB of random words from a 20,000-word vocabulary, each size in a fresh process: wall
seconds, seconds per MB and the child's peak memory.

The answer is the shared data's SQuAD questions and answers joined and repeated to the size (real
words, sentences, punctuation); the references are one SQuAD answer and its question. Each metric is
called once per size with every cache cleared. Printed per metric: seconds at each size and seconds
per MB at the largest size over seconds per MB at the smallest (1.0 = linear; a quadratic step would
double it at each doubling). The script exits non-zero when an answer is not the size it names or a
metric did not return a number.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1,2,4,8", help="answer sizes in MB, comma-separated")
    parser.add_argument("--whole-run", action="store_true", help="time ragexp.evaluate in a fresh process per size")
    parser.add_argument("--data-dir", default=os.environ.get("RAGEXP_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    args = parser.parse_args()
    if args.whole_run:
        return whole_run([float(s) for s in args.sizes.split(",")])
    from ragexp.common import text
    from ragexp.matchers import rouge
    from ragexp.metrics import answer, keyword

    squad = json.loads((Path(args.data_dir) / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    qas = [qa for art in squad["data"] for p in art["paragraphs"] for qa in p["qas"] if qa["answers"]]
    piece = " ".join(f"{qa['question']} {qa['answers'][0]['text']}." for qa in qas[:2000])
    refs = [qas[0]["answers"][0]["text"], qas[0]["question"]]
    metrics = {name: getattr(answer, name) for name in
               ("exact_match", "answer_token_f1", "bleu", "rouge1", "rouge2", "rougeL")}
    metrics["keyword_overlap"] = keyword.keyword_overlap
    sizes = [float(s) for s in args.sizes.split(",")]
    seconds: dict[str, list[float]] = {name: [] for name in metrics}
    ok = True
    for mb in sizes:
        n = int(mb * 1_000_000)
        big = (piece * (n // len(piece) + 1))[:n]
        if len(big.encode("utf-8")) < n * 0.99:
            print(f"answer of {mb} MB has {len(big.encode('utf-8'))} bytes", file=sys.stderr)
            ok = False
        for name, fn in metrics.items():
            for cache in (rouge._plain_tokens, rouge._ngram_counts, answer._normalized, text.squad_counts,
                          answer._bleu_scorer, text._squad_tokens, text._word_tokens):
                cache.cache_clear()
            t = time.perf_counter()
            value = fn(big, refs)
            seconds[name].append(time.perf_counter() - t)
            if not isinstance(value, float):
                print(f"{name} returned {value!r} at {mb} MB", file=sys.stderr)
                ok = False
        print(f"{mb:g} MB: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in seconds.items()), flush=True)
    print("\nmetric            " + "".join(f"{mb:>9g} MB" for mb in sizes) + "   s/MB largest / smallest")
    for name, times in seconds.items():
        ratio = (times[-1] / sizes[-1]) / (times[0] / sizes[0]) if times[0] > 0 else float("nan")
        print(f"{name:18s}" + "".join(f"{t:10.2f} s" for t in times) + f"   {ratio:6.2f}")
    return 0 if ok else 1


WHOLE_RUN = r"""
import random, sys, time
import ragexp
rng = random.Random(1)
words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 8))) for _ in range(20000)]
out, n, size = [], 0, int(float(sys.argv[1]) * 1e6)
while n < size:
    w = rng.choice(words) + (". Xq" if rng.random() < 0.05 else "")
    out.append(w)
    n += len(w) + 1
small = "The capital of France is Paris. It is a large city."
recs = [dict(id=f"r{i}", query="what is the capital?", answer=small, reference_answers=[small, "Paris"],
             contexts=[small, "Lyon is a city."], context_ids=["a", "b"], gt_context_ids=["a"], gt_contexts=[small],
             label=True, latency_s=1.0) for i in range(3)]
recs[0]["answer"] = " ".join(out)
assert len(recs[0]["answer"]) >= size
t = time.perf_counter()
result = ragexp.evaluate(recs, metric="default", log=False, progress=False)
assert "rougeL" in result.metrics.index
print(time.perf_counter() - t)
"""


def whole_run(sizes: list[float]) -> int:
    import resource
    import subprocess

    print("answer      wall       s/MB   peak memory (largest child so far)")
    for mb in sizes:
        proc = subprocess.run([sys.executable, "-c", WHOLE_RUN, str(mb)], capture_output=True, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-2000:], file=sys.stderr)
            return 1
        seconds = float(proc.stdout.split()[-1])
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6
        print(f"{mb:6g} MB {seconds:8.1f} s {seconds / mb:8.2f} {peak:8.2f} GB", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
