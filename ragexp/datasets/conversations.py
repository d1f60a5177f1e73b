"""Conversations as data: what a memory layer ingests before it is asked (docs/datasets.md#conversations).

A :class:`Conversation` is an id and its sessions in order; a :class:`Session` has a number, a
date-time and its turns (each with an id like ``D3:5``, a speaker and a text), and optionally the
observations drawn from it (each citing the turn it comes from) and a summary. Each question of a
conversation is a :class:`~ragexp.common.records.Record` whose ``extra`` holds the conversation's id
(:data:`CONVERSATION_KEY`, the record's cluster) and, when the data gives one, the time the question
is asked (:data:`TIME_KEY`, ISO 8601 text); :func:`conversation_of` and :func:`question_time` read them.
The dataset's ``conversations`` maps each id to its conversation.

    >>> s = Session(1, parse_time("1:56 pm on 8 May, 2023"), (Turn("D1:1", "Ann", "Hi"), Turn("D1:2", "Bo", "Hey")))
    >>> c = Conversation("conv-1", (s,))
    >>> s.id, s.time.isoformat(), [t.id for t in c.turns()]
    ('S1', '2023-05-08T13:56:00', ['D1:1', 'D1:2'])
    >>> print(s.passage())
    (2023-05-08 13:56)
    Ann: Hi
    Bo: Hey
    >>> [x.id for x in c.sessions_before(parse_time("2023-05-08T12:00"))]
    []
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterator

#: The record ``extra`` key holding the id of the conversation a question is about (its cluster).
CONVERSATION_KEY = "conversation_id"
#: The record ``extra`` key holding the time a question is asked (ISO 8601 text), when the data gives it.
TIME_KEY = "question_time"


@dataclass(frozen=True, slots=True)
class Turn:
    """One message: its id (unique in the conversation, e.g. ``D3:5``), who said it, and what."""

    id: str
    speaker: str
    text: str
    image_caption: str | None = None  # a caption of an image the speaker shared (LoCoMo's blip_caption)

    def passage(self) -> str:
        """The turn as a passage to retrieve: ``speaker: text``, and ``[shares <caption>]`` for an image."""
        shared = f" [shares {self.image_caption}]" if self.image_caption else ""
        return f"{self.speaker}: {self.text}{shared}"


@dataclass(frozen=True, slots=True)
class Observation:
    """A fact drawn from a session about one speaker, citing the turns it comes from (LoCoMo: one, at times
    several; none when the data names none)."""

    text: str
    turn_ids: tuple[str, ...]
    speaker: str | None = None

    @property
    def turn_id(self) -> str | None:
        """The first turn it cites (its id as a passage), or None."""
        return self.turn_ids[0] if self.turn_ids else None


@dataclass(frozen=True, slots=True)
class Session:
    """One sitting of the conversation: its number (1, 2, ...), when it took place, its turns in order."""

    number: int
    time: datetime | None
    turns: tuple[Turn, ...]
    observations: tuple[Observation, ...] = ()
    summary: str | None = None

    @property
    def id(self) -> str:
        """The session's id as retrieval names it: ``S<number>`` (LoCoMo's session-level ids)."""
        return f"S{self.number}"

    def passage(self) -> str:
        """The session as a passage to retrieve: its date-time on the first line, then a turn a line."""
        head = [f"({self.time:%Y-%m-%d %H:%M})"] if self.time else []
        return "\n".join(head + [t.passage() for t in self.turns])


@dataclass(frozen=True, slots=True)
class Conversation:
    """A conversation: its id (LoCoMo's ``sample_id``) and its sessions in order."""

    id: str
    sessions: tuple[Session, ...]
    speakers: tuple[str, ...] = ()

    def turns(self) -> Iterator[Turn]:
        """Every turn, session by session."""
        for s in self.sessions:
            yield from s.turns

    def sessions_before(self, time: datetime | None) -> tuple[Session, ...]:
        """The sessions that took place before ``time`` (all of them when it is None, or a session has no time)."""
        if time is None:
            return self.sessions
        return tuple(s for s in self.sessions if s.time is None or s.time < time)


def conversation_of(record: Any) -> str | None:
    """The id of the conversation a question (a record) is about, or None when it is about none."""
    value = record.extra.get(CONVERSATION_KEY)
    return None if value is None else str(value)


def question_time(record: Any) -> datetime | None:
    """When the question is asked, or None when the data does not say."""
    value = record.extra.get(TIME_KEY)
    return None if value is None else parse_time(str(value))


_MONTHS = {m: i for i, m in enumerate(("january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"), start=1)}
#: LoCoMo's session date-times: ``1:56 pm on 8 May, 2023``
_SPOKEN = re.compile(r"\s*(\d{1,2}):(\d{2})\s*([ap])\.?m\.?\s+on\s+(\d{1,2})\s+([A-Za-z]+),?\s+(\d{4})\s*", re.I)


def parse_time(text: str) -> datetime:
    """A date-time written in ISO 8601 (``2023-05-08T13:56``, or a date) or LoCoMo's way
    (``1:56 pm on 8 May, 2023``); a ValueError when it is neither. No time zone is kept.

    >>> parse_time("12:09 am on 1 January, 2024").isoformat(), parse_time("2024-01-01").isoformat()
    ('2024-01-01T00:09:00', '2024-01-01T00:00:00')
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a date-time text, got {type(text).__name__}")
    spoken = _SPOKEN.fullmatch(text)
    if spoken:
        hour, minute, half, day, month, year = spoken.groups()
        if month.lower() not in _MONTHS or not 1 <= int(hour) <= 12:
            raise ValueError(f"not a date-time: {text!r}")
        hour24 = int(hour) % 12 + (12 if half.lower() == "p" else 0)
        return datetime(int(year), _MONTHS[month.lower()], int(day), hour24, int(minute))
    try:
        return datetime.fromisoformat(text.strip()).replace(tzinfo=None)
    except ValueError:
        raise ValueError(f"not a date-time: {text!r} (expected ISO 8601 like 2023-05-08T13:56, "
                         "or '1:56 pm on 8 May, 2023')") from None


__all__ = ["CONVERSATION_KEY", "TIME_KEY", "Conversation", "Observation", "Session", "Turn", "conversation_of",
           "parse_time", "question_time"]
