"""The generator's two reply forms, read tolerantly (reasoning blocks, fences, prose around the object).

A question: ``{"question": str, "answer": str, "evidence": [str, ...]}`` (an unanswerable question's answer
is empty). The answerability check: ``{"answerable": bool, "answer": str}``. A reply holding neither raises
:class:`ragexp.judge.parse.ParseError`, so the judge's client never caches it (it is asked again next run).

    >>> read_question('Sure!\\n```json\\n{"question": "Who?", "answer": "Ann", "evidence": "Ann did."}\\n```')
    {'question': 'Who?', 'answer': 'Ann', 'evidence': ['Ann did.']}
    >>> read_answerable('<think>hm</think>{"answerable": "yes", "answer": "Ann"}')
    {'answerable': True, 'answer': 'Ann'}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ragexp.judge.errors import ParseError
from ragexp.judge.parse import strip_reasoning

#: replies longer than this are not searched further (bounds the scan)
MAX_REPLY = 20_000


@dataclass(frozen=True)
class ReplyForm:
    """A reply's JSON schema, sent as ``response_format`` in the judge's structured-output form
    (:func:`ragexp.judge.client.response_format`; a small local model otherwise rarely replies in JSON)."""

    name: str
    schema: dict[str, Any]


def _object(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": list(props), "additionalProperties": False}


QUESTION_FORM = ReplyForm("testset_question", _object(question={"type": "string"}, answer={"type": "string"},
                                                      evidence={"type": "array", "items": {"type": "string"}}))
ANSWERABLE_FORM = ReplyForm("testset_answerable", _object(answerable={"type": "boolean"}, answer={"type": "string"}))


def last_object(text: str | None) -> dict[str, Any]:
    """The last JSON object in the reply (keys lowercased), or a ParseError."""
    body = strip_reasoning(text or "")[:MAX_REPLY]
    decoder = json.JSONDecoder()
    found: dict[str, Any] | None = None
    i = body.find("{")
    while i != -1:
        try:
            obj, end = decoder.raw_decode(body, i)
        except json.JSONDecodeError:
            i = body.find("{", i + 1)
            continue
        if isinstance(obj, dict):
            found = {str(k).lower(): v for k, v in obj.items()}
        i = body.find("{", end)
    if found is None:
        raise ParseError("no JSON object in the reply")
    return found


def read_question(text: str | None) -> dict[str, Any]:
    obj = last_object(text)
    q, a, ev = obj.get("question"), obj.get("answer", ""), obj.get("evidence", [])
    if not isinstance(q, str) or not q.strip():
        raise ParseError("no 'question' text in the reply's object")
    if a is None:
        a = ""
    if not isinstance(a, str):
        raise ParseError(f"'answer' is {type(a).__name__}, expected a text")
    if isinstance(ev, str):
        ev = [ev]
    if not isinstance(ev, list) or not all(isinstance(e, str) for e in ev):
        raise ParseError("'evidence' must be a list of quoted texts")
    return {"question": q.strip(), "answer": a.strip(), "evidence": [e.strip() for e in ev if e.strip()]}


_YES = {"true", "yes", "y", "1", "answerable"}
_NO = {"false", "no", "n", "0", "unanswerable", "not answerable"}


def read_answerable(text: str | None) -> dict[str, Any]:
    obj = last_object(text)
    v = obj.get("answerable")
    if isinstance(v, str) and v.strip().lower() in _YES | _NO:
        v = v.strip().lower() in _YES
    if not isinstance(v, bool):
        raise ParseError("no 'answerable' field (true or false) in the reply's object")
    a = obj.get("answer")
    return {"answerable": v, "answer": a.strip() if isinstance(a, str) else ""}
