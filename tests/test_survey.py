"""What a run's Survey says of its records (workflow.steps.Survey): the same whether the records come as one chunk
(a run in memory) or chunk by chunk (a streamed run), and what it says of a field some records lack or leave empty."""

from __future__ import annotations

import random

from ragexp.common.records import FIELDS, Record, to_record
from ragexp.workflow.steps import Survey


def _state(s: Survey) -> tuple:
    return (s.n, s.fields(), list(s.shape.items()), list(s.human.items()), s.labelled, sorted(s.stages), s.depth,
            s.questions.hexdigest(), s.outputs.hexdigest(), s.answers.hexdigest(), s.dataset_shape())


def test_a_field_held_later_lacking_or_empty_is_told_as_record_by_record():
    rows = [{"id": "a", "query": "q1", "answer": ""},  # an empty answer: present, not held
            {"id": "b", "query": "q2", "answer": "yes", "contexts": ["p"], "human": {"correctness": 3}},
            {"id": "c", "query": "q3", "answer": "no", "contexts": [], "label": False, "timings": {"retrieve": 0.1}}]
    survey = Survey()
    survey([to_record(r, path="x", row=i) for i, r in enumerate(rows, start=1)])
    assert survey.fields() == ["id", "query", "contexts", "answer", "label", "timings", "human"]
    # [first truthy, first held, a record lacks it], fields in the order a record first held them
    assert list(survey.shape.items()) == [
        ("id", ["a", "a", False]), ("query", ["q1", "q1", False]),
        ("contexts", [["p"], ["p"], True]), ("answer", ["yes", "yes", True]), ("human", [{"correctness": 3.0},
                                                                                         {"correctness": 3.0}, True]),
        ("label", [None, False, True]), ("timings", [{"retrieve": 0.1}, {"retrieve": 0.1}, True])]
    assert survey.human == {"correctness": 2} and survey.labelled and survey.stages == {"retrieve"}
    assert survey.depth == 1 and survey.n == 3
    assert survey.dataset_shape() == {"rows": 3, "kinds": {"id": ["", ""], "query": ["", ""]}}


def test_chunked_or_whole_the_survey_is_the_same():
    rng = random.Random(7)

    def value(f: str):
        if rng.random() < 0.35:
            return None
        return {"label": rng.choice([True, False]), "latency_s": rng.choice([0.0, 1.5]),
                "timings": rng.choice([{}, {"retrieve": 0.1}, {"generate": 0.2, "total": 1.0}]),
                "human": rng.choice([{}, {"a": 1.0}, {"b": 0.0, "a": 2.0}])}.get(
            f, rng.choice(["", "x", "yy"]) if f in ("answer", "category") else rng.choice([[], ["a"], ["a", "b"], [""]]))

    for _ in range(300):
        share = rng.random()
        records = [Record(**{**{f: value(f) if rng.random() < share else None for f in FIELDS},
                             "id": f"r{i}", "query": "q"}) for i in range(rng.randint(1, 12))]
        whole = Survey()
        whole(records)
        size = rng.randint(1, 5)
        chunked = Survey(size)
        for i in range(0, len(records), size):
            chunked(records[i:i + size])
        assert _state(chunked) == _state(whole)
