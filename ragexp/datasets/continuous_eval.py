"""continuous-eval's JSONL samples: one adapter for ``dataset=continuous_eval`` and
``dataset=continuous_eval_correctness``, keyed by column name; ``labels`` maps the annotation to ``label``.
Definitions: docs/datasets.md, "How each adapter reads its source"; labels: docs/judge-trust.md.
"""

from __future__ import annotations

from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, iter_jsonl
from ragexp.datasets.split import split_of

COLUMNS = {"question": "query", "retrieved_contexts": "contexts", "ground_truth_contexts": "gt_contexts",
           "answer": "answer", "ground_truths": "reference_answers"}
DEFAULT_LABELS = {"correct": True, "incorrect": False, "refuse-to-answer": False}


def load_continuous_eval(path: str, *, name: str = "continuous_eval", limit: int | None = None,
                         labels: dict[str, bool] | None = None, label: bool | None = None, **split) -> Dataset:
    p = existing(path)
    labels = DEFAULT_LABELS if labels is None else dict(labels)

    def rows():
        for row, item in iter_jsonl(p):
            if not isinstance(item, dict):
                raise DataError(f"expected an object per line, got {type(item).__name__}", path=str(p), row=row)
            raw: dict[str, Any] = {"id": item.get("id", f"{p.stem}-{row}")}
            raw.update((COLUMNS.get(column, column), value) for column, value in item.items() if column != "id")
            annotation = item.get("annotation")
            if annotation is not None:
                if annotation not in labels:
                    raise DataError(f"unknown annotation {annotation!r}: expected one of "
                                    f"{', '.join(map(repr, labels))} (map it with dataset.labels)",
                                    path=str(p), row=row, field="annotation")
                raw["label"] = labels[annotation]
                raw["human"] = {"answer_similarity": 5 * int(bool(labels[annotation]))}
            yield row, raw

    return build(name, p, rows(), limit=limit, label=label, split=split_of(split))
