"""How fast the deterministic metrics are, against a plain rouge-score loop in the same process.

    python benchmarks/bench_metrics.py [--data-dir ../shared/data] [--baseline 150]

Workload: every SQuAD v2 question of ``../shared/data/squad2`` (6,078 records) with its top-10
BM25 paragraphs (bm25s, texts and ids), the gold paragraph as ground truth, the answer texts as
references (answerable questions) and, as the "system's answer", the first sentence of the top
passage. Prints, on one core:

1. the whole ``default`` suite (the real Hydra config, context metrics with both the
   ``rouge_sentence`` and ``rouge_chunk`` matchers, ranked metrics at k = 1, 3, 5, 10), run
   through the same ``build_metrics → check_fields → score → aggregate`` as ``python -m ragexp``,
   cold caches: records per second;
2. per matcher, the match relation (context precision and recall) of every record with
   ragexp's matchers, cold caches, and the same values computed by a plain loop calling
   ``RougeScorer(['rougeL']).score(gt, retrieved).recall`` on the first ``--baseline`` records:
   both rates, the ratio, and a check that every value is identical.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("NUMBA_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parents[1]


def build_workload(data_dir: Path, k: int = 10):
    import bm25s

    from ragexp.matchers import split_sentences
    from ragexp.common.records import to_record

    d = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    ids, texts, questions = [], [], []
    for ai, article in enumerate(d["data"]):
        for pi, para in enumerate(article["paragraphs"]):
            ids.append(f"a{ai}p{pi}")
            texts.append(para["context"])
            for qa in para["qas"]:
                questions.append((qa["id"], qa["question"], len(ids) - 1, [a["text"] for a in qa["answers"]]))
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
    docs, _ = retriever.retrieve(bm25s.tokenize([q[1] for q in questions], show_progress=False), k=k,
                                 show_progress=False, n_threads=1)
    records = []
    for row, ((qid, question, gold, answers), ranked) in enumerate(zip(questions, docs), start=1):
        ranked = [int(i) for i in ranked]
        raw = {"id": qid, "query": question, "contexts": [texts[i] for i in ranked],
               "context_ids": [ids[i] for i in ranked], "gt_contexts": [texts[gold]], "gt_context_ids": [ids[gold]],
               "answer": split_sentences(texts[ranked[0]])[0]}
        if answers:
            raw["reference_answers"] = answers
        records.append(to_record(raw, path="squad-bm25", row=row))
    split_sentences.cache_clear()
    return records


def clear_caches():
    from ragexp.matchers import _BUILT, rouge, sentences
    from ragexp.metrics import answer, keyword, token
    from ragexp.common import text

    rouge._plain_tokens.cache_clear()
    rouge._ngram_counts.cache_clear()
    sentences.split_sentences.cache_clear()
    text.squad_counts.cache_clear()
    token.token_prf.cache_clear()
    answer._normalized.cache_clear()
    answer._bleu_scorer.cache_clear()
    keyword._judged.cache_clear()
    text._squad_tokens.cache_clear()
    text._word_tokens.cache_clear()
    for m in _BUILT.values():
        m._cache.clear()
        m._prepared.clear()


def run_suite(records):
    from hydra import compose, initialize_config_dir

    from ragexp.core.scoring import build_metrics, check_fields, score
    from ragexp.core.tally import tally_of

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[
            "dataset=records", "dataset.path=unused", "metric=default",
            "metric.context_precision.matcher=[rouge_sentence,rouge_chunk]",
            "metric.context_recall.matcher=[rouge_sentence,rouge_chunk]",
            "metric.context_f1.matcher=[rouge_sentence,rouge_chunk]"])
    specs, all_that_apply = build_metrics(cfg.metric, cfg.matcher)
    specs, skipped = check_fields(specs, records, "squad-bm25", all_that_apply)
    # jieba loads its dictionary once per process (some SQuAD paragraphs hold Chinese); like an
    # import, that happens before the clock starts, and is printed on its own
    t0 = time.perf_counter()
    from ragexp.common.text import word_tokens

    word_tokens("预热")
    print(f"jieba's one-time dictionary load: {time.perf_counter() - t0:.2f} s (not in the suite's time)")
    clear_caches()
    t0 = time.perf_counter()
    scores = score(records, specs)
    values, _ = tally_of(specs, scores, records).aggregate()
    return time.perf_counter() - t0, values, skipped


def ours(records, name):
    from ragexp.matchers import build_matcher

    m = build_matcher(name)
    out = []
    for r in records:
        rel = m.match(r.contexts, r.gt_contexts)
        out.append((rel.precision(), rel.recall()))
    return out


def plain_rouge_score(records, name):
    """The same precision / recall, straight from SPEC §2.2 with rouge-score doing each ROUGE-L."""
    from rouge_score import rouge_scorer

    from ragexp.matchers import build_matcher, split_sentences

    scorer = rouge_scorer.RougeScorer(["rougeL"])
    threshold = build_matcher(name).threshold
    split = split_sentences.__wrapped__ if name.endswith("sentence") else (lambda t: (t,))
    out = []
    for r in records:
        gt = list(dict.fromkeys(c.strip() for t in r.gt_contexts for c in split(t.strip()) if c.strip()))
        comps = [c for p in r.contexts for c in split(p)]
        matched, matching = set(), 0
        for c in comps:
            hits = {j for j, g in enumerate(gt) if scorer.score(g, c)["rougeL"].recall > threshold}
            matching += bool(hits)
            matched |= hits
        out.append((matching / len(comps), len(matched) / len(gt)))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("RAGEXP_DATA_DIR", str(ROOT.parent / "shared" / "data")))
    ap.add_argument("--baseline", type=int, default=150, help="records for the plain rouge-score loop")
    args = ap.parse_args(argv)
    try:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    except (AttributeError, OSError):
        pass

    t0 = time.perf_counter()
    records = build_workload(Path(args.data_dir))
    n = len(records)
    print(f"workload: {n} SQuAD records x 10 BM25 passages, built in {time.perf_counter() - t0:.1f} s")

    seconds, values, skipped = run_suite(records)
    print(f"\ndefault suite: {len(values)} metric keys, {n} records in {seconds:.2f} s "
          f"= {n / seconds:,.0f} records/s (one core, cold caches)")
    for key in ("context_recall/rouge_sentence", "context_recall/rouge_chunk", "ndcg/ndcg_at_10", "rougeL", "token_f1"):
        print(f"  {key:32s} {values[key]:.6f}")
    print(f"  skipped: {len(skipped)} (no label, no latency_s in this workload)")

    print("\nmatchers (context precision and recall of every record):")
    sub = records[: args.baseline]
    for name in ("rouge_sentence", "rouge_chunk"):
        clear_caches()
        t0 = time.perf_counter()
        ours(records, name)
        t_all = time.perf_counter() - t0
        clear_caches()
        t0 = time.perf_counter()
        fast = ours(sub, name)
        t_sub = time.perf_counter() - t0
        t0 = time.perf_counter()
        slow = plain_rouge_score(sub, name)
        t_plain = time.perf_counter() - t0
        same = fast == slow
        print(f"  {name:15s} ragexp {n / t_all:10,.0f} rec/s on all {n} | on the first {len(sub)}: ragexp "
              f"{len(sub) / t_sub:8,.0f} rec/s, plain rouge-score {len(sub) / t_plain:6,.1f} rec/s, "
              f"ratio {t_plain / t_sub:5.0f}x | identical values: {same}")
        if not same:
            return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
