"""Golden tests of the arithmetic on judge verdicts (SPEC §2.6, §2.7), no judge involved."""

from __future__ import annotations

import json
import math

import pytest

from ragexp.metrics.base import REGISTRY, load_all
from ragexp.metrics.judged.main_points import answer_consistency_value
from ragexp.metrics.judged.full_support import answer_consistency_binary_value
from ragexp.metrics.judged.similarity import answer_similarity_value
from ragexp.metrics.judged.usage import augmentation_accuracy_value
from ragexp.metrics.judged.relevant_usage import augmentation_precision_value
from ragexp.metrics.judged.overall import overall_value, scales
from ragexp.metrics.judged.questeval import answer_f1, is_unanswerable, questeval_values
from ragexp.metrics.judged.relevance import retrieval_precision_value
from ragexp.common.text import answer_tokens

JUDGE_METRICS = {"answer_similarity", "retrieval_precision", "augmentation_accuracy", "augmentation_precision",
                 "answer_consistency", "answer_consistency_binary", "overall_score", "questeval_recall",
                 "questeval_precision", "claim_faithfulness", "answer_correct"}


def test_every_judge_metric_is_registered_as_judge_with_a_config():
    from pathlib import Path

    load_all()
    registered = {name for name, info in REGISTRY.items() if info.judge}
    assert registered == JUDGE_METRICS
    conf = Path(__file__).resolve().parents[1] / "conf" / "metric"
    for name in JUDGE_METRICS:
        assert (conf / f"{name}.yaml").exists(), name
    assert REGISTRY["answer_similarity"].bounds == (0.0, 5.0)
    assert REGISTRY["retrieval_precision"].fields == ("query", "contexts")
    assert REGISTRY["augmentation_precision"].fields == ("query", "answer", "contexts")
    assert REGISTRY["questeval_recall"].fields == ("answer", "reference_answers")
    assert REGISTRY["overall_score"].fields == ()


def test_answer_consistency_one_of_two_points():
    assert answer_consistency_value([True, False]) == 1 / 2
    assert answer_consistency_value([True, True, True]) == 1.0
    assert answer_consistency_value([]) is None  # no main point: undefined, not 0


def test_precision_accuracy_and_augmentation_precision():
    relevant = [True, True, False, False]
    used = [True, False, True, False]
    assert retrieval_precision_value(relevant) == 2 / 4
    assert augmentation_accuracy_value(used) == 2 / 4
    assert augmentation_precision_value(relevant, used) == 1 / 2  # of the 2 relevant, 1 used
    assert augmentation_precision_value([False, False], [True, True]) == 0.0  # none relevant → 0 (SPEC)
    with pytest.raises(ValueError):
        augmentation_precision_value([True], [True, False])


def test_similarity_binary_and_overall():
    assert answer_similarity_value([2, 4]) == 4.0
    assert answer_consistency_binary_value(True) == 1.0
    values = {"answer_similarity": 3.0, "retrieval_precision": 1 / 3, "augmentation_accuracy": 0.5,
              "augmentation_precision": 1.0, "answer_consistency": 0.5, "answer_consistency_binary": 0.0}
    assert math.isclose(overall_value(values), (3 / 5 + 1 / 3 + 0.5 + 1.0 + 0.5 + 0.0) / 6)
    assert overall_value({"answer_similarity": 5.0}) == 1.0  # only what was computed counts
    assert overall_value({}) is None
    with pytest.raises(ValueError):
        overall_value({"token_f1": 0.5})
    assert set(scales()) == JUDGE_METRICS - {"overall_score", "questeval_recall", "questeval_precision"}
    assert scales()["answer_similarity"] == 5.0 and REGISTRY["answer_consistency_binary"].binary


def test_questeval_seed_example():
    # seed 003: three questions; the answer answers two, with similarities 0.5 and 1 → recall 2/3, precision 0.75
    ref = ["the red fox", "1889", "Paris"]
    gen = ["red cat", "UNANSWERABLE", "Paris"]  # F1("red fox", "red cat") = 1/2 after dropping "the"
    recall, precision = questeval_values(ref, gen)
    assert recall == 2 / 3
    assert precision == (0.5 + 1.0) / 2


def test_questeval_drops_questions_the_reference_cannot_answer_and_undefined_cases():
    recall, precision = questeval_values([None, "Paris"], ["Lyon", "Paris"])
    assert (recall, precision) == (1 / 1, 1.0)
    assert questeval_values(["无法推断", None], ["a", "b"]) == (None, None)
    assert questeval_values(["Paris"], [None]) == (0.0, None)
    assert questeval_values(["Paris"], [None], zero_division=0.0) == (0.0, 0.0)


def test_answer_f1_english_squad_normalisation_and_chinese_words():
    assert answer_f1("The Eiffel Tower", "eiffel tower!") == 1.0
    assert answer_f1("Paris", "Lyon") == 0.0
    # jieba: 儿童/青少年/的/近视/问题 vs 近视/问题 → P = 2/2, R = 2/5
    assert answer_tokens("儿童青少年的近视问题") == ["儿童", "青少年", "的", "近视", "问题"]
    assert answer_f1("儿童青少年的近视问题", "近视问题") == 2 * (2 / 2 * 2 / 5) / (2 / 2 + 2 / 5)


@pytest.fixture(scope="module")
def crud(data_dir):
    return json.loads((data_dir / "crud_questeval" / "QuestAnswer1Doc_quest_gt_save.json").read_text(encoding="utf-8"))


def test_crud_sample_unanswerable_marker_and_shapes(crud):
    assert len(crud) == 800
    mismatched = [k for k, item in crud.items() if len(item["question"]) != len(item["answers"])]
    assert len(mismatched) == 40  # CRUD's cache holds 40 items whose answers do not pair with the questions
    markers = sum(1 for item in crud.values() for a in item["answers"] if a == "无法推断")
    assert markers > 0
    # every "无法推断" reads as unanswerable, and no other answer does
    flagged = sum(1 for item in crud.values() for a in item["answers"] if is_unanswerable(a))
    assert flagged == markers


def test_crud_questeval_arithmetic(crud):
    item = crud["64fa9b27b82641eb8ecbe14c"]  # 启明行动: the reference cannot answer its first question
    assert item["answers"][0] == "无法推断"
    generated = ["一项公益行动", "近视问题", "无法推断"]
    recall, precision = questeval_values(item["answers"], generated)
    assert recall == 1 / 2  # question 1 dropped; of the other two, the answer answers one
    assert precision == 2 * (2 / 2 * 2 / 5) / (2 / 2 + 2 / 5)  # 儿童青少年的近视问题 vs 近视问题


def test_crud_reference_against_itself_is_perfect(crud):
    scored = 0
    for item in crud.values():
        if len(item["question"]) != len(item["answers"]):
            continue
        recall, precision = questeval_values(item["answers"], item["answers"])
        if all(is_unanswerable(a) for a in item["answers"]):
            assert (recall, precision) == (None, None)
            continue
        assert recall == 1.0 and precision == 1.0
        scored += 1
    assert scored > 700
