"""AutoRAG's parquet files: a QA table, its corpus, and optionally a pipeline's result table.
Definitions (``retrieval_gt`` flattened into ``gt_context_ids``, the ``retrieval`` suffix, kept
columns): docs/datasets.md, "How each adapter reads its source". Error rows are 1-based table rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, plain, read_frame, require_columns

QA_COLUMNS = ("qid", "query", "generation_gt", "retrieval_gt")
METRIC_COLUMNS = ("retrieval_f1", "retrieval_recall", "retrieval_precision", "bleu", "meteor", "rouge",
                  "sem_score", "g_eval", "bert_score")


def _flatten(groups: Any, p: Path, row: int) -> list[str]:
    groups = plain(groups)
    if groups is None:
        return []
    if not isinstance(groups, list) or not all(isinstance(g, list) for g in groups):
        raise DataError(f"expected a list of lists of doc ids, got {type(groups).__name__} {groups!r:.60}",
                        path=str(p), row=row, field="retrieval_gt")
    out: list[str] = []
    for group in groups:
        for doc in group:
            if not isinstance(doc, str):
                raise DataError(f"expected doc ids as strings, got {type(doc).__name__} {doc!r:.40}",
                                path=str(p), row=row, field="retrieval_gt")
            if doc not in out:
                out.append(doc)
    return out


def _retrieval_columns(frame, retrieval: str | None, p: Path) -> tuple[str, str]:
    if retrieval:
        ids, contents = f"retrieved_ids_{retrieval}", f"retrieved_contents_{retrieval}"
        require_columns(frame, (ids, contents), p, f"AutoRAG's result table of retrieval module '{retrieval}'")
        return ids, contents
    if "retrieved_ids" in frame.columns:
        require_columns(frame, ("retrieved_ids", "retrieved_contents"), p, "AutoRAG's result table")
        return "retrieved_ids", "retrieved_contents"
    suffixes = [c[len("retrieved_ids_"):] for c in frame.columns if str(c).startswith("retrieved_ids_")]
    if len(suffixes) == 1:
        return _retrieval_columns(frame, suffixes[0], p)
    if not suffixes:
        raise DataError("expected AutoRAG's result table with retrieved_ids (or retrieved_ids_<module>) columns; "
                        f"the file has {', '.join(map(str, frame.columns))}", path=str(p))
    raise DataError(f"the result table holds several retrievals ({', '.join(suffixes)}): "
                    "choose one with dataset.retrieval=<name>", path=str(p))


def load_autorag(path: str, *, corpus: str | None = None, result: str | None = None, retrieval: str | None = None,
                 name: str = "autorag", limit: int | None = None, label: bool | None = None) -> Dataset:
    p = existing(path)
    qa = read_frame(p, "parquet")
    require_columns(qa, QA_COLUMNS, p, "AutoRAG's QA table")

    docs: dict[str, str] | None = None
    if corpus:
        cp = existing(corpus, "corpus file")
        table = read_frame(cp, "parquet")
        require_columns(table, ("doc_id", "contents"), cp, "AutoRAG's corpus table")
        docs = {}
        for row, (doc, text) in enumerate(zip(table["doc_id"], table["contents"]), start=1):
            if not isinstance(doc, str) or not isinstance(text, str):
                raise DataError(f"expected doc_id and contents as strings, got {type(doc).__name__} and "
                                f"{type(text).__name__}", path=str(cp), row=row)
            docs[doc] = text

    results: dict[str, dict[str, Any]] = {}
    rp = None
    if result:
        rp = existing(result, "result file")
        table = read_frame(rp, "parquet")
        require_columns(table, ("qid",), rp, "AutoRAG's result table")
        ids_col, contents_col = _retrieval_columns(table, retrieval, rp)
        for row, item in enumerate(table.to_dict("records"), start=1):
            out: dict[str, Any] = {"context_ids": plain(item[ids_col]), "contexts": plain(item[contents_col])}
            if "generated_texts" in item:
                out["answer"] = item["generated_texts"]
            for col in METRIC_COLUMNS:
                if col in item and item[col] is not None:
                    out[f"autorag/{col}"] = plain(item[col])
            results[str(item["qid"])] = out

    def rows():
        has_contents = "retrieval_gt_contents" in qa.columns
        for row, item in enumerate(qa.to_dict("records"), start=1):
            gt_ids = _flatten(item["retrieval_gt"], p, row)
            if docs is not None:
                absent = [d for d in gt_ids if d not in docs]
                if absent:
                    raise DataError(f"doc id {absent[0]!r} is not in the corpus ({corpus}); expected every "
                                    "retrieval_gt id to be a corpus doc_id", path=str(p), row=row, field="retrieval_gt")
                gt_texts = [docs[d] for d in gt_ids]
            elif has_contents:
                gt_texts = [t for group in plain(item["retrieval_gt_contents"]) or [] for t in group]
            else:
                gt_texts = None
            raw: dict[str, Any] = {
                "id": item["qid"], "query": item["query"],
                "reference_answers": plain(item["generation_gt"]),
                # an empty retrieval_gt is an empty ground truth (metrics: undefined), not an absent one
                "gt_context_ids": gt_ids, "gt_contexts": gt_texts,
                "retrieval_gt": plain(item["retrieval_gt"]),
            }
            if result:
                raw.update(results.get(str(item["qid"]), {}))
            yield row, raw

    ds = build(name, p, rows(), limit=limit, label=label, corpus=docs)
    if result:
        ds.info["result"] = str(rp)
        ds.info["results_matched"] = sum(r.id in results for r in ds.records)
    return ds
