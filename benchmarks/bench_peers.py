"""A whole ``ragexp.evaluate`` against the peers' bare loops on the same records, side by side in one
process: token F1 (SQuAD's official arithmetic, written out), BLEU (sacrebleu's sentence BLEU) and
ROUGE-L (rouge-score's ``score_multi``), each over the same JSONL file of English records.

    python benchmarks/bench_peers.py [--n 5000] [--rounds 5] [--profile rougeL]

Records: benchmarks/realistic_records.py's (SQuAD v2 questions, a reworded sentence answer, the
distinct references), the first ``--n`` whose answer and references hold no CJK. A peer's loop reads the file (``json.loads`` a line), scores every record and
takes the mean: what a script using the peer alone would do. ragexp's side is the whole run,
``ragexp.evaluate(path, metric=<one metric>, log=False, overrides=["execution.processes=1"])``:
reading, checking, scoring, the interval, the per-sample table and the summary. Both on one core,
CPU seconds (this process's and its children's, ``os.times``: a scoring process ragexp forks counts), in turns, after one warm-up call of each (imports, Hydra's
compose); ragexp's text caches and its sacrebleu scorer are emptied at the start of each of its calls (timed), so
neither side starts with the texts tokenised. The per-sample values must be identical (``==`` on every record), else it exits 1.
Printed per metric: each round's CPU, the median ratio peer ÷ ragexp (above 1: ragexp faster), the
load average. ``--profile METRIC`` prints cProfile's top functions of one ragexp call.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import string
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from realistic_records import record  # noqa: E402  (benchmarks/ is not a package)

_PUNCT = set(string.punctuation)
_CJK = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def english_records(path: Path, n: int) -> Path:
    """The first ``n`` realistic records whose answer and references hold no CJK (SQuAD quotes a few
    Chinese names; ragexp segments those by character: docs/metrics.md), as JSONL."""
    with open(path, "w", encoding="utf-8") as fh:
        i = kept = 0
        while kept < n:
            r = record(i)
            i += 1
            if not _CJK.search(r["answer"] + "".join(r["reference_answers"])):
                fh.write(json.dumps(r, ensure_ascii=False) + "\n")
                kept += 1
    return path


def _records(path: Path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def _squad_tokens(text: str) -> list[str]:
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    return _ARTICLES.sub(" ", text).split()


def _squad_f1(prediction: str, truth: str) -> float:
    p, t = _squad_tokens(prediction), _squad_tokens(truth)
    if not p or not t:
        return float(p == t)
    same = sum((Counter(p) & Counter(t)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(t)
    return 2 * precision * recall / (precision + recall)


def peer_token_f1(path: Path) -> list[float]:
    """SQuAD v2's evaluation arithmetic: the best F1 over the gold answers."""
    return [max(_squad_f1(r["answer"], g) for g in r["reference_answers"]) for r in _records(path)]


def peer_bleu(path: Path) -> list[float]:
    from sacrebleu.metrics import BLEU

    bleu = BLEU(effective_order=True)
    return [bleu.sentence_score(r["answer"], r["reference_answers"]).score for r in _records(path)]


def peer_rouge_l(path: Path) -> list[float]:
    from rouge_score.rouge_scorer import RougeScorer

    scorer = RougeScorer(["rougeL"])
    return [scorer.score_multi(r["reference_answers"], r["answer"])["rougeL"].fmeasure for r in _records(path)]


PEERS = {"answer_token_f1": ("a bare SQuAD F1 loop", peer_token_f1), "bleu": ("sacrebleu", peer_bleu),
         "rougeL": ("rouge-score", peer_rouge_l)}


def ours(path: Path, metric: str):
    """The whole run, its text caches emptied first (a fresh process's cold start, as the peer's), and its
    sacrebleu scorer made anew: sacrebleu's 13a tokenizer caches each line it has tokenised per tokenizer
    (an lru_cache of 65,536 lines), so a kept scorer would start every round after the first with the texts
    tokenised, where the peer's new BLEU object starts cold."""
    import ragexp
    from ragexp.common.caches import clear_all
    from ragexp.metrics import answer

    clear_all()
    answer._bleu_scorer.cache_clear()
    return ragexp.evaluate(path, metric=metric, log=False, overrides=["execution.processes=1"])


def cpu() -> float:
    """CPU seconds of this process and of its children that have ended (ragexp's scoring processes, if any)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--metrics", default=",".join(PEERS))
    ap.add_argument("--profile", default=None)
    a = ap.parse_args()
    path = english_records(Path(tempfile.mkdtemp(prefix="bench_peers_")) / "records.jsonl", a.n)
    load = [os.getloadavg()[0]]
    failed = False
    if a.profile:
        import cProfile
        import pstats

        ours(path, a.profile)
        prof = cProfile.Profile()
        prof.enable()
        ours(path, a.profile)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        return 0
    for metric in a.metrics.split(","):
        name, peer = PEERS[metric]
        theirs = peer(path)  # warm-up, and the values to compare
        result = ours(path, metric)
        values = result.per_sample[metric].tolist()
        same = values == theirs
        failed |= not same
        times: dict[str, list[float]] = {"peer": [], "ragexp": []}
        for _ in range(a.rounds):
            for side, fn in (("peer", lambda: peer(path)), ("ragexp", lambda: ours(path, metric))):
                t = cpu()
                fn()
                times[side].append(cpu() - t)
            load.append(os.getloadavg()[0])
        ratio = statistics.median(p / r for p, r in zip(times["peer"], times["ragexp"]))
        print(f"{metric} on {a.n:,} records: {name} " + ", ".join(f"{t:.3f}" for t in times["peer"])
              + " s; ragexp.evaluate " + ", ".join(f"{t:.3f}" for t in times["ragexp"])
              + f" s CPU; peer / ragexp {ratio:.2f}x (median of {a.rounds} rounds in turns); values "
              + ("identical" if same else f"DIFFER ({sum(x != y for x, y in zip(values, theirs))} records)"), flush=True)
    print(f"load average (1 min) {min(load):.1f}-{max(load):.1f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
