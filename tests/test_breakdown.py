"""Headline metrics by category and the retrieval by context source (ragexp.core.breakdown): golden values
written as arithmetic over small records, the chunked path equal to the whole, and the keys' form."""

from __future__ import annotations

import math
import statistics

import pytest

from ragexp.common.records import Record
from ragexp.core.breakdown import Breakdown, breakdown_key, is_breakdown_key, key_label
from ragexp.core.scoring import build_metrics

NAN = float("nan")
SETTINGS = {"resamples": 1000, "confidence": 0.95, "seed": 0, "method": "percentile"}


def _record(i, category=None, contexts=None, sources=None, gt=None, answer="Paris is the capital"):
    r = Record(id=str(i), query="q", contexts=contexts, gt_contexts=gt, answer=answer)
    r.category, r.context_sources = category, sources  # the fields may not be on Record yet: set them as attributes
    return r


def _specs():
    return build_metrics({
        "context_precision": {"_target_": "ragexp.metrics.context.context_precision", "matcher": None, "k": None},
        "context_recall": {"_target_": "ragexp.metrics.context.context_recall", "matcher": None, "k": None},
        "avg_coverage": {"_target_": "ragexp.metrics.keyword.avg_coverage", "against": "answer", "stopwords": None},
        "answer_token_f1": {"_target_": "ragexp.metrics.answer.answer_token_f1"},
    }, {"_target_": "ragexp.matchers.exact.ExactMatcher", "name": "exact_chunk"})[0]


def test_each_category_is_its_own_run_with_its_own_n_and_interval():
    cats = ["temporal", "multi_hop", "temporal", "temporal", "multi_hop", None]
    f1 = [0.5, 0.2, 1.0, NAN, 0.4, 0.9]  # NaN: not ok for that record; None category: in no row
    hit = [1.0, 0.0, 1.0, 0.0, 1.0, 1.0]
    b = Breakdown([])
    b.add([_record(i, c) for i, c in enumerate(cats)])
    out = b.intervals({"answer_token_f1": f1, "hit_rate/hit_rate_at_1": hit, "other": hit}, ["answer_token_f1", "hit_rate/hit_rate_at_1"],
                      **SETTINGS)
    assert list(out) == ["answer_token_f1/category/temporal", "hit_rate/hit_rate_at_1/category/temporal",
                         "answer_token_f1/category/multi_hop", "hit_rate/hit_rate_at_1/category/multi_hop"]  # no 'other'
    t = out["answer_token_f1/category/temporal"]
    assert t.n == 2 and t.mean == pytest.approx((0.5 + 1.0) / 2)
    assert t.stderr == pytest.approx(statistics.stdev([0.5, 1.0]) / math.sqrt(2))
    m = out["answer_token_f1/category/multi_hop"]
    assert m.n == 2 and m.mean == pytest.approx((0.2 + 0.4) / 2)
    h = out["hit_rate/hit_rate_at_1/category/temporal"]  # 0/1 values: Wilson's interval of 2 hits in 3
    p, n, z = 2 / 3, 3, 1.959963984540054
    centre, half = (p + z * z / (2 * n)) / (1 + z * z / n), z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    assert h.method == "wilson" and h.n == 3 and h.mean == pytest.approx(2 / 3)
    assert (h.ci_low, h.ci_high) == pytest.approx((centre - half, centre + half))
    assert b.labels() == {"category": ["temporal", "multi_hop"], "source": []}


def test_a_category_clustered_by_conversation_takes_the_clustered_standard_error():
    cats = ["a"] * 6 + ["b"] * 2
    vals = [0.1, 0.3, 0.5, 0.9, 0.6, 0.2, 0.7, 0.8]
    conv = ["c1", "c1", "c2", "c2", "c3", "c3", "c1", "c2"]
    b = Breakdown([])
    b.add([_record(i, c) for i, c in enumerate(cats)])
    iv = b.intervals({"m": vals}, ["m"], clusters=conv, **SETTINGS)["m/category/a"]
    x = vals[:6]
    mean = sum(x) / 6
    sums = [(x[0] - mean) + (x[1] - mean), (x[2] - mean) + (x[3] - mean), (x[4] - mean) + (x[5] - mean)]
    expected = math.sqrt(3 / 2 * sum(s * s for s in sums)) / 6  # Miller's clustered SE, G = 3 clusters
    assert iv.n == 6 and iv.n_clusters == 3 and iv.stderr == pytest.approx(expected)


def test_per_source_precision_recall_coverage_and_the_answers_each_supported():
    specs = _specs()
    ctx = ["Paris is the capital", "rain", "the capital of France", "noise"]
    src = ["rag", "memory_short", "memory_long", "rag"]
    gt = ["Paris is the capital", "the capital of France"]
    records = [
        _record(0, contexts=ctx, sources=src, gt=gt, answer="Paris capital"),
        _record(1, contexts=["rain", "snow"], sources=["memory_short", "memory_short"], gt=["snow"],
                answer="snow today"),
        _record(2, contexts=["x"], sources=["rag"], gt=["y"], answer="a"),  # the answer has no keyword (one letter)
    ]
    b = Breakdown(specs)
    b.add(records)
    out = b.intervals({}, [], **SETTINGS)
    v = {k: iv.mean for k, iv in out.items()}
    n = {k: iv.n for k, iv in out.items()}
    # rag: record 0 ('Paris is the capital', 'noise': 1 of 2 relevant, 1 of 2 ground truths; the answer's
    # keywords paris and capital both in it) and record 2 ('x' against 'y': 0 and 0; its answer has no keyword)
    assert v["context_precision/source/rag"] == pytest.approx((1 / 2 + 0) / 2) and n["context_precision/source/rag"] == 2
    assert v["context_recall/source/rag"] == pytest.approx((1 / 2 + 0) / 2)
    assert v["avg_coverage/source/rag"] == pytest.approx(1.0) and n["avg_coverage/source/rag"] == 1
    # memory_short: record 0 ('rain': 0 relevant, 0 ground truths; covers no keyword), record 1 ('rain', 'snow':
    # 1 of 2 relevant, 1 of 1 ground truth; covers snow, not today)
    assert v["context_precision/source/memory_short"] == pytest.approx((0 + 1 / 2) / 2)
    assert v["context_recall/source/memory_short"] == pytest.approx((0 + 1) / 2)
    assert v["avg_coverage/source/memory_short"] == pytest.approx((0 + 1 / 2) / 2)
    # memory_long: record 0 only ('the capital of France': 1 of 1 relevant, 1 of 2 ground truths, covers capital)
    assert v["context_precision/source/memory_long"] == 1.0 and n["context_recall/source/memory_long"] == 1
    assert v["context_recall/source/memory_long"] == pytest.approx(1 / 2)
    assert v["avg_coverage/source/memory_long"] == pytest.approx(1 / 2)
    # answers supported, over records 0 and 1 (record 2's answer has no keyword): rag 1 of 2, memory_short 1
    # of 2 (record 1), memory_long 1 of 2 (record 0; record 1 had none of its contexts: 0)
    for label in ("rag", "memory_short", "memory_long"):
        key = f"answers_supported/source/{label}"
        assert (v[key], n[key]) == (pytest.approx(1 / 2), 2), key
    assert "answer_token_f1/source/rag" not in out  # only coverage, precision and recall by source
    assert b.labels()["source"] == ["rag", "memory_short", "memory_long"]


def test_chunk_by_chunk_equals_the_whole_even_when_a_source_first_appears_late():
    specs = _specs()

    def recs():
        out = []
        for i in range(9):
            src = ["rag", "memory_long"] if i >= 6 else ["rag", "rag"]  # memory_long only in the last chunk
            out.append(_record(i, category=["a", "b", "c"][i % 3], contexts=[f"c{i}", "Paris"], sources=src,
                               gt=["Paris"], answer=f"Paris w{i}"))
        return out

    whole, chunked = Breakdown(specs), Breakdown(specs)
    whole.add(recs())
    r = recs()
    for start in (0, 3, 6):
        chunked.add(r[start:start + 3])
    vals = {"m": [i / 10 for i in range(9)]}
    a, b = whole.intervals(vals, ["m"], **SETTINGS), chunked.intervals(vals, ["m"], **SETTINGS)
    assert a.keys() == b.keys() and all(a[k] == b[k] for k in a)
    # memory_long supported records 6-8 ('Paris'); records 0-5 had sources and answers but none of its contexts
    supported = a["answers_supported/source/memory_long"]
    assert supported.n == 9 and supported.mean == pytest.approx(3 / 9)
    assert a["context_recall/source/memory_long"].n == 3


def test_keys_and_labels():
    assert breakdown_key("answer_token_f1", "category", "temporal") == "answer_token_f1/category/temporal"
    assert breakdown_key("context_recall", "source", "Memory short") == "context_recall/source/Memory short"
    assert key_label("a:b") == "a_b" and is_breakdown_key("avg_coverage/source/rag/n")


def test_the_console_prints_one_compact_table_of_categories_by_headline_metric(capsys):
    from ragexp.report.groups import print_breakdown

    b = Breakdown([])
    b.add([_record(i, c) for i, c in enumerate(["temporal", "temporal", "multi_hop", "temporal"])])
    out = b.intervals({"answer_token_f1": [0.5, 1.0, 0.25, NAN], "context_recall": [1.0, 0.0, 1.0, 1.0]},
                      ["answer_token_f1", "context_recall"], **SETTINGS)
    print_breakdown(out, b.labels(), ["answer_token_f1", "context_recall"])
    text = capsys.readouterr().out
    lines = [" ".join(line.replace("│", " ").replace("┃", " ").split()) for line in text.splitlines()]
    lines = [line for line in lines if line and line[0].isalpha()]  # the title, header, rows and caption
    assert text.count("By category") == 1 and "By context source" not in text
    assert lines[1] == "category n answer_token_f1 context_recall"
    temporal = out["answer_token_f1/category/temporal"]  # 2 of the 3 temporal records have a value: '(n 2)'
    assert lines[2].startswith(f"temporal 3 0.7500 [{temporal.ci_low:.4f}, {temporal.ci_high:.4f}] (n 2) 0.6667 ")
    assert lines[3] == "multi_hop 1 0.2500 1.0000"  # one record: a mean, no interval


def test_a_chunk_with_neither_categories_nor_sources_keeps_the_records_aligned():
    specs = _specs()
    first = [_record(0, "a", contexts=["Paris"], sources=["rag"], gt=["Paris"], answer="Paris")]
    plain = [_record(i, None) for i in (1, 2)]  # a chunk of records without category or sources
    last = [_record(3, "a", contexts=["Paris"], sources=["memory_long"], gt=["Paris"], answer="Paris")]
    b = Breakdown(specs)
    parts = [b.part(first), b.part(plain), b.part(last)]
    assert parts[1] is None
    for part, n in zip(parts, (1, 2, 1)):
        b.merge(part, n)
    out = b.intervals({"m": [0.2, 0.9, 0.9, 0.6]}, ["m"], **SETTINGS)
    assert out["m/category/a"].mean == pytest.approx((0.2 + 0.6) / 2) and out["m/category/a"].n == 2
    # record 0 had sources and an answer: memory_long (first seen in record 3) supported none of it
    assert out["answers_supported/source/memory_long"].mean == pytest.approx(1 / 2)
    assert out["answers_supported/source/rag"].mean == pytest.approx(1 / 2)


def test_a_run_logs_the_breakdown_in_memory_and_streamed_alike(tmp_path):
    """The one aggregator carries the breakdown: a run held in memory and the same file streamed in chunks of 2 give
    the same summary['breakdown'] (categories, sources, every interval), after the run's own keys."""
    import json as _json

    import ragexp

    rows = []
    for i in range(7):
        sources = ["rag", "memory_long"] if i % 2 else ["memory_short", "rag"]
        rows.append({"id": f"q{i}", "query": f"question {i}", "answer": f"Paris answer{i}",
                     "reference_answers": [f"Paris answer{i}"], "contexts": ["Paris is here", f"noise {i}"],
                     "gt_contexts": ["Paris is here"], "category": ["temporal", "multi_hop", "adversarial"][i % 3],
                     "context_sources": sources if i != 4 else None})
    path = tmp_path / "records.jsonl"
    path.write_text("".join(_json.dumps(r) + "\n" for r in rows))
    common = dict(metric="[answer_token_f1,context_recall,avg_coverage]", log=False, progress=False,
                  overrides=["dataset=records", f"dataset.path={path}", "stats.resamples=200",
                             "matcher=exact_chunk"])
    memory = ragexp.evaluate(str(path), **{**common, "overrides": [*common["overrides"], "execution.mode=memory"]})
    streamed = ragexp.evaluate(str(path), **{**common, "overrides": [*common["overrides"], "execution.mode=stream",
                                                                     "execution.chunk_records=2"]})
    a, b = memory.summary, streamed.summary
    assert b.get("execution") and list(a)[-1] == "breakdown"
    assert a["breakdown"] == b["breakdown"]
    assert a["breakdown"]["by"] == {"category": ["temporal", "multi_hop", "adversarial"],
                                    "source": ["memory_short", "rag", "memory_long"]}
    temporal = a["breakdown"]["intervals"]["answer_token_f1/category/temporal"]
    assert temporal["n"] == 3 and temporal["mean"] == 1.0  # q0, q3, q6: the answer is the reference
    supported = a["breakdown"]["intervals"]["answers_supported/source/memory_long"]
    assert supported["n"] == 6 and supported["mean"] == 0.0  # q4 names no sources; memory_long holds only noise
