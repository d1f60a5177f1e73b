"""continuous-eval's JSONL samples: one adapter for both of its files, keyed by column name.

Columns → fields: ``question`` → ``query``, ``retrieved_contexts`` → ``contexts``,
``ground_truth_contexts`` → ``gt_contexts``, ``answer`` → ``answer``, ``ground_truths`` →
``reference_answers``, and ``annotation`` → ``label`` through the ``labels`` map. Other
columns (``dataset``, ``model``, the raw ``annotation``) stay in ``extra``.

Two config options read the two shipped files: ``dataset=continuous_eval`` (retrieval_sm.jsonl:
retrieved and ground-truth contexts, answers, references) and
``dataset=continuous_eval_correctness`` (correctness_sm.jsonl: answers a human marked
``correct``, ``incorrect`` or ``refuse-to-answer``).

What the label means here: the annotation says whether the *answer* is right with respect to
the ground truths. The references are taken as correct, so the label plays the part seed
``004_…``'s label plays in its confusion matrix — "should this answer be judged as agreeing
with the reference?" — and a refusal counts as not agreeing (``refuse-to-answer: false``).
An annotation missing from ``labels`` is an error naming the row. The same verdict is the human
label of ``answer_similarity`` (docs/judge-trust.md): 5 when the label is true (the answer says what
the ground truth says), 0 when false. ``split``, ``split_fraction``, ``split_seed``:
:mod:`ragexp.datasets.split`.
"""

from __future__ import annotations

from typing import Any

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, iter_jsonl

COLUMNS = {"question": "query", "retrieved_contexts": "contexts", "ground_truth_contexts": "gt_contexts",
           "answer": "answer", "ground_truths": "reference_answers"}
DEFAULT_LABELS = {"correct": True, "incorrect": False, "refuse-to-answer": False}


def load_continuous_eval(path: str, *, name: str = "continuous_eval", limit: int | None = None,
                         labels: dict[str, bool] | None = None, label: bool | None = None, split: str = "all", split_fraction: float = 0.5, split_seed: int = 0) -> Dataset:
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

    return build(name, p, rows(), limit=limit, label=label, split=(split, split_fraction, split_seed))
