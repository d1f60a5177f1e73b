"""What the mixed segmentation of CJK texts costs English ones (docs/metrics.md, "Keywords and Chinese
text"): ragexp's SQuAD tokeniser (which first asks whether a text holds CJK) against SQuAD's official
normalisation written out as the evaluation script does it, on the same English texts, uncached, in
turns; the tokens must be identical.

    python benchmarks/bench_cjk_tokens.py [--n 5000] [--rounds 5]

Texts: the answers, references and retrieved paragraphs of ``--n`` realistic records
(benchmarks/realistic_records.py) but the few that hold CJK (SQuAD quotes some Chinese names). Printed: CPU seconds per round of each, the ratio ragexp ÷
official (median of the rounds), and the load average. The Chinese demo questions' tokens are
printed beside for a look.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realistic_records import record  # noqa: E402  (benchmarks/ is not a package)

from ragexp.common.text import _squad_tokens  # noqa: E402

_PUNCT = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def official(text: str) -> tuple[str, ...]:
    """SQuAD v2's normalize_answer(text).split(): lower, no punctuation, no articles, single spaces."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return tuple(" ".join(text.split()).split())


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    texts = []
    for i in range(a.n):
        r = record(i)
        texts += [r["answer"], *r["reference_answers"], *r["contexts"]]
    cjk = [t for t in texts if _CJK.search(t)]
    texts = [t for t in texts if not _CJK.search(t)]  # SQuAD's few paragraphs quoting Chinese: not English
    ours = _squad_tokens.__wrapped__  # the tokeniser without its cache
    if any(ours(t) != official(t) for t in texts):
        print("bench_cjk_tokens: FAILED: tokens differ from SQuAD's on an English text", file=sys.stderr)
        return 1
    times: dict[str, list[float]] = {"official": [], "ragexp": []}
    for _ in range(a.rounds):
        for name, fn in (("official", official), ("ragexp", ours)):
            t = time.process_time()
            for text in texts:
                fn(text)
            times[name].append(time.process_time() - t)
    ratio = statistics.median(r / o for r, o in zip(times["ragexp"], times["official"]))
    chars = sum(map(len, texts))
    print(f"{len(texts):,} English texts ({chars / 1e6:.1f} M characters), tokens identical "
          f"({len(cjk):,} texts holding CJK left out)")
    for name, ts in times.items():
        print(f"  {name:<8}: " + ", ".join(f"{t:.3f}" for t in ts) + " s CPU")
    print(f"  ragexp / official: {ratio:.3f}x (median of {a.rounds} rounds in turns); "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print("  Chinese:", " | ".join(" ".join(ours(t)) for t in ("铁观音属于乌龙茶，是一种半发酵茶。", "RAG是一种模型")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
