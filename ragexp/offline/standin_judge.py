"""``python -m ragexp.standin_judge``: a scripted stand-in for an LLM judge, to try the judge metrics
without a model or a key. It is NOT a judge: it derives each verdict from the prompt's delimited
material with keyword overlap rules, so its numbers say nothing about your system.

It is a real HTTP server on 127.0.0.1 that speaks the OpenAI chat-completions API, so ragexp's whole
judge path runs against it (litellm, the response schema, usage, errors, timeouts)::

    python -m ragexp.standin_judge --port 8000 &
    python -m ragexp metric=full judge=openai_compatible judge.api_base=http://127.0.0.1:8000/v1

The tests start it in a thread on a free port (``tests/judge_server.py``) and point litellm at it
(``model="openai/<name>"`` or ``"hosted_vllm/<name>"``, ``api_base=server.url``).

By default it answers like a careful judge would, deriving each verdict from the delimited
material in the prompt with keyword overlap (:func:`sensible`); a request whose ``response_format``
carries a JSON schema gets exactly one object with the schema's fields (``request.schema``). A verdict
without a rule of its own — a new judge metric's — is answered by one generic rule (:func:`generic`) on
the fields of that schema or, without one, of the reply form the prompt shows (:func:`reply_form`): a
new judge metric needs no edit here. A test changes that per request
with ``server.script = fn``: ``fn(request)`` returns a :class:`Reply` (a status, a text, a delay,
headers, a broken body…) or ``None`` for the sensible answer. ``request.attempt`` counts how many
times the same messages were sent before, so "fail the first try, then answer" is one line.

The server counts everything a test asserts on: ``calls``, ``in_flight`` and ``max_in_flight``
(calls overlapping in time), and the log of requests.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

from ragexp.common.text import keywords
from ragexp.judge.client import STANDIN_FINGERPRINT

UNANSWERABLE = "UNANSWERABLE"
#: what llama-cpp-python's OpenAI-compatible server refuses (it takes a schema as json_object + schema)
LLAMA_CPP_PYTHON = ("json_schema",)
_TAG = re.compile(r"<(\w+)((?: [^>]*)?)>\n?(.*?)\n?</\1>", re.S)
_SENTENCES = re.compile(r"[^.!?。！？;；\n]+")


@dataclass
class Request:
    """One chat-completions request as the server saw it."""

    body: dict[str, Any]
    attempt: int  # 0 the first time these exact messages arrive, 1 the second, …
    at: float = 0.0  # time.monotonic() on arrival

    @property
    def messages(self) -> list[dict[str, str]]:
        return self.body.get("messages", [])

    @property
    def user(self) -> str:
        return self.messages[-1]["content"] if self.messages else ""

    @property
    def first_user(self) -> str:
        users = [m["content"] for m in self.messages if m.get("role") == "user"]
        return users[0] if users else ""

    @property
    def reask(self) -> bool:
        """True for a corrective re-ask (the conversation already holds an assistant turn)."""
        return any(m.get("role") == "assistant" for m in self.messages)

    @property
    def task(self) -> str:
        return task_of(self.first_user)

    @property
    def form(self) -> str:
        """The structured-output form asked: ``json_schema`` (OpenAI), ``json_object_schema``
        (llama-cpp-python's ``{"type": "json_object", "schema": ...}``), ``json_object`` or ``text``."""
        rf = self.body.get("response_format") or {}
        if rf.get("type") == "json_object":
            return "json_object_schema" if rf.get("schema") else "json_object"
        return rf.get("type") or "text"

    @property
    def schema(self) -> dict[str, Any] | None:
        """The JSON schema the request's ``response_format`` asks the reply to follow, in either form, if any."""
        rf = self.body.get("response_format") or {}
        if rf.get("type") == "json_object":
            return rf.get("schema")
        if rf.get("type") != "json_schema":
            return None
        return (rf.get("json_schema") or {}).get("schema")


@dataclass
class Reply:
    """What the server sends back for one request."""

    text: str | None = None  # the assistant's content; None → the sensible verdict
    status: int = 200
    delay: float = 0.0  # seconds to wait before answering (longer than the client's timeout = a timeout)
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    raw: bytes | None = None  # a body sent as is (a broken JSON document)
    hang: bool = False  # accept the request and never answer (until the server stops)


def blocks(text: str) -> dict[str, list[str]]:
    """The delimited blocks of a prompt: tag name → contents, in order."""
    out: dict[str, list[str]] = {}
    for m in _TAG.finditer(text):
        out.setdefault(m.group(1), []).append(m.group(3))
    return out


#: the verdicts with a rule of their own in :func:`sensible`: the first key of the reply form → the task and the
#: blocks its rule reads. Any other verdict, or one whose prompt lacks those blocks, gets the generic rule.
TASKS = {"relevant": ("relevance", "question context"), "used": ("usage", "answer context"),
         "score": ("similarity", "question reference_answer answer"), "supported": ("support", "statement"),
         "fully_supported": ("full_support", "answer"), "questions": ("questions", "text"),
         "answers": ("answers", "text"), "question": ("testset_question", "context"),
         "answerable": ("testset_answerable", "question")}


def rule_of(user: str) -> str | None:
    """The task whose rule answers the prompt: the first key of its reply form names it (:data:`TASKS`), and
    the prompt holds the blocks the rule reads; None: the generic rule answers (:func:`generic`)."""
    keys = list(reply_form(user).get("properties", ())) or [""]
    task, reads = TASKS.get(keys[0], ("", ""))
    return task if task and set(reads.split()) <= set(blocks(user)) else None


def task_of(user: str) -> str:
    """Which verdict the prompt asks for: the task of its rule, else the first key of its reply form."""
    return rule_of(user) or next(iter(reply_form(user).get("properties", ())), "unknown")


def reply_form(user: str) -> dict[str, Any]:
    """The JSON schema of the reply form a prompt shows on its last line starting with ``{``: ``true or false`` is
    a boolean, ``"a" or "b"`` one of those strings, ``<integer from 0 to 5>`` a number in that range, any other
    string a string, ``[...]`` a list of what its first item is; ``{}`` without a form (tests/test_judge_new_metric.py).
    """
    tail = user[max(user.rfind("</"), 0):]
    line = next((x.strip() for x in reversed(tail.splitlines()) if x.strip().startswith("{")), "")
    line = _ENUM.sub(lambda m: json.dumps({"$": {"type": "string", "enum": re.findall(r'"([^"]*)"', m.group())}}),
                     line.replace("true or false", "true"))
    line = _NUMBER.sub(lambda m: json.dumps({"$": _number(m.group(1))}), line)
    try:
        form = json.loads(line)
    except ValueError:
        return {}
    return _schema(form) if isinstance(form, dict) else {}


_ENUM = re.compile(r'"[^"]*"(?:\s+or\s+"[^"]*")+')
_NUMBER = re.compile(r'(?<!")<([^<>"]*)>(?!")')


def _number(words: str) -> dict[str, Any]:
    nums = [float(n) for n in re.findall(r"-?\d+(?:\.\d+)?", words)]
    bounds = {"minimum": nums[0], "maximum": nums[-1]} if len(nums) > 1 else {}
    return {"type": "integer" if "integer" in words else "number", **bounds}


def _schema(value: Any) -> dict[str, Any]:
    if isinstance(value, list):
        return {"type": "array", "items": _schema(value[0] if value else "")}
    if isinstance(value, dict):
        return value["$"] if set(value) == {"$"} else {
            "type": "object", "properties": {k: _schema(v) for k, v in value.items()}}
    return {"type": {bool: "boolean", int: "integer", float: "number"}.get(type(value), "string")}


def _share(part: str, whole: str) -> float:
    kw = keywords(part)
    if not kw:
        return 0.0
    return len(kw & keywords(whole)) / len(kw)


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCES.findall(text) if s.strip() and keywords(s)]


def sensible(request: Request) -> dict[str, Any]:
    """A verdict a reasonable judge could give, derived from the prompt's delimited material only."""
    b = blocks(request.first_user)
    one = lambda name: b.get(name, [""])[0]  # noqa: E731
    task = rule_of(request.first_user)
    if task == "relevance":
        ok = bool(keywords(one("question")) & keywords(one("context")))
        return {"relevant": ok, "reason": "shares terms with the question" if ok else "off topic"}
    if task == "usage":
        ok = _share(one("context"), one("answer")) >= 0.3 or _share(one("answer"), one("context")) >= 0.5
        return {"used": ok, "reason": "the answer repeats it" if ok else "not reflected in the answer"}
    if task == "similarity":
        share = _share(one("reference_answer"), one("answer"))
        return {"score": round(5 * share), "reason": f"{share:.2f} of the reference's terms"}
    if task == "support":
        ok = _share(one("statement"), "\n".join(b.get("context", []))) >= 0.5
        return {"supported": ok, "reason": "stated in the context" if ok else "not in the context"}
    if task == "full_support":
        ctx = "\n".join(b.get("context", []))
        ok = all(_share(s, ctx) >= 0.5 for s in sentences(one("answer")))
        return {"fully_supported": ok, "reason": "every sentence is backed" if ok else "a sentence is not backed"}
    if task == "questions":
        terms = sorted(keywords(one("text")), key=lambda t: (-len(t), t))[:3]
        return {"questions": [{"key_info": t, "question": f"Which term is {t}?"} for t in terms]}
    if task == "answers":
        terms = [(re.search(r"Which term is (.+)\?", q) or ["", ""])[1] for q in b.get("question", [])]
        return {"answers": [t if t in keywords(one("text")) else UNANSWERABLE for t in terms]}
    if task == "testset_question":
        return testset_question(b.get("context", []), request.first_user)
    if task == "testset_answerable":
        ctx = "\n".join(b.get("context", []))
        q = keywords(one("question"), QUESTION_WORDS)
        ok = bool(q) and len(q & keywords(ctx)) / len(q) >= 0.6
        best = max(sentences(ctx), key=lambda s: len(q & keywords(s)), default="") if ok else ""
        return {"answerable": ok, "answer": best}
    form = reply_form(request.first_user)  # any other verdict: the generic rule, on the reply's fields
    schema = request.schema or form
    if not schema:
        return {"error": "unknown task"}
    props = {k: {**form.get("properties", {}).get(k, {}), **v} for k, v in schema.get("properties", {}).items()}
    found = [m.group(3) for m in _TAG.finditer(request.first_user)] or [""]
    return generic({"type": "object", "properties": props}, found[-1], "\n".join(found[:-1]))


def generic(spec: dict[str, Any], text: str, earlier: str, item: bool = False) -> Any:
    """The reply's fields (``spec``) from the share of ``text``'s terms (the prompt's last block) that ``earlier``
    (the blocks before it) holds: at least half gives true, an enum's first value (else its second); a number is
    that share of its range; a reason says the share; a list has one item per sentence of ``text``, each judged
    on its own (its text fields are the sentence).

    >>> spec = reply_form('{"grade": "pass" or "fail", "stars": <integer from 0 to 4>, "reason": "<why>"}')
    >>> generic(spec, "Paris in France", "France: Paris, Lyon")  # 2 of its 3 terms
    {'grade': 'pass', 'stars': 3, 'reason': '0.67 of its terms'}
    """
    share = _share(text, earlier)
    kind = spec.get("type")
    if "enum" in spec:
        return spec["enum"][0 if share >= 0.5 else min(1, len(spec["enum"]) - 1)]
    if kind in ("integer", "number"):
        low, high = spec.get("minimum", 0), spec.get("maximum", 1)
        return round(low + (high - low) * share) if kind == "integer" else low + (high - low) * share
    if kind == "array":
        return [generic(spec.get("items", {}), s, earlier, True) for s in sentences(text)]
    if kind == "object":
        return {k: generic(v, text, earlier, item) for k, v in spec.get("properties", {}).items()}
    return share >= 0.5 if kind == "boolean" else text if item else f"{share:.2f} of its terms"


#: words a question is made of whatever it asks about; the stand-in's answerability check leaves them out
QUESTION_WORDS = frozenset("what which who whom whose when where why how is are was were does do did the a an of about "
                           "said say word words completes complete both and in to".split())


def _gap(sentence: str) -> tuple[str, str]:
    """(a window of the sentence with one word blanked, that word): the word with a digit, else the longest."""
    words = sentence.split()
    plain = [re.sub(r"^\W+|\W+$", "", w) for w in words]
    cands = [i for i, w in enumerate(plain) if len(w) >= 4] or [max(range(len(words)), key=lambda i: len(plain[i]))]
    i = next((i for i in cands if any(ch.isdigit() for ch in plain[i])), max(cands, key=lambda i: (len(plain[i]), -i)))
    lo = max(0, i - 6)
    window = words[lo:i] + ["___"] + words[i + 1:i + 7]
    return " ".join(window), plain[i]


def testset_question(contexts: list[str], prompt: str) -> dict[str, Any]:
    """A question of the kind the prompt's instruction names, derived from the passages only (ragexp.generate)."""
    best = [max(sentences(c) or [c], key=lambda s: (len(keywords(s)), -len(s))) for c in contexts] or [""]
    if "BOTH passages" in prompt and len(best) > 1:
        (g1, a1), (g2, a2) = _gap(best[0]), _gap(best[1])
        return {"question": f'What words complete both "{g1}" and "{g2}"?', "answer": f"{a1}; {a2}",
                "evidence": best[:2]}
    if "does NOT answer" in prompt:
        term = max(keywords(best[0]), key=lambda t: (len(t), t), default="it")
        return {"question": f"Which {term} was recorded in 3021 on Neptune?", "answer": "", "evidence": []}
    if "describe or explain" in prompt:
        terms = sorted(keywords(best[0], QUESTION_WORDS), key=lambda t: (-len(t), t))[:4]
        return {"question": f"What is said about {' '.join(terms)}?", "answer": best[0], "evidence": [best[0]]}
    gap, answer = _gap(best[0])
    return {"question": f'What word completes "{gap}"?', "answer": answer, "evidence": [best[0]]}


def follow_schema(verdict: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """A verdict cut to what a JSON schema allows (its properties), as a server honouring it replies."""
    props = schema.get("properties", {})
    return {k: verdict.get(k, "" if props[k].get("type") == "string" else None) for k in props}


def completion_body(text: str, model: str, prompt_tokens: int, completion_tokens: int, finish_reason: str,
                    fingerprint: str = "fp_local") -> dict:
    return {
        "id": "chatcmpl-" + hashlib.sha1(text.encode()).hexdigest()[:12],
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": fingerprint,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "logprobs": None,
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    }


class JudgeServer:
    """``with JudgeServer() as s: ... s.url ...`` — a scripted OpenAI-compatible judge."""

    def __init__(self, *, latency: float = 0.0, script: Callable[[Request], Reply | None] | None = None,
                 port: int = 0, refuse: tuple[str, ...] = (), fingerprint: str = "fp_local"):
        self.latency = latency
        #: each reply's ``system_fingerprint``: the command's server says it is the stand-in (ragexp's report says so)
        self.fingerprint = fingerprint
        #: structured-output forms (:attr:`Request.form`) refused as llama-cpp-python's server refuses
        #: OpenAI's json_schema: a 500 naming response_format and the forms it takes (``LLAMA_CPP_PYTHON``)
        self.refuse = refuse
        self.port = port  # 0: a free port
        self.script = script
        self.lock = threading.Lock()
        self.calls = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.log: list[Request] = []
        self._seen: dict[str, int] = {}
        self._httpd: ThreadingHTTPServer | None = None
        self._stopping = threading.Event()  # releases hanging requests
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> "JudgeServer":
        server = self
        self._stopping.clear()

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no 40 ms delayed-ACK stalls on keep-alive connections

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length", 0))
                raw = self.rfile.read(length)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                    return
                server._handle(self, json.loads(raw))

            def _send(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(body)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self._headers_buffer.append(b"\r\n")
                    self.wfile.write(b"".join(self._headers_buffer) + body)  # one write: head and body
                    self._headers_buffer = []
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout): nothing to answer

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

        self._httpd = Server(("127.0.0.1", self.port), Handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None

    def __enter__(self) -> "JudgeServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._httpd is not None, "server not started"
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def reset(self) -> None:
        with self.lock:
            self.calls = 0
            self.max_in_flight = 0
            self.log.clear()

    def tasks(self) -> dict[str, int]:
        """How many requests of each task arrived."""
        out: dict[str, int] = {}
        for r in self.log:
            out[r.task] = out.get(r.task, 0) + 1
        return out

    # -- one request -----------------------------------------------------------------------
    def _handle(self, handler: Any, body: dict[str, Any]) -> None:
        key = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).hexdigest()
        with self.lock:
            attempt = self._seen.get(key, 0)
            self._seen[key] = attempt + 1
            self.calls += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            request = Request(body=body, attempt=attempt, at=time.monotonic())
            self.log.append(request)
        try:
            reply = (self.script(request) if self.script else None) or Reply()
            if request.form in self.refuse:  # as llama-cpp-python 0.3's server: a 500 for its request validation
                takes = " or ".join(repr(f) for f in ("text", "json_object", "json_schema")
                                    if f not in self.refuse and not (f == "json_object" and "json_object_schema" in self.refuse))
                reply = Reply(status=500, text=f"1 validation error: {{'type': 'literal_error', 'loc': ('body', "
                                               f"'response_format', 'type'), 'msg': \"Input should be {takes}\"}}")
            if reply.hang:
                self._stopping.wait()
                return
            delay = self.latency + reply.delay
            if delay:
                time.sleep(delay)
            if reply.raw is not None:
                handler._send(reply.status, reply.raw, reply.headers)
                return
            if reply.status != 200:
                err = {"error": {"message": reply.text or f"scripted status {reply.status}", "type": "scripted",
                                 "code": reply.status}}
                handler._send(reply.status, json.dumps(err).encode(), reply.headers)
                return
            if reply.text is not None:
                text = reply.text
            elif request.schema is not None:  # structured output asked: exactly one object, the schema's fields
                text = json.dumps(follow_schema(sensible(request), request.schema), ensure_ascii=False)
            else:
                text = json.dumps(sensible(request), ensure_ascii=False)
            prompt_chars = sum(len(m.get("content") or "") for m in request.messages)
            out = completion_body(text, body.get("model", "judge"), max(1, prompt_chars // 4), max(1, len(text) // 4),
                                  reply.finish_reason, self.fingerprint)
            handler._send(200, json.dumps(out).encode(), reply.headers)
        finally:
            with self.lock:
                self.in_flight -= 1


def main(argv: list[str] | None = None) -> None:
    """Serve the scripted stand-in judge on 127.0.0.1 until Ctrl-C: to try the judge metrics without a model
    or a key (its verdicts are keyword rules, not a model's: they measure nothing)."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ragexp.standin_judge", description=main.__doc__)
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    args = ap.parse_args(argv)
    try:
        server = JudgeServer(latency=args.latency, port=args.port, fingerprint=STANDIN_FINGERPRINT).start()
    except OSError as exc:  # a busy port, or one this user may not bind: one line, the usage exit code
        print(f"{ap.prog}: error: cannot listen on 127.0.0.1:{args.port}: {exc.strerror or exc}; "
              "choose another with --port N", file=sys.stderr)
        raise SystemExit(2) from None
    print(f"The scripted stand-in judge (keyword rules, not a model: for trying ragexp, its verdicts measure nothing) "
          f"is listening at {server.url}  (Ctrl-C stops it). Point ragexp at it with:\n"
          f"  python -m ragexp metric=full judge=openai_compatible judge.api_base={server.url}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
