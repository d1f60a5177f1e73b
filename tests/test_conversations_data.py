"""dataset=locomo and dataset=conversations: LoCoMo's real file read as it is, ragexp's conversation JSONL,
and each kind of bad conversation told in one line naming the conversation and the field."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ragexp.datasets.conversations import conversation_of, question_time
from ragexp.datasets.locomo import REFUSAL_ANSWER, load_conversations, load_locomo
from ragexp.errors import DataError


def test_the_real_file_whole(data_dir, capsys):
    ds = load_locomo(str(data_dir / "locomo" / "locomo10.json"))
    err = capsys.readouterr().err
    assert len(ds.records) == 1986 and len(ds.conversations) == 10
    assert sum(len(list(c.turns())) for c in ds.conversations.values()) == 5882  # PROVENANCE.md
    assert Counter(r.category for r in ds.records) == {"single_hop": 841, "adversarial": 446, "temporal": 321,
                                                         "multi_hop": 282, "open_domain": 96}
    # ids: <sample_id>/<index in its qa list>; the conversation is the record's own
    first = ds.records[0]
    assert first.id == "conv-26/0" and conversation_of(first) == "conv-26" and question_time(first) is None
    assert first.gt_context_ids == ["D1:3"] and first.reference_answers == ["7 May 2023"]
    assert all(r.id.startswith(conversation_of(r) + "/") for r in ds.records)
    # an adversarial question's reference is the refusal; its distractor kept as an input column
    adversarial = next(r for r in ds.records if r.category == "adversarial")
    assert adversarial.reference_answers == [REFUSAL_ANSWER] and adversarial.extra["adversarial_answer"]
    # the 9 evidence entries that name no turn: kept as written, said in one line naming each
    lines = [line for line in err.splitlines() if "evidence entr" in line]
    assert len(lines) == 1 and lines[0].count("conv-") == 9 and "'D8:6; D9:17'" in lines[0]
    assert ds.records[[r.id for r in ds.records].index("conv-42/88")].gt_context_ids == ["D1:18", "D", "D1:20"]
    # sessions in order with parsed times; conv-26's 16 date-times without a session are left out
    c26 = ds.conversations["conv-26"]
    assert [s.number for s in c26.sessions] == list(range(1, 20))
    assert c26.sessions[0].time.isoformat() == "2023-05-08T13:56:00"
    assert c26.sessions[0].turns[0].id == "D1:1" and c26.sessions[0].summary
    obs = c26.sessions[0].observations[0]
    assert obs.turn_id == "D1:3" and obs.speaker == "Caroline"
    # every observation cites turns of its conversation: one, a list, or several in one text (split)
    for conv in ds.conversations.values():
        turn_ids = {t.id for t in conv.turns()}
        assert all(set(o.turn_ids) <= turn_ids for s in conv.sessions for o in s.observations), conv.id
    cited = [o.turn_ids for s in ds.conversations["conv-44"].sessions for o in s.observations]
    assert ("D26:14", "D26:34", "D26:42") in cited


def test_recorded_answers_and_retrieval(tmp_path, data_dir):
    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())[:1]
    data[0]["qa"][0].update(mine="7 May", mine_context=["D1:3", "D1:4"])
    data[0]["qa"][1].update(mine="2022", mine_context=["S1", "S2"])
    path = tmp_path / "one.json"
    path.write_text(json.dumps(data))
    ds = load_locomo(str(path), prediction_key="mine")
    a, b = ds.records[:2]
    assert (a.answer, a.context_ids) == ("7 May", ["D1:3", "D1:4"])
    turns = {t.id: t for t in ds.conversations["conv-26"].turns()}
    assert a.contexts == [turns["D1:3"].passage(), turns["D1:4"].passage()]
    assert b.contexts[0] == ds.conversations["conv-26"].sessions[0].passage()
    assert ds.records[2].answer is None and ds.records[2].context_ids is None


def _line(**conversation) -> str:
    base = {"id": "c1",
            "sessions": [{"time": "2024-03-01T10:00", "turns": [{"id": "a1", "speaker": "Ann", "text": "I moved to Oslo."},
                                                                {"id": "a2", "speaker": "Bo", "text": "Nice!"}]},
                         {"time": "2024-04-01T10:00", "turns": [{"id": "b1", "speaker": "Ann", "text": "Job started."}],
                          "observations": [{"text": "Ann has a new job.", "turn_ids": ["b1"], "speaker": "Ann"}],
                          "summary": "Ann started her job."}],
            "questions": [{"question": "Where does Ann live?", "answer": "Oslo", "evidence": ["a1"], "category": 4,
                           "time": "2024-03-15T09:00"},
                          {"question": "What did Ann start?", "answer": "a job", "evidence": ["S2"],
                           "category": "custom kind", "prediction": "her job", "prediction_context": ["b1"]}]}
    base.update(conversation)
    return json.dumps(base)


def test_the_jsonl_format(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text(_line() + "\n" + _line(id="c2") + "\n")
    ds = load_conversations(str(path))
    assert [r.id for r in ds.records] == ["c1/0", "c1/1", "c2/0", "c2/1"]
    first, second = ds.records[:2]
    assert first.category == "single_hop" and second.category == "custom kind"
    assert question_time(first).isoformat() == "2024-03-15T09:00:00"
    conv = ds.conversations["c1"]
    assert [s.id for s in conv.sessions_before(question_time(first))] == ["S1"]
    assert conv.sessions[1].observations[0].turn_ids == ("b1",) and conv.sessions[1].summary == "Ann started her job."
    assert second.answer == "her job" and second.contexts == ["Ann: Job started."]


@pytest.mark.parametrize("change, field, words", [
    ({"sessions": []}, "sessions", "non-empty list of sessions"),
    ({"sessions": [{"time": "2024-03-01", "turns": [{"id": "a1", "speaker": "A", "text": "x"},
                                                    {"id": "a1", "speaker": "B", "text": "y"}]}]},
     "sessions[0].turns[1].id", "duplicate turn id 'a1'"),
    ({"sessions": [{"time": "the first of March", "turns": []}]}, "sessions[0].time", "unparseable date-time"),
    ({"questions": [{"question": "q?", "answer": "x", "time": "2024-01-01"}]}, "qa[0].time", "before every session"),
])
def test_bad_conversations_name_the_conversation_and_field(tmp_path, change, field, words):
    path = tmp_path / "bad.jsonl"
    path.write_text(_line(**change) + "\n")
    with pytest.raises(DataError) as err:
        load_conversations(str(path))
    message = str(err.value)
    assert "\n" not in message and "conversation 'c1'" in message and f"field '{field}'" in message
    assert words in message and "row 1" in message


@pytest.mark.parametrize("edit, field, words", [
    (lambda s: [s["conversation"].pop(k) for k in list(s["conversation"]) if k.startswith("session_")],
     "conversation", "at least one session"),
    (lambda s: s["conversation"]["session_2"].__setitem__(0, dict(s["conversation"]["session_1"][0])),
     "conversation.session_2[0].id", "duplicate turn id 'D1:1' (first in session 1)"),
    (lambda s: s["conversation"].__setitem__("session_3_date_time", "25:99 on Mayday"),
     "conversation.session_3_date_time", "unparseable date-time"),
])
def test_bad_locomo_conversations(tmp_path, data_dir, edit, field, words):
    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())[:2]
    edit(data[1])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    with pytest.raises(DataError) as err:
        load_locomo(str(path))
    message = str(err.value)
    assert "conversation 'conv-30'" in message and "row 2" in message and f"field '{field}'" in message
    assert words in message


def test_a_sweeps_jobs_say_a_files_quirks_once(tmp_path, compose, capsys):
    """An evidence entry naming no turn is said each time a run loads the file, but once in a sweep whose jobs
    load it in one process (Hydra's basic launcher: every job of ``python -m ragexp -m ...``)."""
    from hydra.core.hydra_config import HydraConfig

    path = tmp_path / "c.jsonl"
    path.write_text(_line(questions=[{"question": "Where?", "answer": "Oslo", "evidence": ["a1", "a9"]}]) + "\n")
    name = f"quirks_{tmp_path.name}"

    def lines() -> list[str]:
        return [x for x in capsys.readouterr().err.splitlines() if "evidence entry names no turn" in x]

    for _ in range(2):
        load_conversations(str(path), name=name)
    assert len(lines()) == 2 and not HydraConfig.initialized()  # two runs (ragexp.evaluate twice): said twice
    config = compose("hydra.mode=MULTIRUN", return_hydra_config=True)
    hydra_config = HydraConfig.instance()
    try:
        hydra_config.set_config(config)
        for _ in range(3):  # three jobs of one sweep
            load_conversations(str(path), name=name)
        said = lines()
        assert len(said) == 1 and "c1/0 'a9'" in said[0], said
    finally:
        hydra_config.cfg = None  # back to no Hydra job, as the tests after this one expect
