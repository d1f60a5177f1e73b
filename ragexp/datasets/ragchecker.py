"""``dataset=ragchecker``: RAGChecker's JSON, ``{"results": [{query_id, query, gt_answer, response,
retrieved_context: [{doc_id, text}]}]}`` — both its input file and its output file (which adds
claims and per-query ``metrics``, kept in ``extra['ragchecker_metrics']``).

``query_id`` → ``id``, ``gt_answer`` → ``reference_answers``, ``response`` → ``answer``, the
``text``s of ``retrieved_context`` → ``contexts`` and their ``doc_id``s → ``context_ids``.
An error's ``row`` is the position (1-based) in ``results``.
"""

from __future__ import annotations

from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, read_json


def load_ragchecker(path: str, *, name: str = "ragchecker", limit: int | None = None,
                    label: bool | None = None) -> Dataset:
    p = existing(path)
    doc = read_json(p)
    results = doc.get("results") if isinstance(doc, dict) else None
    if not isinstance(results, list):
        raise DataError(f"expected RAGChecker's JSON object with a 'results' list, got {type(doc).__name__}"
                        f"{' without results' if isinstance(doc, dict) else ''}", path=str(p))

    def rows():
        for row, item in enumerate(results, start=1):
            if not isinstance(item, dict):
                raise DataError(f"expected a result object, got {type(item).__name__}", path=str(p), row=row)
            passages = item.get("retrieved_context")
            contexts = ids = None
            if passages is not None:
                if not isinstance(passages, list) or not all(isinstance(x, dict) and isinstance(x.get("text"), str)
                                                            for x in passages):
                    raise DataError(f"expected a list of {{doc_id, text}} objects, got {passages!r:.60}",
                                    path=str(p), row=row, field="retrieved_context")
                contexts = [x["text"] for x in passages]
                ids = [str(x.get("doc_id", i)) for i, x in enumerate(passages)]
            raw: dict[str, Any] = {
                "id": item.get("query_id"), "query": item.get("query"),
                "reference_answers": item.get("gt_answer"), "answer": item.get("response"),
                "contexts": contexts, "context_ids": ids,
            }
            if isinstance(item.get("metrics"), dict):
                raw["ragchecker_metrics"] = item["metrics"]
            yield row, raw

    return build(name, p, rows(), limit=limit, label=label)
