"""Mixed segmentation of texts that hold CJK (docs/metrics.md, "Keywords and Chinese text"): each
CJK ideograph or kana one token, other runs words, punctuation dropped; English texts exactly as
SQuAD's official normalisation tokenises them."""

from __future__ import annotations

import re
import string

import pytest

from ragexp.common.text import has_cjk, mixed_tokens, squad_tokens
from ragexp.metrics.answer import answer_token_f1, exact_match
from ragexp.metrics.token import token_f1, token_precision, token_recall


def _official_squad_tokens(text: str) -> list[str]:
    """SQuAD v2's evaluation script's normalize_answer(...).split(), written out here as the reference."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split()).split()


def test_the_demo_question_q47_scores_by_characters():
    # answer 铁观音属于乌龙茶是一种半发酵茶: 15 characters; reference 乌龙茶是一种半发酵茶: 10, all of them
    # in the answer (茶 twice in each): P = 10/15, R = 10/10
    value = answer_token_f1("铁观音属于乌龙茶，是一种半发酵茶。", ["乌龙茶，是一种半发酵茶。"])
    assert value == 2 * (10 / 15 * 1) / (10 / 15 + 1)
    # the weak system's answer 铁观音是乌龙茶 (7): shares 是 乌 龙 茶 (4) with the reference
    assert answer_token_f1("铁观音是乌龙茶。", ["乌龙茶，是一种半发酵茶。"]) == 2 * (4 / 7 * 4 / 10) / (4 / 7 + 4 / 10)


def test_mixed_runs_latin_words_and_characters():
    assert mixed_tokens("RAG是一种结合检索和生成的模型架构") == ["rag", *"是一种结合检索和生成的模型架构"]
    # the article goes; ASCII punctuation is removed as SQuAD removes it (bert-base, 110.5), 「」。 separate
    assert mixed_tokens("The model「BERT-base」有 110.5 M 参数。") == ["model", "bertbase", "有", "1105", "m", "参", "数"]
    assert mixed_tokens("深度学习（deep learning）") == ["深", "度", "学", "习", "deep", "learning"]
    assert mixed_tokens("ひらがなとカタカナ") == list("ひらがなとカタカナ")
    # all 3 answer tokens (rag 模 型) among the reference's 5 (rag 模 型 架 构): P 3/3, R 3/5
    assert answer_token_f1("RAG 模型", ["RAG模型架构"]) == 2 * (1 * 3 / 5) / (1 + 3 / 5)


def test_exact_match_ignores_cjk_punctuation_and_spacing():
    assert exact_match("乌龙茶，是一种半发酵茶。", ["乌龙茶是一种 半发酵茶"]) == 1.0
    assert exact_match("乌龙茶。", ["红茶。"]) == 0.0


def test_context_token_metrics_segment_chinese_passages():
    passages = ["乌龙茶是半发酵茶。", "熊猫吃竹子。"]
    truth = ["乌龙茶是一种半发酵茶。"]  # 10 characters
    # passage 1: 8 characters, all in the truth (茶 twice in both): P 8/8, R 8/10; passage 2 shares none
    assert token_precision(passages, truth, against="gt_contexts") == (8 / 8 + 0) / 2
    assert token_recall(passages, truth, against="gt_contexts") == (8 / 10 + 0) / 2
    assert token_f1(passages, truth, against="gt_contexts") == (2 * (1 * 0.8) / (1 + 0.8) + 0) / 2


@pytest.mark.parametrize("text", [
    "The Eiffel Tower, in Paris!", "don't stop—the U.S.A.'s 1,000 km", "café naïve résumé — an élan",
    "Zürich's Straße", "   ", "", "a an the", "Ωmega — the “quoted” text…", "the_under_score a-b",
])
def test_english_and_other_texts_are_tokenised_as_squad_does(text):
    assert not has_cjk(text)
    assert squad_tokens(text) == _official_squad_tokens(text)


def test_english_answer_values_unchanged_on_squad(data_dir):
    # every value computed by SQuAD's official arithmetic on its tokens: a multiset F1
    import json
    from collections import Counter

    data = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    pairs = [(qa["answers"][0]["text"] + " " + para["context"][:80], [a["text"] for a in qa["answers"]])
             for art in data["data"][:10] for para in art["paragraphs"] for qa in para["qas"] if qa["answers"]]
    pairs = [(a, refs) for a, refs in pairs if not has_cjk(a) and not any(map(has_cjk, refs))]  # 元朝 in a few
    assert len(pairs) > 500
    for answer, refs in pairs:
        expected = 0.0
        for ref in refs:
            p, r = _official_squad_tokens(answer), _official_squad_tokens(ref)
            same = sum((Counter(p) & Counter(r)).values())
            f1 = 0.0 if same == 0 else 2 * (same / len(p)) * (same / len(r)) / (same / len(p) + same / len(r))
            expected = max(expected, f1)
        assert answer_token_f1(answer, refs) == expected
