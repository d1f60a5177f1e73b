"""Judge replies → typed verdicts, tolerant of how models actually answer.

Every prompt asks for one JSON object. The parser accepts it in any case, inside markdown fences
or prose, after a reasoning block (``<think>…</think>``), with Python literals (``True``,
single quotes) or trailing commas. The graded answer cannot hand itself a verdict: an object
inside quoted material (our delimiters, a code fence quoting more than the verdict) or found in the
graded material itself is not a candidate, and candidates that disagree make the reply unreadable
rather than letting the first or last one win. For the one-field verdicts a plain ``relevant: yes``
line is read too. Anything else raises :class:`ParseError` with the reason, which the judge sends
back once in a corrective re-ask.

    >>> parse_verdict("relevance", 'Thinking... the passage names the capital.\\n```json\\n{"Relevant": "Yes", "reason": "names it"}\\n```')
    Verdict(value=True, reason='names it')
    >>> parse_verdict("similarity", "<think>close, one detail off</think> **Score: 4**")
    Verdict(value=4.0, reason='')
    >>> parse_verdict("answers", '{"answers": ["Paris", "UNANSWERABLE"]}', n_questions=2)
    Verdict(value=('Paris', None), reason='')
    >>> parse_verdict("relevance", "I cannot decide.")
    Traceback (most recent call last):
    ...
    ragexp.judge.errors.ParseError: no JSON object with a 'relevant' field (true or false) in the reply
"""

from __future__ import annotations

import ast
import bisect
import json
import re
from typing import Any

from ragexp.judge.errors import ParseError
from ragexp.judge.templates import TAGS
from ragexp.metrics.base import load_all
from ragexp.metrics.judged import ABSENT, Verdict, VerdictKind

__all__ = ["ParseError", "Verdict", "parse_verdict", "strip_reasoning", "verdict_kinds"]


# -- finding the JSON object ---------------------------------------------------------------------

_REASONING_OPEN = re.compile(r"<(think|thinking|reasoning|reflection|scratchpad)>", re.I)
_REASONING_CLOSE = re.compile(r"</(think|thinking|reasoning|reflection|scratchpad)>", re.I)
_UNCLOSED_DROPS = ("think", "thinking", "reasoning")  # an unclosed one of these runs to the end
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _cut_blocks(text: str, opens: re.Pattern, closes: re.Pattern, to_end: tuple[str, ...] = ()) -> str:
    """``text`` with each block from an opening tag to the first closing tag of the same name after it replaced
    by a space, leftmost first (as ``<(t)>.*?</\\1>`` would, in one linear pass: every tag is found once);
    an opening tag named in ``to_end`` with no closing tag after it cuts to the end."""
    closing: dict[str, list[int]] = {}
    ends: dict[int, int] = {}
    for m in closes.finditer(text):
        closing.setdefault(m.group(1).lower(), []).append(m.start())
        ends[m.start()] = m.end()
    out, last = [], 0
    for m in opens.finditer(text):
        if m.start() < last:
            continue
        after = closing.get(m.group(1).lower(), [])
        k = bisect.bisect_left(after, m.end())
        if k < len(after):
            out += [text[last:m.start()], " "]
            last = ends[after[k]]
        elif m.group(1).lower() in to_end:
            out += [text[last:m.start()], " "]
            last = len(text)
            break
    return "".join(out) + text[last:] if out else text


def strip_reasoning(text: str) -> str:
    """The reply without reasoning blocks (an unclosed one runs to the end and is dropped too).

    >>> strip_reasoning("<think>a</think> b <THINK>c</think> d <reasoning>e")
    '  b   d  '
    """
    return _cut_blocks(text, _REASONING_OPEN, _REASONING_CLOSE, _UNCLOSED_DROPS)


def _closers(text: str) -> dict[int, int]:
    """For each ``{`` that a ``}`` closes, that ``}``'s position: braces matched in one pass, strings (inside
    braces) skipped as :func:`_balanced` skips them. A ``{`` missing here never closes."""
    out: dict[int, int] = {}
    stack: list[int] = []
    quote, escape = None, False
    for i, ch in enumerate(text):
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = None
            continue
        if ch == "{":
            stack.append(i)
        elif ch == "}" and stack:
            out[stack.pop()] = i
        elif stack and ch in "\"'":
            quote = ch if ch == '"' or _looks_like_py_quote(text, i) else None
    return out


def _balanced(text: str, start: int, stop: int | None = None) -> str | None:
    """The ``{…}`` starting at ``start``, braces balanced outside strings; None if it never closes (looking no
    further than ``stop``)."""
    depth, quote, escape = 0, None, False
    for i in range(start, len(text) if stop is None else min(stop, len(text))):
        ch = text[i]
        if quote:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == quote:
                quote = None
            continue
        if ch in "\"'":
            quote = ch if ch == '"' or _looks_like_py_quote(text, i) else None
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return None


def _looks_like_py_quote(text: str, i: int) -> bool:
    """A single quote opens a string only after ``{ [ , :`` (not an apostrophe inside a word)."""
    j = i - 1
    while j >= 0 and text[j] in " \t\n":
        j -= 1
    return j >= 0 and text[j] in "{[,:"


def _load(chunk: str) -> Any:
    for attempt in (chunk, _TRAILING_COMMA.sub(r"\1", chunk)):
        try:
            return json.loads(attempt)
        except json.JSONDecodeError:
            pass
        try:
            return ast.literal_eval(attempt)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            pass
    return None


def _norm_keys(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {re.sub(r"[\s\-]+", "_", str(k).strip().lower()): _norm_keys(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_norm_keys(v) for v in obj]
    return obj


#: Characters of candidate objects read per character of text, past a floor: the bound that keeps a reply of
#: nested or unbalanced braces linear in its length (a verdict object is read long before it)
_READ_PER_CHAR = 8
_READ_FLOOR = 200_000


def _objects(text: str) -> list[tuple[str, dict[str, Any]]]:
    """(source text, object) of every JSON (or Python-literal) object in the text, outermost only.

    Linear in the text's length: braces are matched in one pass (:func:`_closers`), a ``{`` that never closes
    costs nothing, and the candidates read (each one's text scanned and loaded) are bounded by
    :data:`_READ_PER_CHAR` characters per character of text.
    """
    out = []
    closers = _closers(text) if "{" in text else {}
    budget = _READ_FLOOR + _READ_PER_CHAR * len(text)
    i = text.find("{")
    while i != -1 and budget > 0:
        end = closers.get(i)
        chunk = _balanced(text, i, end + 1) if end is not None else None
        if chunk is None:
            # the one pass read this '{' inside a string of an unclosed object before it (a malformed reply
            # quoting the verdict); read on from here alone, the scan charged to the budget
            chunk = _balanced(text, i)
            budget -= len(text) - i if chunk is None else 0
        if chunk is not None:
            budget -= 3 * len(chunk)
            obj = _load(chunk)
            if isinstance(obj, dict):
                out.append((chunk, _norm_keys(obj)))
                i = text.find("{", i + len(chunk))
                continue
        i = text.find("{", i + 1)
    return out


# -- quoted material ------------------------------------------------------------------------------

#: The prompts' delimiters of graded material, in any case, with spaces or attributes: a judge quoting
#: the material in them quotes, it does not give a verdict.
_DELIMITED_OPEN = re.compile(r"<\s*(%s)\b[^>]*>" % "|".join(TAGS), re.I)
_DELIMITED_CLOSE = re.compile(r"<\s*/\s*(%s)\s*>" % "|".join(TAGS), re.I)
_FENCE = re.compile(r"```[^\n`]*\n?(.*?)```", re.S)
_SPACE = re.compile(r"\s+")


def _squash(text: str) -> str:
    return _SPACE.sub(" ", text).strip().lower()


def _unquoted(body: str) -> str:
    """The reply without what it quotes: blocks in our delimiters, and code fences that hold more than
    one JSON object (a fence quoting the answer; a fence holding only the verdict object is kept)."""
    body = _cut_blocks(body, _DELIMITED_OPEN, _DELIMITED_CLOSE)

    def fence(m: re.Match) -> str:
        inner = m.group(1).strip()
        found = _objects(inner)
        return inner if len(found) == 1 and found[0][0] == inner else " "

    return _FENCE.sub(fence, body)


class _Quoted:
    """The graded material the prompt held: a verdict-shaped object or line found in it is a quote."""

    def __init__(self, quoted: Any):
        texts = [quoted] if isinstance(quoted, str) else list(quoted or ())
        self.texts = [_squash(str(t)) for t in texts if t]
        self.objects = [obj for t in texts if t for _, obj in _objects(str(t))]

    def holds(self, chunk: str, obj: Any = None) -> bool:
        if obj is not None and obj in self.objects:
            return True
        c = _squash(chunk)
        return bool(c) and any(c in t for t in self.texts)


# -- typed fields ---------------------------------------------------------------------------------

def verdict_kinds() -> dict[str, VerdictKind]:
    """Every verdict kind the registered judge metrics ask, by name (each defined in its metric's module)."""
    return {k.name: k for info in load_all().values() if info.judge for k in info.judge.asks}


def _reason(obj: dict[str, Any]) -> str:
    r = obj.get("reason", obj.get("rationale", obj.get("explanation", "")))
    return r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)


def _build(kind: VerdictKind, obj: dict[str, Any], ctx: dict[str, Any]) -> Verdict:
    value = next((obj[n] for n in kind.fields if n in obj), ABSENT)
    return Verdict(kind.read(value, kind.fields[0], ctx), _reason(obj))


_LINE = re.compile(r"(?<![\w\"'*`])[\"'*`_]{0,3}\b([a-z][a-z_]{0,39})\b[\"'*`_]{0,3}\s{0,20}[:=]\s{0,20}[\"'*`_]{0,3}\s{0,20}"
                   r"(true|false|yes|no|-?\d{1,12}(?:\.\d{1,12})?)\b", re.I)


def _whole_object(body: str) -> tuple[str, dict[str, Any]] | None:
    """(text, object) when the reply is nothing but one JSON object (perhaps in one fence): structured output."""
    inner = body.strip()
    if inner.startswith("```") and inner.endswith("```") and len(inner) >= 6:
        inner = inner[3:-3]
        inner = inner.split("\n", 1)[1] if "\n" in inner and "`" not in inner.split("\n", 1)[0] else inner
        inner = inner.strip()
    if not (inner.startswith("{") and inner.endswith("}")):
        return None
    found = _objects(inner)
    return found[0] if len(found) == 1 and found[0][0] == inner else None


def _one(main: str, verdicts: list[Verdict]) -> Verdict:
    """The verdict when every candidate's value agrees (the reasons may differ); conflicting verdicts are an
    unreadable reply."""
    values = []
    for v in verdicts:
        if v.value not in values:
            values.append(v.value)
    if len(values) > 1:
        shown = ", ".join(json.dumps(v, ensure_ascii=False, default=str) for v in values[:4])
        raise ParseError(f"the reply holds {len(values)} conflicting '{main}' verdicts ({shown}) outside the quoted "
                         "material; give exactly one")
    return verdicts[0]


def parse_verdict(kind: VerdictKind | str, text: str | None, quoted: Any = (), **ctx: Any) -> Verdict:
    """The typed verdict of ``kind`` in a judge's reply, or :class:`ParseError` saying why not.

    ``quoted``: the graded material the prompt held (its slot values). A reply that is one JSON
    object is that verdict. Otherwise the candidates are the objects (then ``field: value`` lines)
    that fit the verdict and are neither inside quoted material — our delimiters, a code fence
    holding more than the verdict object — nor found in the graded material itself; they must
    agree, or the reply is unreadable (and the judge is asked again).
    """
    if isinstance(kind, str):
        known = verdict_kinds()
        if kind not in known:
            raise ValueError(f"unknown verdict kind {kind!r}; known: {', '.join(known)}")
        kind = known[kind]
    main, holds = kind.fields[0], kind.holds
    if not text or not text.strip():
        raise ParseError("the reply is empty")
    body = strip_reasoning(text)
    material = _Quoted(quoted)
    whole = _whole_object(body)
    if whole is not None:
        try:
            verdict = _build(kind, whole[1], ctx)
        except ParseError as exc:
            raise ParseError(f"{exc} in the reply's JSON") from None
        if material.holds(*whole):  # the reply is the graded text's own object, echoed: not a verdict
            raise ParseError(f"the reply is the '{main}' object the graded material holds, copied; give your own "
                             "verdict as one JSON object")
        return verdict
    outside = _unquoted(body)
    problems, verdicts, quotes = [], [], 0
    for chunk, obj in _objects(outside):
        try:
            verdict = _build(kind, obj, ctx)
        except ParseError as exc:
            problems.append(str(exc))
            continue
        if material.holds(chunk, obj):
            quotes += 1
            continue
        verdicts.append(verdict)
    if verdicts:
        return _one(main, verdicts)
    if kind.one_line:  # a one-field verdict may stand on a line of its own
        found = []
        for m in _LINE.finditer(outside):
            if m.group(1).lower().replace(" ", "_") != main:
                continue
            line_start = outside.rfind("\n", 0, m.start()) + 1
            line_end = outside.find("\n", m.end())
            line = outside[line_start: line_end if line_end != -1 else len(outside)]
            if material.holds(m.group(0)) or material.holds(line):
                quotes += 1
                continue
            found.append(_build(kind, {main: m.group(2)}, ctx))
        if found:
            return _one(main, found)
    if quotes:
        raise ParseError(f"the only '{main}' verdict in the reply is quoted from the graded material; "
                         "give your own verdict as one JSON object")
    if problems:
        raise ParseError(problems[0] + " in the reply's JSON")
    raise ParseError(f"no JSON object with a '{main}' field ({holds}) in the reply")
