"""``dataset=expertqa``: ExpertQA's expert-labelled claims, one record per claim (the claim is the
``answer``, its evidence the ``contexts``), the experts' ``support`` and ``correctness`` as human labels.
Definitions and the label mapping: docs/datasets.md ("Datasets with people's labels", "How each
adapter reads its source"). Rows in errors are line numbers.
"""

from __future__ import annotations

from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, iter_jsonl
from ragexp.datasets.split import split_of

SUPPORT = {"Complete": (1, 1.0), "Partial": (0, 0.5), "Incomplete": (0, 0.5), "Missing": (0, 0.0)}
CORRECTNESS = {"Definitely correct": 4, "Probably correct": 3, "Likely incorrect": 1, "Definitely incorrect": 0}


def load_expertqa(path: str, *, name: str = "expertqa", require_evidence: bool = True, limit: int | None = None,
                  **split) -> Dataset:
    p = existing(path)

    def rows():
        for row, item in iter_jsonl(p):
            if not isinstance(item, dict) or not isinstance(item.get("answers"), dict):
                raise DataError("expected an object with 'question' and 'answers' per line", path=str(p), row=row)
            field = (item.get("metadata") or {}).get("field")
            for system, answer in item["answers"].items():
                for i, claim in enumerate((answer or {}).get("claims") or [], start=1):
                    where = f"answers.{system}.claims[{i}]"
                    if not isinstance(claim, dict) or not isinstance(claim.get("claim_string"), str):
                        raise DataError("expected a claim object with a 'claim_string'", path=str(p), row=row,
                                        field=where)
                    evidence = [e for e in claim.get("evidence") or [] if isinstance(e, str) and e.strip()]
                    if require_evidence and not evidence:
                        continue
                    support, correctness = claim.get("support"), claim.get("correctness")
                    human: dict[str, float] = {}
                    if support in SUPPORT:
                        human["answer_consistency_binary"], human["answer_consistency"] = SUPPORT[support]
                    if correctness in CORRECTNESS:
                        human["correctness"] = CORRECTNESS[correctness]
                    yield row, {"id": f"{row}-{system}-{i}", "query": item.get("question"),
                                "answer": claim["claim_string"], "contexts": evidence, "human": human or None,
                                "question_id": str(row), "system": system, "field": field,
                                "support": support, "correctness": correctness}

    return build(name, p, rows(), limit=limit, split=split_of(split))
