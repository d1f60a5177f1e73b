"""Judge metrics under SPEC §3's rule: an empty output of the system under test is a miss.

``contexts: []`` (nothing retrieved) and ``answer: ""`` are scored — 0 where no verdict could
change the value, decided without asking the judge — an empty ground truth (or an answer without
a main point) is ``undefined``, and only an absent field is ``missing_field``. Every case runs the
whole litellm path against the real local server of tests/judge_server.py, which counts the
requests it receives.
"""

from __future__ import annotations

import pytest

from ragexp.judge import build_judge
from ragexp.metrics.base import mean_ok
from ragexp.common.records import Record

from judge_server import blocks, judge_specs

CONTEXTS = ["Paris is the capital of France.", "Bananas are yellow fruit."]
REFERENCES = ["The capital of France is Paris."]
ANSWER = "Paris is the capital of France."




@pytest.fixture
def score(server, tmp_path):
    """score(records, *metric names, **options) → {key: [Score]}, with no cache: every verdict is a request."""

    def _score(records, *names, **options):
        s = judge_specs(*names, **options)
        judge = build_judge(dict(name="test", model="openai/gpt-4o-mini", api_base=server.url, api_key_env=None,
                                 cache=False, timeout_s=5.0, max_retries=1, backoff_s=0.01, max_backoff_s=0.05,
                                 max_concurrency=8, max_tokens=64), s)
        scores, _ = judge.score(records, s)
        return scores

    return _score


def rec(**fields) -> Record:
    return Record(id=fields.pop("id", "1"), query=fields.pop("query", "What is the capital of France?"), **fields)


def values(scores, i=0):
    return {k: (per[i].value, per[i].status) for k, per in scores.items()}


def test_nothing_retrieved_is_zero_without_asking(server, score):
    scores = score([rec(contexts=[], answer=ANSWER)], "retrieval_precision", "augmentation_accuracy",
                   "augmentation_precision", "answer_consistency_binary")
    assert values(scores) == {"retrieval_precision": (0.0, "ok"), "augmentation_accuracy": (0.0, "ok"),
                              "augmentation_precision": (0.0, "ok"), "answer_consistency_binary": (0.0, "ok")}
    assert server.calls == 0


def test_nothing_retrieved_answer_consistency_asks_only_for_the_main_points(server, score):
    scores = score([rec(contexts=[], answer="Paris is the capital. It is large.")], "answer_consistency")
    assert values(scores) == {"answer_consistency": (0 / 2, "ok")}  # two points, none derivable from nothing
    assert server.tasks() == {"points": 1}  # no support verdict asked


def test_an_answer_without_a_main_point_is_undefined_even_with_nothing_retrieved(server, score):
    # "?" holds no keyword: the scripted judge finds no main point in it
    scores = score([rec(contexts=[], answer="?"), rec(id="2", contexts=CONTEXTS, answer="?")], "answer_consistency")
    assert [(s.value, s.status) for s in scores["answer_consistency"]] == [(None, "undefined")] * 2
    assert "no main point" in scores["answer_consistency"][0].detail
    assert server.tasks() == {"points": 1}  # the same answer's points: asked once, shared


def test_an_empty_passage_among_others_is_relevant_to_nothing_and_counts(server, score):
    scores = score([rec(contexts=[CONTEXTS[0], ""], answer=ANSWER)], "retrieval_precision", "augmentation_accuracy")
    assert values(scores) == {"retrieval_precision": (1 / 2, "ok"), "augmentation_accuracy": (1 / 2, "ok")}
    assert server.tasks() == {"relevance": 1, "usage": 1}  # the empty passage is not asked about


@pytest.mark.parametrize("empty", ["", "   \n"])
def test_empty_answer_is_a_miss_without_asking(server, score, empty):
    scores = score([rec(contexts=CONTEXTS, answer=empty, reference_answers=REFERENCES)], "answer_similarity",
                   "augmentation_accuracy", "augmentation_precision", "answer_consistency", "answer_consistency_binary")
    assert values(scores) == {
        "answer_similarity": (0.0, "ok"),  # 0 on the 0-5 scale against every reference
        "augmentation_accuracy": (0.0, "ok"),  # it uses no passage
        "augmentation_precision": (0.0, "ok"),
        "answer_consistency": (None, "undefined"),  # no main point to check
        "answer_consistency_binary": (None, "undefined"),  # nothing to attribute
    }
    assert server.calls == 0


def test_empty_answer_questeval_asks_only_about_the_reference(server, score):
    records = [rec(answer="", reference_answers=REFERENCES)]
    scores = score(records, "questeval_recall", "questeval_precision")
    assert values(scores) == {"questeval_recall": (0.0, "ok"), "questeval_precision": (None, "undefined")}
    assert "no question is answered by both" in scores["questeval_precision"][0].detail
    # the questions and the reference's own answers, never a request quoting the empty answer
    assert server.tasks() == {"questions": 1, "answers": 1}
    answered = [blocks(r.first_user) for r in server.log if r.task == "answers"]
    assert [b["text"] for b in answered] == [REFERENCES]


def test_empty_answer_questeval_precision_honours_zero_division(server, score):
    scores = score([rec(answer="", reference_answers=REFERENCES)], "questeval_precision",
                   questeval_precision={"zero_division": 0.0})
    assert values(scores) == {"questeval_precision": (0.0, "ok")}


def test_empty_references_are_undefined_without_asking(server, score):
    for refs in ([], ["", "  "]):
        scores = score([rec(contexts=CONTEXTS, answer=ANSWER, reference_answers=refs)],
                       "answer_similarity", "questeval_recall", "questeval_precision")
        assert {k: v[1] for k, v in values(scores).items()} == dict.fromkeys(scores, "undefined")
        assert scores["answer_similarity"][0].detail == "no reference answer (empty ground truth)"
    assert server.calls == 0


def test_empty_references_win_over_an_empty_answer(server, score):
    scores = score([rec(answer="", reference_answers=[])], "answer_similarity", "questeval_recall")
    assert values(scores) == {"answer_similarity": (None, "undefined"), "questeval_recall": (None, "undefined")}
    assert server.calls == 0


def test_absent_fields_are_missing_without_asking(server, score):
    names = ("answer_similarity", "retrieval_precision", "augmentation_accuracy", "augmentation_precision",
             "answer_consistency", "answer_consistency_binary", "questeval_recall", "questeval_precision")
    scores = score([rec()], *names)  # a query and nothing else
    assert values(scores) == dict.fromkeys(names, (None, "missing_field"))
    assert scores["retrieval_precision"][0].detail == "absent contexts"
    assert scores["answer_similarity"][0].detail == "absent answer, reference_answers"
    assert server.calls == 0


def test_a_retriever_that_finds_nothing_pulls_the_mean_down(server, score):
    # the case: nothing retrieved must count, never leave the mean looking better
    records = [rec(id="found", contexts=CONTEXTS, answer=ANSWER), rec(id="nothing", contexts=[], answer=ANSWER)]
    scores = score(records, "retrieval_precision", "answer_consistency")
    assert [s.status for per in scores.values() for s in per] == ["ok"] * 4
    assert mean_ok(scores["retrieval_precision"]) == (1 / 2 + 0) / 2
    assert mean_ok(scores["answer_consistency"]) == (1 + 0) / 2


def test_overall_score_counts_the_zeros_and_an_undefined_part_makes_it_undefined(server, score):
    records = [rec(id="nothing", contexts=[], answer=ANSWER, reference_answers=REFERENCES),
               rec(id="no-point", contexts=CONTEXTS, answer="?", reference_answers=REFERENCES)]
    scores = score(records, "answer_similarity", "retrieval_precision", "answer_consistency", "overall_score")
    nothing, no_point = (values(scores, i) for i in (0, 1))
    assert nothing["answer_similarity"] == (5.0, "ok")  # the answer says what the reference says
    assert nothing["overall_score"] == ((5 / 5 + 0 + 0) / 3, "ok")
    assert no_point["answer_consistency"] == (None, "undefined")
    assert no_point["overall_score"] == (None, "undefined")
    assert scores["overall_score"][1].detail.startswith("answer_consistency: ")



def test_overall_score_without_a_part_is_undefined_not_missing(server, score):
    # metric=full on a dataset that feeds none of the parts keeps overall_score: every sample says why
    scores = score([rec(answer=ANSWER, reference_answers=REFERENCES)], "overall_score", "questeval_recall")
    assert scores["overall_score"][0].status == "undefined"
    assert "no answer_similarity" in scores["overall_score"][0].detail
