"""Human labels on records (``human: {metric key: value}``): validation, the adapters that fill them,
column mapping, and the seeded dev/test split (docs/judge-trust.md)."""

import json

import pytest

from ragexp.common.records import to_record
from ragexp.datasets.mapped import load_in_memory, load_mapped
from ragexp.errors import DataError
from ragexp.metrics.base import label_scales, load_all


@pytest.fixture
def load(compose):
    from ragexp.workflow.runner import load_dataset

    return lambda option, *overrides: load_dataset(compose(f"dataset={option}", *overrides).dataset)


@pytest.mark.parametrize("human, message", [
    ({"answer_similarity": 6}, "field 'human.answer_similarity': expected a whole number from 0 to 5 (the metric's range), got int 6"),
    ({"answer_similarity": 2.5}, "expected a whole number from 0 to 5"),
    ({"answer_consistency_binary": 2}, "field 'human.answer_consistency_binary': expected 0 or 1 (or true/false)"),
    ({"answer_consistency": 1.2}, "expected a number from 0 to 1 (the metric's range), got float 1.2"),
    ({"answer_consistency": "high"}, "got str 'high'"),
    ({"my_metric": float("inf")}, "field 'human.my_metric': expected a finite number"),
    ([1, 0], "field 'human': expected a mapping of metric key to a number"),
])
def test_bad_label_is_one_line_naming_file_row_field(human, message):
    with pytest.raises(DataError) as err:
        to_record({"query": "q", "human": human}, path="labels.jsonl", row=7, scales=label_scales())
    text = str(err.value)
    assert text.startswith("labels.jsonl, row 7, field 'human") and message in text and "\n" not in text


def test_labels_read_from_text_and_bools_and_blank_is_no_label():
    r = to_record({"query": "q", "human": {"answer_similarity": " 4 ", "answer_consistency_binary": False,
                                           "answer_consistency": "", "my_metric": 0.3}}, path="x", row=1)
    assert r.human == {"answer_similarity": 4.0, "answer_consistency_binary": 0.0, "my_metric": 0.3}
    assert to_record({"query": "q", "human": {"answer_similarity": None}}, path="x", row=1).human is None


def test_mapped_csv_maps_columns_to_human_keys(tmp_path):
    path = tmp_path / "rated.csv"
    path.write_text("question,response,rating,grounded\nq1,a1,4,1\nq2,a2,,0\nq3,a3,9,1\n")
    cols = {"query": "question", "answer": "response", "human.answer_similarity": "rating",
            "human.answer_consistency_binary": "grounded"}
    with pytest.raises(DataError) as err:  # row 3's rating 9 is outside 0-5, named by the user's column
        load_mapped(str(path), columns=cols)
    assert str(err.value).startswith(f"{path}, row 3, field 'human.answer_similarity' (column 'rating'): expected a whole")
    path.write_text("question,response,rating,grounded\nq1,a1,4,1\nq2,a2,,0\n")
    ds = load_mapped(str(path), columns=cols)
    assert [r.human for r in ds.records] == [{"answer_similarity": 4.0, "answer_consistency_binary": 1.0},
                                             {"answer_consistency_binary": 0.0}]


def test_in_memory_rows_and_a_json_human_column(tmp_path):
    ds = load_in_memory([{"question": "q", "verdict": 1}], columns={"query": "question",
                                                                    "human.answer_consistency_binary": "verdict"})
    assert ds.records[0].human == {"answer_consistency_binary": 1.0}
    path = tmp_path / "r.csv"
    path.write_text('query,human\nq1,"{""answer_similarity"": 3}"\n')
    assert load_mapped(str(path)).records[0].human == {"answer_similarity": 3.0}
    with pytest.raises(DataError, match="unknown field 'humane.x'"):
        load_in_memory([{"q": "q"}], columns={"humane.x": "q"})


def test_expertqa_one_record_per_claim_with_evidence_and_mapped_labels(load, data_dir):
    ds = load("expertqa")
    lines = [json.loads(line) for line in open(data_dir / "expertqa" / "domain_val.jsonl")]
    claims = [(row, s, i, c) for row, item in enumerate(lines, 1) for s, a in item["answers"].items()
              for i, c in enumerate(a["claims"] or [], 1)]
    with_evidence = [t for t in claims if any(e.strip() for e in t[3]["evidence"])]
    assert len(ds.records) == len(with_evidence) == 974  # PROVENANCE: 974 claims with evidence text
    by_id = {r.id: r for r in ds.records}
    for row, system, i, claim in with_evidence:
        r = by_id[f"{row}-{system}-{i}"]
        assert r.answer == claim["claim_string"] and r.contexts == claim["evidence"]
        support = claim["support"]
        human = r.human or {}
        if support == "Complete":
            assert (human["answer_consistency_binary"], human["answer_consistency"]) == (1, 1.0)
        elif support in ("Partial", "Incomplete"):
            assert (human["answer_consistency_binary"], human["answer_consistency"]) == (0, 0.5)
        else:  # N/A or absent: no support label
            assert "answer_consistency" not in human
        expected = {"Definitely correct": 4, "Probably correct": 3, "Likely incorrect": 1,
                    "Definitely incorrect": 0}.get(claim["correctness"])
        assert human.get("correctness") == expected
    assert len(load("expertqa", "dataset.require_evidence=false").records) == 1174


def test_split_is_seeded_stratified_and_disjoint(load):
    every = load("expertqa").records
    dev, test = load("expertqa", "dataset.split=dev").records, load("expertqa", "dataset.split=test").records
    assert {r.id for r in dev} | {r.id for r in test} == {r.id for r in every}
    assert not {r.id for r in dev} & {r.id for r in test}
    assert [r.id for r in dev] == [r.id for r in load("expertqa", "dataset.split=dev").records]  # seeded
    assert [r.id for r in dev] != [r.id for r in load("expertqa", "dataset.split=dev", "dataset.split_seed=1").records]
    ones = sum(1 for r in every if (r.human or {}).get("answer_consistency_binary") == 1)
    dev_ones = sum(1 for r in dev if (r.human or {}).get("answer_consistency_binary") == 1)
    groups = {tuple(sorted(r.human.items())) for r in every if (r.human or {}).get("answer_consistency_binary") == 1}
    assert abs(dev_ones - ones / 2) <= len(groups) / 2  # half of each label group, each rounded once
    small = load("expertqa", "dataset.split=dev", "dataset.split_fraction=0.2").records
    assert len(small) == pytest.approx(0.2 * len(every), abs=16)  # one rounding per label group
    with pytest.raises(DataError, match="dataset.split must be one of all, dev, test, got 'train'"):
        load("expertqa", "dataset.split=train")


def test_adapters_fill_human_labels(load):
    halu = load("halueval", "dataset.limit=4").records
    assert [r.human for r in halu[:2]] == [{"answer_consistency_binary": 1, "answer_similarity": 5},
                                           {"answer_consistency_binary": 0, "answer_similarity": 0}]
    ce = load("continuous_eval_correctness").records
    assert all(r.human == {"answer_similarity": 5 * int(r.label)} for r in ce)
    assert [r.human for r in load("memory_eval_false").records] == [{"answer_similarity": 0}] * 8
    assert [r.human for r in load("memory_eval_true").records] == [{"answer_similarity": 5}] * 8


def test_human_scales_are_the_registered_judge_metrics_own():
    shares = ("answer_consistency", "retrieval_precision", "augmentation_accuracy", "augmentation_precision",
              "overall_score", "questeval_recall", "questeval_precision", "claim_faithfulness")
    assert label_scales() == {"answer_consistency_binary": ("binary", 0, 1), "answer_similarity": ("ordinal", 0, 5),
                            "answer_correct": ("binary", 0, 1),
                            "correctness": ("ordinal", 0, 4), **{k: ("continuous", 0, 1) for k in shares}}
    assert {k for k, info in load_all().items() if info.judge} == set(label_scales()) - {"correctness"}
