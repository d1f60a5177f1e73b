"""The JSON of seed ``004_…``: a list of {query, context, generated_answer, reference_answer}.

The source carries no per-sample label: the file itself is the label (every reference in
``evaluation_samples_true.json`` is correct, every one in ``_false`` deliberately wrong), so
the config sets ``label`` for all rows. The answers are right in both files, so the label is also
the human label of ``answer_similarity`` (answer against reference; docs/judge-trust.md): 5 in
``_true``, 0 in ``_false``. The seed describes contexts from a RAG store and a short- and long-term memory, but its
files do not say which context came from where (their texts only talk about memory): an item's own
``context_sources`` list (one label per context) is read when it has one, never guessed. ``split``, ``split_fraction``, ``split_seed``: :mod:`ragexp.datasets.split`.
"""

from __future__ import annotations

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, read_json
from ragexp.datasets.split import split_of


def load_memory_eval(path: str, *, name: str = "memory_eval", limit: int | None = None,
                     label: bool | None = None, **split) -> Dataset:
    p = existing(path)
    items = read_json(p)
    if not isinstance(items, list):
        raise DataError(f"expected a JSON list of samples, got {type(items).__name__}", path=str(p))

    def rows():
        for row, item in enumerate(items, start=1):
            if not isinstance(item, dict):
                raise DataError(f"expected an object with query/context/generated_answer/reference_answer, got {type(item).__name__}",
                                path=str(p), row=row)
            yield row, {
                "id": item.get("id", f"{p.stem}-{row}"),
                "query": item.get("query"),
                "contexts": item.get("context"),
                "answer": item.get("generated_answer"),
                "reference_answers": item.get("reference_answer"),
                "label": item.get("label"),
                "latency_s": item.get("latency_s"),
                "context_sources": item.get("context_sources"),
                "human": item.get("human", None if (lab := item.get("label", label)) is None
                                  else {"answer_similarity": 5 * int(bool(lab))}),
            }

    return build(name, p, rows(), limit=limit, label=label, split=split_of(split))
