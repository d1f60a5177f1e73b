"""A real retrieval run for the metric tests: BM25 (bm25s) over the SQuAD v2 paragraphs.

Each answerable question becomes a record with its top-10 paragraphs (texts and ids, in rank
order, with BM25 scores), the gold paragraph as ground truth, and as *graded* relevant ids the
gold paragraph plus every other paragraph that contains one of the answer strings — so a query
often has several relevant items, which exercises MAP, nDCG and recall properly.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=4)
def squad_bm25_run(data_dir: str, n: int, k: int = 10) -> tuple[dict, ...]:
    import bm25s

    d = json.loads((Path(data_dir) / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    ids, texts, questions = [], [], []
    for ai, article in enumerate(d["data"]):
        for pi, para in enumerate(article["paragraphs"]):
            pid = f"a{ai}p{pi}"
            ids.append(pid)
            texts.append(para["context"])
            for qa in para["qas"]:
                answers = [a["text"] for a in qa["answers"]]
                if answers:
                    questions.append((qa["id"], qa["question"], pid, answers))
    questions = questions[:n]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
    docs, scores = retriever.retrieve(bm25s.tokenize([q[1] for q in questions], show_progress=False),
                                      k=k, show_progress=False, n_threads=1)
    out = []
    for (qid, question, gold, answers), row, srow in zip(questions, docs, scores):
        ranked = [int(i) for i in row]
        relevant = [gold] + [ids[i] for i in range(len(texts))
                             if ids[i] != gold and any(a in texts[i] for a in answers)]
        out.append({
            "id": qid, "query": question,
            "contexts": [texts[i] for i in ranked], "context_ids": [ids[i] for i in ranked],
            "scores": [float(s) for s in srow],
            "gt_contexts": [texts[ids.index(gold)]], "gt_context_ids": [gold],
            "relevant_ids": relevant, "reference_answers": answers,
        })
    return tuple(out)
