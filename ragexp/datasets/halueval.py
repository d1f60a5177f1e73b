"""``dataset=halueval``: HaluEval's QA file, JSON lines of ``{knowledge, question, right_answer,
hallucinated_answer}``. Each item becomes two labelled records, ``<line>-right`` and
``<line>-hallucinated``; ``knowledge`` (the gold passage) fills both ``gt_contexts`` and
``contexts``, as if a retriever had returned exactly the gold passage.

The record's ``label`` (docs/records.md#fields) asks "is the reference (ground truth) correct?". In seed ``004_…`` the
generated answers are right and some references are deliberately wrong, so the label is, in
effect, "should this answer be judged as agreeing with the reference?" — that is what the
confusion metrics (``accuracy``, ``precision``, ``recall``, ``f1``) compare a metric's verdict with.
HaluEval gives one right and one hallucinated answer per question, and ``role`` says where the
candidate goes:

- ``role: answer`` (default): the candidate is the ``answer`` and ``reference_answers`` is the
  right answer; ``label`` is true for the right candidate, false for the hallucinated one. The
  reference is always correct here, so the label stands for the same thing as in seed 004's
  confusion matrix (answer and reference should agree), and answer-side metrics
  (``answer_consistency``, overlap with ``contexts``) get a real hallucination to find.
- ``role: reference``: seed 004's own set-up, word for word — the ``answer`` is always the right
  answer and the candidate becomes the reference, so ``label`` literally says whether the
  reference is correct.

Human labels (docs/judge-trust.md): with ``role: answer``, the right candidate has
``human: {answer_consistency_binary: 1, answer_similarity: 5}`` and the hallucinated one ``{0, 0}``
(the hallucination is not supported by the knowledge, and does not say what the right answer says);
with ``role: reference`` the answer is always the right one, so ``answer_consistency_binary`` is 1 for
both and ``answer_similarity`` (answer against the candidate reference) is 5 or 0 as the label.
``split``, ``split_fraction``, ``split_seed``: :mod:`ragexp.datasets.split`.

Rows in errors are line numbers.
"""

from __future__ import annotations

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, iter_jsonl

ROLES = ("answer", "reference")


def load_halueval(path: str, *, role: str = "answer", name: str = "halueval", limit: int | None = None, split: str = "all", split_fraction: float = 0.5, split_seed: int = 0) -> Dataset:
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

    return build(name, p, rows(), limit=limit, role=role, split=(split, split_fraction, split_seed))
