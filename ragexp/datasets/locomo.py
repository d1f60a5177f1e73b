"""``dataset=locomo`` (LoCoMo's JSON as it is) and ``dataset=conversations`` (ragexp's own JSONL, one
conversation a line): each question of a conversation is a record; the conversations themselves go to
``Dataset.conversations`` (:mod:`ragexp.datasets.conversations`). Formats, ids and what each field
becomes: docs/datasets.md#conversations.

A bad conversation (no sessions, a turn id twice, a date-time that is none, a question asked before
every session) stops the run with one line naming the conversation and the field.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterable, Iterator

from ragexp.common.notes import say_once_per_sweep
from ragexp.errors import DataError
from ragexp.datasets.base import Dataset, build, existing, iter_jsonl, read_json
from ragexp.datasets.conversations import (CONVERSATION_KEY, TIME_KEY, Conversation, Observation, Session, Turn,
                                           parse_time)

#: LoCoMo's question categories, its numbers to the names ragexp uses (docs/datasets.md#conversations)
CATEGORIES = {1: "multi_hop", 2: "temporal", 3: "open_domain", 4: "single_hop", 5: "adversarial"}
#: the reference answer of an adversarial question: the option LoCoMo's own prompt offers for "not there"
REFUSAL_ANSWER = "Not mentioned in the conversation"
_SESSION = re.compile(r"session_(\d+)")


class _Where:
    """Names the place of a bad value: the file, the conversation's row (its position in LoCoMo's list, its
    line in JSONL) and id."""

    def __init__(self, path: Path, row: int, conversation: str | None = None):
        self.path, self.row, self.conversation = str(path), row, conversation

    def error(self, message: str, field: str) -> DataError:
        who = f"conversation '{self.conversation}': " if self.conversation is not None else ""
        return DataError(who + message, path=self.path, row=self.row, field=field)


def _text(value: Any, where: _Where, field: str, what: str) -> str:
    if not isinstance(value, str):
        raise where.error(f"expected {what} (a string), got {type(value).__name__} {str(value)[:40]!r}", field)
    return value


def _time(value: Any, where: _Where, field: str):
    try:
        return parse_time(value)
    except ValueError as exc:
        raise where.error(f"unparseable date-time: {exc}", field) from None


def _turns(items: Any, number: int, where: _Where, field: str, seen: dict[str, int]) -> tuple[Turn, ...]:
    """A session's turns; a turn id met before (in any session) is an error."""
    if not isinstance(items, list):
        raise where.error(f"expected a list of turns, got {type(items).__name__}", field)
    turns = []
    for i, item in enumerate(items):
        at = f"{field}[{i}]"
        if not isinstance(item, dict):
            raise where.error(f"expected a turn object, got {type(item).__name__}", at)
        tid = item.get("dia_id", item.get("id"))
        tid = _text(tid, where, f"{at}.id", "the turn's id")
        if tid in seen:
            raise where.error(f"duplicate turn id '{tid}' (first in session {seen[tid]}); turn ids must be unique "
                              "in a conversation", f"{at}.id")
        seen[tid] = number
        caption = item.get("blip_caption", item.get("image_caption"))
        turns.append(Turn(tid, _text(item.get("speaker"), where, f"{at}.speaker", "the speaker"),
                          _text(item.get("text"), where, f"{at}.text", "the turn's text"),
                          caption if isinstance(caption, str) and caption else None))
    return tuple(turns)


def _cited(value: Any) -> tuple[str, ...]:
    """The turn ids an observation cites: one id, a list of them, or none. A text naming several (three of
    LoCoMo's observations cite ``D26:14, D26:34, D26:42``) is split at commas, semicolons and spaces."""
    if isinstance(value, str):
        value = [value]
    if isinstance(value, list):
        return tuple(part for v in value if isinstance(v, str) for part in re.split(r"[,;\s]+", v) if part)
    return ()


def _locomo_observations(sample: dict, number: int) -> tuple[Observation, ...]:
    """LoCoMo's ``observation.session_<n>_observation``: {speaker: [[text, turn id or ids], ...]}."""
    per_speaker = (sample.get("observation") or {}).get(f"session_{number}_observation") or {}
    out = []
    for speaker, facts in per_speaker.items() if isinstance(per_speaker, dict) else ():
        for fact in facts if isinstance(facts, list) else ():
            if isinstance(fact, list) and fact and isinstance(fact[0], str):
                out.append(Observation(fact[0], _cited(fact[1] if len(fact) > 1 else None), speaker))
    return tuple(out)


def locomo_conversation(sample: Any, where: _Where) -> tuple[Conversation, list]:
    """One item of LoCoMo's list: its conversation and its ``qa`` list. Date-times without a session (the
    file has 16 such keys, all in conv-26) are left out: there is nothing to remember of them."""
    if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
        raise where.error("expected an object with 'sample_id', 'conversation' and 'qa'", "conversation")
    cid = sample.get("sample_id")
    if not isinstance(cid, (str, int)) or isinstance(cid, bool) or str(cid) == "":
        raise where.error(f"expected a string id, got {cid!r}", "sample_id")
    where.conversation = str(cid)
    conv = sample["conversation"]
    numbers = sorted(int(m.group(1)) for k in conv if (m := _SESSION.fullmatch(k)))
    seen: dict[str, int] = {}
    sessions = []
    for n in numbers:
        key = f"session_{n}"
        stamp = conv.get(f"{key}_date_time")
        if stamp is None:
            raise where.error("expected the session's date-time, got none", f"conversation.{key}_date_time")
        summary = (sample.get("session_summary") or {}).get(f"{key}_summary")
        sessions.append(Session(n, _time(stamp, where, f"conversation.{key}_date_time"),
                                _turns(conv[key], n, where, f"conversation.{key}", seen),
                                _locomo_observations(sample, n), summary if isinstance(summary, str) else None))
    if not sessions:
        raise where.error("expected at least one session (conversation.session_<n>), got none", "conversation")
    speakers = tuple(s for s in (conv.get("speaker_a"), conv.get("speaker_b")) if isinstance(s, str))
    qa = sample.get("qa")
    if not isinstance(qa, list):
        raise where.error(f"expected a list of questions, got {type(qa).__name__}", "qa")
    return Conversation(str(cid), tuple(sessions), speakers), qa


def jsonl_conversation(item: Any, where: _Where) -> tuple[Conversation, list]:
    """One line of ragexp's conversation JSONL (docs/datasets.md#conversations): its conversation and questions."""
    if not isinstance(item, dict):
        raise where.error("expected an object with 'id', 'sessions' and 'questions' per line", "id")
    cid = item.get("id")
    if not isinstance(cid, (str, int)) or isinstance(cid, bool) or str(cid) == "":
        raise where.error(f"expected a string id, got {cid!r}", "id")
    where.conversation = str(cid)
    raw = item.get("sessions")
    if not isinstance(raw, list) or not raw:
        raise where.error(f"expected a non-empty list of sessions, got {str(raw)[:40]!r}", "sessions")
    seen: dict[str, int] = {}
    sessions = []
    for i, s in enumerate(raw):
        at = f"sessions[{i}]"
        if not isinstance(s, dict):
            raise where.error(f"expected a session object, got {type(s).__name__}", at)
        n = s.get("number", i + 1)
        if not isinstance(n, int) or isinstance(n, bool) or n < 0 or any(x.number == n for x in sessions):
            raise where.error(f"expected a session number not used before, got {n!r}", f"{at}.number")
        time = None if s.get("time") is None else _time(s["time"], where, f"{at}.time")
        observations = tuple(Observation(_text(o.get("text"), where, f"{at}.observations[{j}].text", "a text"),
                                         _cited(o.get("turn_ids", o.get("turn_id"))),
                                         o.get("speaker") if isinstance(o.get("speaker"), str) else None)
                             for j, o in enumerate(s.get("observations") or []) if isinstance(o, dict))
        summary = s.get("summary")
        sessions.append(Session(n, time, _turns(s.get("turns"), n, where, f"{at}.turns", seen), observations,
                                summary if isinstance(summary, str) else None))
    questions = item.get("questions")
    if not isinstance(questions, list):
        raise where.error(f"expected a list of questions, got {type(questions).__name__}", "questions")
    return Conversation(str(cid), tuple(sessions)), questions


def _category(value: Any, where: _Where, field: str) -> str | None:
    """LoCoMo's number as its name; a name (any text) as it is; None when absent."""
    if value is None:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        if value not in CATEGORIES:
            raise where.error(f"expected a category 1-5 ({', '.join(f'{k} {v}' for k, v in CATEGORIES.items())}) "
                              f"or a name, got {value}", field)
        return CATEGORIES[value]
    return _text(value, where, field, "a category")


class _Questions:
    """Turns each question of a conversation into a record's raw fields, and keeps what the run says of them."""

    def __init__(self, key: str):
        self.key = key
        self.malformed: list[str] = []  # 'record id: evidence entry' for evidence that names no turn or session
        self.unresolved = 0  # records whose recorded context names an id the conversation does not have

    def raw(self, q: Any, i: int, conv: Conversation, where: _Where, ids: dict[str, str]) -> dict[str, Any]:
        at = f"qa[{i}]"
        if not isinstance(q, dict):
            raise where.error(f"expected a question object, got {type(q).__name__}", at)
        rid = f"{conv.id}/{i}"
        category = _category(q.get("category"), where, f"{at}.category")
        query = _text(q.get("question", q.get("query")), where, f"{at}.question", "the question")
        raw: dict[str, Any] = {"id": rid, "query": query, "category": category, CONVERSATION_KEY: conv.id}
        if category == "adversarial":
            raw["reference_answers"] = [REFUSAL_ANSWER]
            if q.get("adversarial_answer") is not None:
                raw["adversarial_answer"] = q["adversarial_answer"]
        elif q.get("answer") is not None:
            answer = q["answer"]
            raw["reference_answers"] = [str(a) for a in answer] if isinstance(answer, list) else [str(answer)]
        evidence = q.get("evidence")
        if evidence is not None:
            if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                raise where.error(f"expected a list of turn ids, got {str(evidence)[:40]!r}", f"{at}.evidence")
            raw["gt_context_ids"] = list(evidence)
            self.malformed += [f"{rid} {e!r}" for e in evidence if e not in ids]
        if q.get(self.key) is not None:
            raw["answer"] = _text(q[self.key], where, f"{at}.{self.key}", "the recorded answer")
        context = q.get(f"{self.key}_context")
        if context is not None:
            if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
                raise where.error(f"expected a list of turn ids (D3:5) or session ids (S3), got {str(context)[:40]!r}",
                                  f"{at}.{self.key}_context")
            raw["context_ids"] = context
            if all(c in ids for c in context):
                raw["contexts"] = [ids[c] for c in context]
            else:
                self.unresolved += 1
        when = q.get("time", q.get("question_time"))
        if when is not None:
            time = _time(when, where, f"{at}.time")
            first = min((s.time for s in conv.sessions if s.time is not None), default=None)
            if first is not None and time < first:
                raise where.error(f"question time {time.isoformat()} is before every session (the first: "
                                  f"{first.isoformat()}): expected a question asked after a session", f"{at}.time")
            raw[TIME_KEY] = time.isoformat()
        return raw


def _passages(conv: Conversation) -> dict[str, str]:
    """Every id a retrieval may name in the conversation: its turns' ids and its sessions' ``S<n>``."""
    out = {t.id: t.passage() for t in conv.turns()}
    out.update({s.id: s.passage() for s in conv.sessions})
    return out


def _dataset(name: str, path: Path, conversations: Iterable[tuple[int, Any]], read, *, prediction_key: str,
             limit: int | None) -> Dataset:
    questions = _Questions(prediction_key)
    kept: dict[str, Conversation] = {}

    def rows() -> Iterator[tuple[int, dict]]:
        for row, item in conversations:
            where = _Where(path, row)
            conv, qa = read(item, where)
            if conv.id in kept:
                raise where.error("the conversation id is used twice: expected unique ids", "id")
            kept[conv.id] = conv
            ids = _passages(conv)
            for i, q in enumerate(qa):
                yield row, questions.raw(q, i, conv, where, ids)

    dataset = build(name, path, rows(), limit=limit)
    dataset.conversations = kept
    _say(name, questions)
    return dataset


def _say(name: str, questions: _Questions) -> None:
    """One line each for the evidence that names no turn (kept as written: LoCoMo's scoring reads it as it is) and for
    recorded contexts that name ids the conversation lacks (no context texts for those records); once in a sweep."""
    if questions.malformed:
        n = len(questions.malformed)
        say_once_per_sweep(f"[ragexp] dataset {name}: {n} evidence entr{'y names' if n == 1 else 'ies name'} no "
                           f"turn of its conversation, kept as written and read as LoCoMo's scoring reads them (a "
                           f"miss at turn level): {'; '.join(questions.malformed)}")
    if questions.unresolved:
        say_once_per_sweep(f"[ragexp] dataset {name}: {questions.unresolved} question(s) have a recorded "
                           f"'{questions.key}_context' naming an id that is no turn or session of the conversation: "
                           "their ids are scored, their context texts left out")


def load_locomo(path: str, *, name: str = "locomo", prediction_key: str = "prediction", limit: int | None = None,
                cluster_by: str | None = None) -> Dataset:
    """LoCoMo's JSON as it is: a list of conversations, each with ``sample_id``, ``conversation``, ``qa``,
    and optionally ``observation`` and ``session_summary``. Rows in errors are the conversation's position.
    ``cluster_by`` is read by ``stats`` (its ``cluster_by`` default), not here."""
    p = existing(path)
    data = read_json(p)
    if not isinstance(data, list):
        raise DataError(f"expected LoCoMo's JSON list of conversations, got {type(data).__name__}", path=str(p))
    return _dataset(name, p, enumerate(data, start=1), locomo_conversation, prediction_key=prediction_key,
                    limit=limit)


def load_conversations(path: str, *, name: str = "conversations", prediction_key: str = "prediction",
                       limit: int | None = None, cluster_by: str | None = None) -> Dataset:
    """ragexp's conversation JSONL, one conversation a line (docs/datasets.md#conversations). Rows in errors
    are line numbers. ``cluster_by`` is read by ``stats`` (its ``cluster_by`` default), not here."""
    p = existing(path)
    return _dataset(name, p, iter_jsonl(p), jsonl_conversation, prediction_key=prediction_key, limit=limit)


__all__ = ["CATEGORIES", "REFUSAL_ANSWER", "load_conversations", "load_locomo"]
