"""The memory layer under test (docs/memory-layers.md): built-in memories over the question's own conversation,
only the sessions before its time, at most k passages, each index built once; the user's memory called through
its add/search (adds first, one search per question), a failing or hanging search a per-question status."""

from __future__ import annotations

import pytest

from ragexp.common.records import Record
from ragexp.datasets.base import Dataset
from ragexp.datasets.conversations import Conversation, Observation, Session, Turn, parse_time
from ragexp.errors import ConfigError
from ragexp.pipeline import build_pipeline
from ragexp.pipeline.cache import IndexCache


def _conversation(cid: str, prefix: str) -> Conversation:
    """Three sessions a month apart; both conversations talk of the same things, so a leak would be found."""
    said = [["I walked my dog in the park", "Which park was it"],
            ["My dog chased a red ball in the park", "The red ball again"],
            ["The dog found the red ball under the park bench", "Lucky dog"]]
    sessions = []
    for n, lines in enumerate(said, start=1):
        turns = tuple(Turn(f"{prefix}{n}:{i}", "Ann" if i % 2 else "Bo", text) for i, text in enumerate(lines, start=1))
        sessions.append(Session(n, parse_time(f"2023-0{n}-01T10:00"), turns,
                                (Observation(f"Ann talks of her dog ({lines[0]})", (turns[0].id,), "Ann"),),
                                f"Ann and Bo spoke of the dog and {lines[0].lower()}"))
    return Conversation(cid, tuple(sessions), ("Ann", "Bo"))


def _dataset() -> Dataset:
    conversations = {"c1": _conversation("c1", "D"), "c2": _conversation("c2", "E")}
    records = [
        Record(id="c1/0", query="Where was the red ball found?", answer="under the bench",
               gt_context_ids=["D3:1"], extra={"conversation_id": "c1"}),
        Record(id="c1/1", query="What was chased in the park?", answer="a red ball", context_ids=["D9:9"],
               extra={"conversation_id": "c1", "question_time": "2023-02-15T00:00"}),
        Record(id="c2/0", query="Which park did the dog go to?", answer="the park",
               extra={"conversation_id": "c2", "question_time": "2023-01-20T00:00"}),
    ]
    return Dataset("memory_test", records, "memory_test.jsonl", conversations=conversations)


def test_turns_come_from_the_questions_own_conversation_before_its_time_at_most_k(compose, tmp_path, capsys):
    ds = _dataset()
    cfg = compose("memory_layer=turns", "retriever=bm25", "retriever.top_k=2", f"pipeline.cache_dir={tmp_path / 'c'}")
    pipeline = build_pipeline(cfg, ds)
    assert "recorded contexts of 1 question(s) (prediction_context) are ignored" in capsys.readouterr().err
    assert set(pipeline.produces) == {"contexts", "context_ids", "timings", "latency_s"}  # answers: recorded
    pipeline.run(ds.records)
    q0, q1, q2 = ds.records
    # no time: every session of c1; the one turn holding 'red', 'ball' and the rarer 'found' ranks first
    assert q0.context_ids[0] == "D3:1" and len(q0.context_ids) == 2 and all(i.startswith("D") for i in q0.context_ids)
    # asked on 15 February: sessions 1 and 2 only (session 3 of 1 March is not yet in memory)
    assert q1.context_ids[0] == "D2:1" and {i.split(":")[0] for i in q1.context_ids} <= {"D1", "D2"}
    # c2 asked on 20 January: its session 1 only, none of c1's turns
    assert set(q2.context_ids) <= {"E1:1", "E1:2"} and q2.context_ids
    assert all(r.contexts and len(r.contexts) == len(r.context_ids) <= 2 for r in ds.records)
    assert all(set(r.timings) == {"search", "total"} and r.latency_s == r.timings["search"] for r in ds.records)
    assert q0.answer == "under the bench"  # generator=precomputed keeps the recorded answer
    # one index per memory seen (c1 whole, c1 before 15 Feb, c2 before 20 Jan); a second job loads all three
    assert pipeline.stats["memory/indexes_built"] == 3
    again = build_pipeline(cfg, _dataset())
    again.run(again_records := _dataset().records)
    assert again.stats.get("memory/indexes_built", 0) == 0 and again.stats["memory/indexes_loaded"] == 3
    assert [r.context_ids for r in again_records] == [r.context_ids for r in ds.records]
    assert len(IndexCache(tmp_path / "c").builds()) == 3


@pytest.mark.parametrize("kind, expected", [
    ("sessions", ["S3", "S2"]),        # a session is one passage, id S<n>
    ("observations", ["D3:1", "D2:1"]),  # an observation keeps the turn it cites
    ("summaries", ["S3", "S2"]),       # a summary keeps its session's id
])
def test_sessions_observations_summaries_keep_their_ids(compose, tmp_path, kind, expected):
    ds = _dataset()
    cfg = compose(f"memory_layer={kind}", "retriever.top_k=2", f"pipeline.cache_dir={tmp_path}")  # retriever=none: bm25
    build_pipeline(cfg, ds).run(ds.records)
    assert ds.records[0].context_ids == expected


def test_no_top_k_means_ten_and_a_dataset_without_conversations_is_one_line(compose, tmp_path):
    ds = _dataset()
    pipeline = build_pipeline(compose("memory_layer=turns", "pipeline.cache_dir=null"), ds)
    assert pipeline.k == 10
    pipeline.run(ds.records)
    # BM25 returns no passage sharing no word with the query: 3 of c1's 6 turns hold red, ball or found
    assert sorted(ds.records[0].context_ids) == ["D2:1", "D2:2", "D3:1"]
    # c1's two questions asked at no time share one memory: searched together, or one by one (batch_size=1)
    together, alone = _dataset(), _dataset()
    for d in (together, alone):
        del d.records[1].extra["question_time"]
    build_pipeline(compose("memory_layer=turns", "pipeline.cache_dir=null"), together).run(together.records)
    build_pipeline(compose("memory_layer=turns", "pipeline.cache_dir=null", "pipeline.batch_size=1"),
                   alone).run(alone.records)
    assert [r.context_ids for r in alone.records] == [r.context_ids for r in together.records]
    assert together.records[0].context_ids != together.records[1].context_ids  # each question its own hits
    with pytest.raises(ConfigError, match="needs questions about conversations"):
        build_pipeline(compose("memory_layer=turns"), Dataset("plain", [Record(id="1", query="q")], "x.jsonl"))


def _custom(compose, *extra):
    return compose("memory_layer=custom", "memory_layer.factory=user_memories:build", "retriever.top_k=2", *extra)


def test_custom_memory_gets_adds_before_searches_and_one_search_per_question(compose):
    import user_memories

    ds = _dataset()
    pipeline = build_pipeline(_custom(compose), ds)
    pipeline.run(ds.records)
    calls = user_memories.CALLS
    for cid in ("c1", "c2"):
        mine = [c for c in calls if c[1] == cid]
        searches = [c for c in mine if c[0] == "search"]
        assert len(searches) == sum(r.extra["conversation_id"] == cid for r in ds.records)
        assert all(c[3] == 2 for c in searches)  # k = retriever.top_k
    # c1: its question of 15 February is asked after sessions 1-2, the one without a time after all three
    assert [c[0] + ":" + (",".join(c[2]) if c[0] == "add" else c[2]) for c in calls if c[1] == "c1"] == [
        "add:D1:1,D1:2", "add:D2:1,D2:2", "search:What was chased in the park?",
        "add:D3:1,D3:2", "search:Where was the red ball found?"]
    # c2 (asked on 20 January): session 1 only, added before its search
    assert [c[0] for c in calls if c[1] == "c2"] == ["add", "search"]
    assert all(len(r.context_ids) == 2 and len(r.contexts) == 2 for r in ds.records)  # cut to k
    assert ds.records[2].context_ids[0].startswith("E1:")
    assert pipeline.stats["memory/add_calls"] == 3 + 1 and pipeline.stats["memory/search_calls"] == 3


@pytest.mark.parametrize("how, reason", [
    ("raise", "search: error: RuntimeError: index corrupted near 'chase'"),
    ("exit", "search: error: SystemExit(4): the code called sys.exit(4)"),
    ("hang", "search: timeout: no answer within 0.5 s"),
])
def test_a_failing_or_hanging_search_is_that_questions_status(compose, how, reason):
    import user_memories

    ds = _dataset()
    pipeline = build_pipeline(_custom(compose, "+memory_layer.kwargs.fail_on=chase", f"+memory_layer.kwargs.how={how}",
                                      "memory_layer.timeout_s=0.5"), ds)
    try:
        pipeline.run(ds.records)
    finally:
        user_memories.RELEASE.set()
    failed = ds.records[1]
    assert failed.extra["pipeline_error"].startswith(reason) and failed.contexts is None
    others = [ds.records[0], ds.records[2]]
    if how == "hang":  # the memory may still be busy: c1's later question is not asked, c2's is
        assert "did not return" in ds.records[0].extra["pipeline_error"]
        others = [ds.records[2]]
    assert all(r.context_ids and "pipeline_error" not in r.extra for r in others)
    assert pipeline.stats["pipeline/failures"] == 3 - len(others)


@pytest.mark.parametrize("factory, said", [
    ("user_memories:no_search", "memory_layer.factory user_memories:no_search: the object it returned (AddOnly) "
                                "has no search method"),
    ("no_such_module:build", "memory_layer.factory: cannot import module 'no_such_module'"),
    ("user_memories:missing", "memory_layer.factory: module 'user_memories' has no attribute 'missing'"),
])
def test_a_bad_factory_is_one_config_error(compose, factory, said):
    with pytest.raises(ConfigError) as err:
        build_pipeline(compose("memory_layer=custom", f"memory_layer.factory={factory}"), _dataset())
    assert str(err.value).startswith(said) and "\n" not in str(err.value)


def test_a_custom_memory_with_a_retriever_chosen_is_one_config_error(compose):
    with pytest.raises(ConfigError, match="drop retriever=bm25"):
        build_pipeline(_custom(compose, "retriever=bm25"), _dataset())


def test_locomo_turns_bm25_top5_own_conversation_at_most_k_and_evidence_recall_by_its_formula(compose, tmp_path):
    """The real file: 1,986 questions, each searched in its own conversation's 5,882 turns only."""
    from ragexp.common.targets import build
    from ragexp.metrics.locomo import locomo_evidence_recall

    cfg = compose("dataset=locomo", "memory_layer=turns", "retriever=bm25", "retriever.top_k=5",
                  f"pipeline.cache_dir={tmp_path}")
    ds = build(cfg.dataset, "dataset")
    turns = {cid: {t.id for t in c.turns()} for cid, c in ds.conversations.items()}
    build_pipeline(cfg, ds).run(ds.records)
    assert len(ds.records) == 1986
    for r in ds.records:
        own = turns[r.extra["conversation_id"]]
        assert r.context_ids and len(r.context_ids) <= 5 and set(r.context_ids) <= own, r.id
        evidence = r.gt_context_ids or []
        if evidence:  # LoCoMo's evidence recall: the share of the evidence entries among the retrieved turn ids
            expected = sum(e in r.context_ids for e in evidence) / len(evidence)
            assert float(locomo_evidence_recall(r.context_ids, evidence)) == expected, r.id


@pytest.mark.integration
def test_a_factory_without_search_stops_the_command_with_one_line(tmp_path, data_dir):
    from cli import ROOT, run_cli

    proc = run_cli(f"data_dir={data_dir}", "dataset=locomo", "memory_layer=custom",
                   "memory_layer.factory=user_memories:no_search", f"tracking.uri=sqlite:///{tmp_path / 'm.db'}",
                   cwd=tmp_path, env={"PYTHONPATH": str(ROOT / "tests")}, check=False)
    assert proc.returncode == 2, proc.stderr[-2000:]
    said = [line for line in proc.stderr.splitlines() if "memory_layer.factory" in line]
    assert len(said) == 1 and "user_memories:no_search" in said[0] and "has no search method" in said[0]
    assert "Traceback" not in proc.stderr and not (tmp_path / "m.db").exists()


def test_a_memory_layer_run_holds_its_records_in_memory(compose):
    """Chunks cannot hold a conversation with its questions: execution.mode=stream says why it scores in memory."""
    from ragexp.workflow.streaming import why_not

    cfg = compose("dataset=locomo", "memory_layer=turns", "execution.mode=stream", "stats.cluster_by=null")
    assert why_not(cfg, None) == "memory_layer"
    assert why_not(compose("dataset=locomo", "execution.mode=stream", "stats.cluster_by=null"), None) is None


def test_another_generator_answers_from_the_retrieved_memory_timed_as_answer(compose, tmp_path):
    ds = _dataset()
    pipeline = build_pipeline(compose("memory_layer=turns", "retriever.top_k=1", "generator=extractive",
                                      f"pipeline.cache_dir={tmp_path}"), ds)
    assert "answer" in pipeline.produces
    pipeline.run(ds.records)
    first = ds.records[0]  # its one passage: '[2023-03-01 10:00] Ann: The dog found the red ball under the park bench'
    assert first.context_ids == ["D3:1"] and first.answer == first.contexts[0]
    assert set(first.timings) == {"search", "answer", "total"}
    assert first.latency_s == first.timings["total"] == first.timings["search"] + first.timings["answer"]


@pytest.mark.slow  # loads the dense model (~1 min on a busy 2-core machine)
def test_hybrid_keeps_each_conversations_two_indexes_its_own(compose, tmp_path):
    """A hybrid memory holds a BM25 and a dense index per conversation: a second pass over the same questions
    (the memories reused from the job's memo) ranks exactly as the first."""
    ds = _dataset()
    pipeline = build_pipeline(compose("memory_layer=turns", "retriever=hybrid", "retriever.top_k=2",
                                      f"pipeline.cache_dir={tmp_path}"), ds)
    pipeline.run(ds.records)
    first = [list(r.context_ids) for r in ds.records]
    assert all(i.startswith("D") for i in first[0] + first[1]) and set(first[2]) <= {"E1:1", "E1:2"}
    pipeline.run(ds.records)
    assert [r.context_ids for r in ds.records] == first
