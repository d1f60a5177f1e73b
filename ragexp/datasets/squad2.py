"""``dataset=squad2``: the SQuAD 2.0 JSON (``{"data": [{"title", "paragraphs": [{"context", "qas"}]}]}``).

One record per question:

- ``id``: the question's own SQuAD id;
- ``reference_answers``: the distinct answer texts, in the order the annotators gave them;
- ``gt_contexts`` / ``gt_context_ids``: the paragraph the question was written on, whose id is
  ``<article index>-<paragraph index>`` (both 0-based, in file order: ``0-0`` is the first
  paragraph of the first article);
- no ``contexts`` or ``answer``: those come from a retriever and generator
  (``retriever=… generator=…``), which search :attr:`Dataset.corpus` — every paragraph of
  the file, id → text.

Unanswerable questions (``is_impossible``) are left out unless ``answerable_only: false``; they
then have no ``reference_answers`` and keep SQuAD's ``plausible_answers`` in ``extra``.
An error's ``row`` is the question's position in the file (1-based, all questions counted).
"""

from __future__ import annotations

from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, read_json


def load_squad2(path: str, *, name: str = "squad2", limit: int | None = None, answerable_only: bool = True,
                label: bool | None = None) -> Dataset:
    p = existing(path)
    doc = read_json(p)
    if not isinstance(doc, dict) or not isinstance(doc.get("data"), list):
        raise DataError("expected SQuAD's JSON object with a 'data' list of articles, "
                        f"got {type(doc).__name__}{' without data' if isinstance(doc, dict) else ''}", path=str(p))
    corpus: dict[str, str] = {}
    items: list[tuple[int, dict[str, Any]]] = []
    row = 0  # questions counted in file order, answerable or not, so an error's row finds the question
    for a, article in enumerate(doc["data"]):
        paragraphs = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paragraphs, list):
            raise DataError(f"article {a} (0-based): expected a 'paragraphs' list, got {type(paragraphs).__name__}",
                            path=str(p), field="paragraphs")
        for i, para in enumerate(paragraphs):
            pid = f"{a}-{i}"  # <article index>-<paragraph index>
            context = para.get("context") if isinstance(para, dict) else None
            if not isinstance(context, str):
                raise DataError(f"paragraph {pid}: expected a string, got {type(context).__name__}",
                                path=str(p), field="context")
            corpus[pid] = context
            for qa in para.get("qas") or []:
                row += 1
                if not isinstance(qa, dict):
                    raise DataError(f"expected a question object, got {type(qa).__name__}", path=str(p), row=row)
                impossible = bool(qa.get("is_impossible", False))
                if impossible and answerable_only:
                    continue
                answers: list[str] = []
                for ans in qa.get("answers") or []:
                    text = ans.get("text") if isinstance(ans, dict) else None
                    if not isinstance(text, str):
                        raise DataError(f"expected answers as objects with a 'text' string, got {ans!r:.60}",
                                        path=str(p), row=row, field="answers")
                    if text not in answers:
                        answers.append(text)
                raw: dict[str, Any] = {
                    "id": qa.get("id"), "query": qa.get("question"),
                    "gt_contexts": [context], "gt_context_ids": [pid],
                    "reference_answers": answers or None,
                    "title": article.get("title"),
                }
                if impossible:
                    raw["is_impossible"] = True
                    raw["plausible_answers"] = [x.get("text") for x in qa.get("plausible_answers") or []
                                                if isinstance(x, dict)]
                items.append((row, raw))
    return build(name, p, items, limit=limit, label=label, corpus=corpus,
                 answerable_only=answerable_only)
