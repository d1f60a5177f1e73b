"""``dataset=demo`` — the dataset ``python -m ragexp`` runs with no arguments, shipped in the package.

Written for ragexp (original text), in four JSONL files beside this module:

- ``corpus.jsonl``: 47 short passages ``{id, title, text, lang}`` on honeybees, lighthouses,
  sourdough bread, the Moon, bicycles, and — in Chinese — tea and giant pandas;
- ``questions.jsonl``: 50 questions ``{id, query, gt_context_ids, reference_answers, label,
  lang}``, 6 of them Chinese. ``label`` is the human label of docs/records.md#fields: 45 references are
  correct, 5 (``q07``, ``q17``, ``q25``, ``q36``, ``q50``) are deliberately wrong;
- ``strong.jsonl`` / ``weak.jsonl``: what two RAG systems produced for every question —
  ``{id, context_ids, answer, latency_s, timings}``. ``strong`` retrieves four passages with a
  reranker, nearly always puts the gold passage first and answers correctly; ``weak`` retrieves
  three without one, often misses the gold passage and answers vaguely or wrongly, but faster.

Each record gets ``gt_contexts`` and ``contexts`` as the corpus texts of its ids, and the
Dataset's ``corpus`` is the whole passage collection, so a retriever can run on it too.
``system: null`` gives the questions alone (for a pipeline to answer).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, iter_jsonl

HERE = Path(__file__).resolve().parent
SYSTEMS = ("strong", "weak")


def _load_corpus(folder: Path) -> dict[str, str]:
    corpus: dict[str, str] = {}
    path = folder / "corpus.jsonl"
    for row, item in iter_jsonl(path):
        if not isinstance(item, dict) or not isinstance(item.get("id"), str) or not isinstance(item.get("text"), str):
            raise DataError("expected an object with string 'id' and 'text'", path=str(path), row=row)
        corpus[item["id"]] = item["text"]
    return corpus


def _texts(ids: Any, corpus: dict[str, str], path: Path, row: int, field: str) -> list[str] | None:
    if ids is None:
        return None
    if not isinstance(ids, list):
        raise DataError(f"expected a list of passage ids, got {type(ids).__name__}", path=str(path), row=row, field=field)
    for i in ids:
        if i not in corpus:
            raise DataError(f"passage id {i!r} is not in corpus.jsonl", path=str(path), row=row, field=field)
    return [corpus[i] for i in ids]


def load_demo(*, system: str | None = "strong", name: str = "demo", limit: int | None = None,
              path: str | None = None) -> Dataset:
    """The demo questions with ``system``'s contexts and answers; ``path`` reads another folder of the same files."""
    if system is not None and system not in SYSTEMS:
        raise DataError(f"dataset.system must be one of {', '.join(SYSTEMS)} or null, got {system!r}")
    folder = Path(path) if path else HERE
    corpus = _load_corpus(folder)
    questions_path = folder / "questions.jsonl"
    outputs: dict[str, tuple[int, dict[str, Any]]] = {}
    system_path = folder / f"{system}.jsonl" if system else None
    if system_path is not None:
        for row, item in iter_jsonl(system_path):
            if not isinstance(item, dict) or not isinstance(item.get("id"), str):
                raise DataError("expected an object with a string 'id'", path=str(system_path), row=row, field="id")
            outputs[item["id"]] = (row, item)

    def rows():
        for row, item in iter_jsonl(questions_path):
            if not isinstance(item, dict):
                raise DataError("expected an object per line", path=str(questions_path), row=row)
            raw = dict(item)
            raw["gt_contexts"] = _texts(item.get("gt_context_ids"), corpus, questions_path, row, "gt_context_ids")
            if system_path is not None:
                if item.get("id") not in outputs:
                    raise DataError(f"question {item.get('id')!r} has no output in {system_path.name}",
                                    path=str(questions_path), row=row, field="id")
                out_row, out = outputs[item["id"]]
                raw["contexts"] = _texts(out.get("context_ids"), corpus, system_path, out_row, "context_ids")
                raw.update({k: out[k] for k in ("context_ids", "answer", "latency_s", "timings") if k in out})
            yield row, raw

    return build(name, questions_path, rows(), limit=limit, corpus=corpus, system=system)
