"""metric=locomo: LoCoMo's category-aware QA score and evidence recall, golden values written as arithmetic
for each rule; context tokens and stage latency percentiles; and one process run over the real file with
predictions, every question present. (Agreement with LoCoMo's own task_eval/evaluation.py on all 1,986
questions was measured outside the tree, which does not hold that code: docs/metrics.md, "LoCoMo".)"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from ragexp.metrics.base import Score
from ragexp.metrics.footprint import context_tokens, interpolated_percentile, stage_latency
from ragexp.metrics.locomo import locomo_evidence_recall, locomo_qa, normalize, stemmed_f1


def test_normalization_and_stemmed_f1():
    # commas, punctuation, case and the words a/an/the/and go; the rest is stemmed (cats -> cat, running -> run)
    assert normalize("The cats, and A dog's bone!") == "cats dogs bone"
    # word boundaries as the regex package draws them (LoCoMo's): '½' is no word character there, so the
    # 'a' before it is a word and goes (Python's re keeps it: 'a½ cup')
    assert normalize("a½ cup") == "½ cup"
    # 'cat were run' vs 'cat run': 2 shared, P 2/3, R 2/2
    assert stemmed_f1("The cats were running", "a cat runs") == pytest.approx(2 * (2 / 3) * 1 / (2 / 3 + 1), abs=1e-12)
    assert stemmed_f1("", "cat") == 0.0 and stemmed_f1("dog", "cat") == 0.0
    # a word counts as often as it occurs in both: 'run run' vs 'run': P 1/2, R 1
    assert stemmed_f1("run run", "run") == pytest.approx(2 / 3, abs=1e-12)


@pytest.mark.parametrize("answer, reference, category, expected", [
    ("7 May 2023", "7 May 2023", "temporal", 1.0),
    ("May 2023", "7 May 2023", "temporal", 2 * 1 * (2 / 3) / (1 + 2 / 3)),            # P 2/2, R 2/3
    ("Paris, France", "Paris France", "single_hop", 1.0),                             # commas dropped, not split
    ("Paris, Rome", "Rome, Oslo, Paris", "multi_hop", (1 + 0 + 1) / 3),               # each reference part's best
    ("Rome and Oslo", "Rome, Oslo", "multi_hop", (2 * 0.5 / 1.5 + 2 * 0.5 / 1.5) / 2),  # one part 'rome oslo': P 1/2 each
    ("Paris", "Paris; likely France", "open_domain", 1.0),                            # up to the first ';'
    ("Paris France", "Paris; likely France", "open_domain", 2 * 0.5 * 1 / 1.5),       # P 1/2, R 1
    ("No information available.", "Not mentioned in the conversation", "adversarial", 1.0),
    ("It is NOT MENTIONED anywhere", "Not mentioned in the conversation", "adversarial", 1.0),
    ("It is not in the conversation", "Not mentioned in the conversation", "adversarial", 0.0),
    ("", "7 May 2023", "temporal", 0.0),                                              # an empty answer is a miss
    ("", "Rome, Oslo", "multi_hop", 0.0),
    ("", "Not mentioned in the conversation", "adversarial", 0.0),
    ("Oslo", "Oslo", "a category of my own", 1.0),                                    # scored as single_hop
])
def test_locomo_qa_each_category_rule(answer, reference, category, expected):
    assert locomo_qa(answer, [reference], category) == pytest.approx(expected, abs=1e-12)


def test_locomo_qa_without_a_reference_is_undefined_except_adversarial():
    assert locomo_qa("x", [" "], "single_hop").status == "undefined"
    assert locomo_qa("not mentioned", [], "adversarial") == 1.0


@pytest.mark.parametrize("retrieved, evidence, expected", [
    (["D1:3", "D2:1"], ["D1:3", "D4:4", "D1:3"], 2 / 3),       # turn level: each entry as written, repeats count
    (["S4", "S1"], ["D1:3", "D4:4", "D2:1"], 2 / 3),            # session level: D1 and D4 retrieved, D2 not
    (["S8"], ["D8:6; D9:17"], 1.0),                             # the entry's session is read before its ':'
    (["D8:6", "D9:17"], ["D8:6; D9:17"], 0.0),                  # at turn level it names no turn: a miss
    (["D1:3", "S4"], ["D1:3", "D4:4"], 1 / 2),                  # the first id decides the level
    ([], ["D1:3"], 0.0),                                        # nothing retrieved: a miss
])
def test_locomo_evidence_recall(retrieved, evidence, expected):
    assert locomo_evidence_recall(retrieved, evidence) == pytest.approx(expected, abs=1e-12)


def test_no_evidence_is_one_as_locomo_counts_it_and_says_so():
    score = locomo_evidence_recall(["D1:1"], [])
    assert isinstance(score, Score) and score.value == 1.0 and "no evidence" in score.detail


def test_context_tokens_and_stage_latency():
    from ragexp.common.tokenizers import load_tokenizer

    enc = load_tokenizer("cl100k_base")
    passages = ["Caroline: I went to a support group yesterday.", "Melanie: That's great!"]
    assert context_tokens(passages) == len(enc.encode(passages[0])) + len(enc.encode(passages[1]))
    assert context_tokens([]) == 0.0
    seconds = [0.4, 0.1, 0.3, 0.2, 1.0]
    timings = [{"search": s, "answer": 2 * s} for s in seconds] + [None, {"answer": 5.0}]
    # sorted 0.1 0.2 0.3 0.4 1.0: the median is the third; p95 is 0.4 + 0.8 * (1.0 - 0.4) (rank 0.95 * 4 = 3.8)
    assert stage_latency(timings, stage="search", percentile="p50") == pytest.approx(0.3, abs=1e-12)
    assert stage_latency(timings, stage="search", percentile="p95") == pytest.approx(0.4 + 0.8 * 0.6, abs=1e-12)
    assert stage_latency(timings, stage="answer", percentile="p95") == pytest.approx(np.percentile([0.8, 0.2, 0.6, 0.4, 2.0, 5.0], 95))
    assert stage_latency(timings, stage="rerank", percentile="p50").status == "undefined"
    assert interpolated_percentile([5.0], 95) == 5.0


def _with_predictions(data: list) -> tuple[list, dict]:
    """Every third question answered with its reference and its evidence retrieved, every third with an
    empty answer and its evidence sessions retrieved, the rest 'no idea' with one turn retrieved."""
    expected = {}
    for conv in data:
        for i, q in enumerate(conv["qa"]):
            rid = f"{conv['sample_id']}/{i}"
            sessions = [f"S{e.split(':')[0][1:]}" for e in q["evidence"] if e.split(":")[0][1:].isdigit()] or ["S1"]
            if i % 3 == 0:
                q["prediction"] = "Not mentioned in the conversation" if q["category"] == 5 else str(q["answer"])
                q["prediction_context"] = list(q["evidence"]) or ["D1:1"]
                if q["category"] != 3:  # open-domain references are cut at ';': not always all of the answer
                    expected[rid] = (1.0, 1.0)
            elif i % 3 == 1:
                q["prediction"], q["prediction_context"] = "", sessions
                expected[rid] = (0.0, None)
            else:
                q["prediction"], q["prediction_context"] = "no idea", ["D1:1"]
                if q["category"] == 5:
                    expected[rid] = (0.0, None)
    return data, expected


@pytest.mark.integration
def test_a_locomo_run_scores_every_question(tmp_path, data_dir):
    from cli import run_cli

    data, expected = _with_predictions(json.loads((data_dir / "locomo" / "locomo10.json").read_text()))
    path = tmp_path / "predictions.json"
    path.write_text(json.dumps(data))
    proc = run_cli("dataset=locomo", f"dataset.path={path}", "metric=locomo", "tracking.traces=0", cwd=tmp_path)
    lines = [line for line in proc.stderr.splitlines() if "evidence entries name no turn" in line]
    assert len(lines) == 1 and lines[0].count("conv-") == 9, proc.stderr[-2000:]
    [folder] = [p.parent for p in (tmp_path / "outputs").rglob("per_sample.parquet")]
    table = pd.read_parquet(folder / "per_sample.parquet")
    ids = [f"{c['sample_id']}/{i}" for c in data for i in range(len(c["qa"]))]
    assert len(ids) == 1986 and sorted(table["id"]) == sorted(ids)
    got = table.set_index("id")
    for rid, (qa, recall) in expected.items():
        assert got.at[rid, "locomo_qa"] == pytest.approx(qa, abs=1e-12), rid
        if recall is not None:
            assert got.at[rid, "locomo_evidence_recall"] == pytest.approx(recall, abs=1e-12), rid
    # session-level retrieval of the evidence's own sessions: 1 wherever every entry names its session
    sessions_only = [f"{c['sample_id']}/{i}" for c in data for i, q in enumerate(c["qa"])
                     if i % 3 == 1 and q["evidence"] and all(e.split(":")[0][1:].isdigit() for e in q["evidence"])]
    assert (got.loc[sessions_only, "locomo_evidence_recall"] == 1.0).all()
    assert set(got["category"]) == {"multi_hop", "temporal", "open_domain", "single_hop", "adversarial"}
    assert got["conversation_id"].nunique() == 10
    summary = json.loads((folder / "summary.json").read_text())
    assert {"locomo_qa", "locomo_evidence_recall", "context_tokens"} <= set(summary["metrics"])
