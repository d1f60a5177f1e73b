"""Tonic Validate's Paul Graham example: ``dataset=tonic_qa_pairs`` (qa_pairs.json, the essays as
corpus) and ``dataset=tonic_run`` (one system's CSV run). Both give a question the digest of its
text as id, so a run lines up with the qa pairs. Definitions: docs/datasets.md, "How each adapter
reads its source".
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, read_frame, read_json, require_columns, text_id


def _qa_pairs(p: Path) -> list[dict[str, Any]]:
    items = read_json(p)
    if not isinstance(items, list):
        raise DataError(f"expected a JSON list of {{essay, question, answer, quote}} objects, got {type(items).__name__}",
                        path=str(p))
    for row, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise DataError(f"expected an object with essay, question, answer and quote, got {type(item).__name__}",
                            path=str(p), row=row)
    return items


def _essays(folder: str | Path) -> dict[str, str]:
    d = existing(folder, "essays folder", directory=True)
    corpus = {}
    for f in sorted(d.iterdir()):
        if f.is_file() and not f.name.startswith("."):
            try:
                corpus[f.name] = f.read_text(encoding="utf-8")
            except UnicodeDecodeError as exc:
                raise DataError(f"unreadable essay: not UTF-8 text ({exc.reason})", path=str(f)) from None
    if not corpus:
        raise DataError("the essays folder holds no files: expected one text file per essay", path=str(d))
    return corpus


def _qa_raw(item: dict[str, Any]) -> dict[str, Any]:
    question = item.get("question")
    essay = item.get("essay")
    return {
        "id": text_id(question) if isinstance(question, str) else None,
        "query": question,
        "reference_answers": item.get("answer"),
        "gt_contexts": [item["quote"]] if item.get("quote") is not None else None,
        "gt_context_ids": [essay] if essay is not None else None,
    }


def load_tonic_qa_pairs(path: str, *, essays: str | None = None, name: str = "tonic_qa_pairs",
                        limit: int | None = None, label: bool | None = None) -> Dataset:
    """``essays`` defaults to the ``essays/`` folder beside ``qa_pairs.json``; ``essays: false`` reads no corpus."""
    p = existing(path)
    items = _qa_pairs(p)
    corpus = None
    if essays is not False:
        corpus = _essays(essays if essays else p.parent / "essays")
    return build(name, p, ((row, _qa_raw(item)) for row, item in enumerate(items, start=1)),
                 limit=limit, label=label, corpus=corpus)


def _number(cell: Any) -> Any:
    """Tonic's stored score, read as the text of a CSV cell, as a float (the text itself if it is not a number)."""
    try:
        return float(cell) if isinstance(cell, str) else cell
    except ValueError:
        return cell


RUN_COLUMNS = ("reference_question", "reference_answer", "llm_answer", "llm_context")


def load_tonic_run(path: str, *, qa_pairs: str | None = None, essays: str | None = None, name: str = "tonic_run",
                   limit: int | None = None, label: bool | None = None) -> Dataset:
    """One Tonic Validate run CSV; ``qa_pairs`` (a path) adds the gold passages, ``essays`` the corpus."""
    p = existing(path)
    frame = read_frame(p, "csv")
    require_columns(frame, RUN_COLUMNS, p, "a Tonic Validate run")
    gold: dict[str, dict[str, Any]] = {}
    if qa_pairs:
        qp = existing(qa_pairs, "qa_pairs file")
        for item in _qa_pairs(qp):
            if isinstance(item.get("question"), str):
                gold[item["question"].strip()] = _qa_raw(item)
    corpus = _essays(essays) if essays else None

    # a vendor that does not expose its contexts writes [] in every row: not recorded, not "nothing retrieved"
    recorded = not all(isinstance(c, str) and c.replace(" ", "") == "[]" for c in frame["llm_context"])

    def rows():
        for row, item in enumerate(frame.to_dict("records"), start=1):
            question = item.get("reference_question")
            contexts = item.get("llm_context")
            if isinstance(contexts, str):
                try:
                    contexts = json.loads(contexts)
                except json.JSONDecodeError as exc:
                    raise DataError(f"expected a JSON list of passages, got text that is not JSON ({exc.msg})",
                                    path=str(p), row=row, field="llm_context") from None
            raw: dict[str, Any] = {
                "id": text_id(question) if isinstance(question, str) else None,
                "query": question,
                "reference_answers": item.get("reference_answer"),
                "answer": item.get("llm_answer"),
                "contexts": contexts if recorded else None,
                "answer_similarity": _number(item.get("answer_similarity")),
            }
            match = gold.get(question.strip()) if isinstance(question, str) else None
            if match:
                raw["gt_contexts"] = match["gt_contexts"]
                raw["gt_context_ids"] = match["gt_context_ids"]
            yield row, raw

    return build(name, p, rows(), limit=limit, label=label, corpus=corpus,
                 matched_qa_pairs=len(gold) > 0)
