"""``dataset=halueval``: HaluEval's QA file, two labelled records per item (right and hallucinated),
``role`` placing the candidate as the answer or the reference; human labels as the label says.
Definitions: docs/datasets.md, "How each adapter reads its source"; labels: docs/judge-trust.md.
"""

from __future__ import annotations

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, iter_jsonl
from ragexp.datasets.split import split_of

ROLES = ("answer", "reference")


def load_halueval(path: str, *, role: str = "answer", name: str = "halueval", limit: int | None = None, **split) -> Dataset:
    if role not in ROLES:
        raise DataError(f"dataset.role must be one of {', '.join(ROLES)}, got {role!r}")
    p = existing(path)

    def rows():
        for row, item in iter_jsonl(p):
            if not isinstance(item, dict):
                raise DataError(f"expected an object per line, got {type(item).__name__}", path=str(p), row=row)
            for key in ("knowledge", "question", "right_answer", "hallucinated_answer"):
                if not isinstance(item.get(key), str):
                    raise DataError(f"expected a string, got {type(item.get(key)).__name__}",
                                    path=str(p), row=row, field=key)
            right, wrong = item["right_answer"], item["hallucinated_answer"]
            for kind, candidate, label in (("right", right, True), ("hallucinated", wrong, False)):
                answer, reference = (candidate, right) if role == "answer" else (right, candidate)
                yield row, {
                    "id": f"{row}-{kind}", "query": item["question"],
                    "contexts": [item["knowledge"]], "gt_contexts": [item["knowledge"]],
                    "answer": answer, "reference_answers": [reference], "label": label,
                    "candidate": kind, "human": {"answer_consistency_binary": int(label or role == "reference"),
                                                 "answer_similarity": 5 * int(label)},
                }

    return build(name, p, rows(), limit=limit, role=role, split=split_of(split))
