"""The one place that talks to a judge model: litellm behind cache, limits, retries and a budget.

:meth:`JudgeClient.complete` sends one chat request and returns a :class:`Completion`, or raises
:class:`CallFailed` with a status (docs/metrics.md#how-to-read-a-value) (``timeout``, ``rate_limited``, ``api_error``) once its
retries are spent. It is the only retry layer: litellm is called with ``num_retries=0`` and
``max_retries=0`` (no retries inside litellm or the OpenAI SDK). Retries cover 429 (waiting at
least the ``Retry-After`` the server sent, and pausing every other request too), 5xx, connection
errors and timeouts, with exponential back-off and jitter. A rejected key (401/403) or an
unknown model (404) stops the run at once: retrying cannot fix them.

Before every request that is not in the cache, the :class:`Budget` checks that the spending so
far, plus what requests in flight may still cost, plus this request's worst case (its prompt
tokens and ``max_tokens`` of output, at the model's price) stays within ``max_cost_usd``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import random
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from ragexp.errors import ConfigError, CredentialsError, JudgeUnreachable
from ragexp.judge.errors import BadReply, BudgetStop, CacheError, CallFailed, Paused
from ragexp.judge.cache import CACHE_ERRORS, JudgeCache, cache_key
from ragexp.common.http import classify, connection_failed, retry_after, root_cause, short_error
from ragexp.common.secrets import env_secrets, redact_url, scrub
from ragexp.judge.loop import import_litellm, litellm_provider
from ragexp.judge.settings import JudgeSettings

log = logging.getLogger("ragexp.judge")


@functools.cache
def _quiet_litellm() -> Any:
    """litellm, imported once with its price map local and its per-request log lines off."""
    if not os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"):
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never fetch the price map at run time
    litellm = import_litellm()
    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)  # not one log line per request under Hydra's INFO logging
    return litellm


@functools.cache
def register_price(model: str, per_in: float, per_out: float) -> None:
    """Put a model that litellm's price map lacks into it, at the price the settings declare.

    litellm prices every response itself, whoever reads the figure; for a model missing from its
    map it searches the whole map for a near name on every call, about a fifth of its CPU per call
    against a fast local server (``benchmarks/bench_judge.py``). ragexp computes the cost from
    :class:`Prices` either way; this only spares litellm the search. Once per process, and never
    for a model the map knows.
    """
    litellm = _quiet_litellm()
    provider = litellm_provider(model)
    entry = {"input_cost_per_token": per_in, "output_cost_per_token": per_out, "mode": "chat",
             # prompt-cache reads and writes at the full input price (no discount declared)
             "cache_read_input_token_cost": per_in, "cache_creation_input_token_cost": per_in}
    if provider:
        entry["litellm_provider"] = provider
    litellm.register_model({model: entry})


#: Consecutive failed connections (refused, unknown host), over at least :data:`UNREACHABLE_SPAN` back-offs,
#: after which the judge counts as unreachable and the run stops with one line.
UNREACHABLE_AFTER = 8
UNREACHABLE_SPAN = 2
#: Consecutive timed-out requests, with no reply of any kind for twice ``timeout_s``, after which the
#: server counts as hanging (it accepts connections and never answers): no further request is sent, and
#: every verdict still to ask is recorded as ``timeout`` with that reason.
HANG_AFTER = 8
#: A warning line when requests wait this long (at most; ``timeout_s`` if shorter) without any reply.
STALL_WARN_S = 30.0


@dataclass
class Completion:
    text: str
    finish_reason: str | None
    tokens_in: int
    tokens_out: int
    cost_usd: float


#: the ``system_fingerprint`` of the replies of ``python -m ragexp.standin_judge``: a run that got them says its judge
#: numbers come from keyword rules, not a model (docs/judge.md)
STANDIN_FINGERPRINT = "fp_ragexp_standin"
STANDIN_NOTE = ("the judge's replies came from ragexp's scripted stand-in judge (keyword rules, not a model): its "
                "numbers show the machinery at work and measure nothing")


@dataclass
class Usage:
    """Counters of one run; :meth:`as_metrics` gives the ``judge/…`` keys of docs/tracking.md#what-a-run-leaves-in-mlflow."""

    calls: int = 0  # HTTP requests sent (retries included)
    answered: int = 0  # replies received (and cached, when the cache is on)
    retries: int = 0
    cache_hits: int = 0
    shared: int = 0  # verdicts asked once and reused by several metrics or samples in this run
    reasks: int = 0  # corrective re-asks after an unparseable reply
    structured_fallbacks: int = 0  # structured-output forms a server refused (judge.structured_output=auto)
    standin: int = 0  # replies from ragexp's stand-in judge (STANDIN_FINGERPRINT)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    failures: dict[str, int] = field(default_factory=dict)  # failed verdicts by status

    def fail(self, status: str) -> None:
        self.failures[status] = self.failures.get(status, 0) + 1

    def as_metrics(self) -> dict[str, float]:
        out = {
            "judge/calls": float(self.calls),
            "judge/cache_hits": float(self.cache_hits),
            "judge/tokens_in": float(self.tokens_in),
            "judge/tokens_out": float(self.tokens_out),
            "judge/cost_usd": float(self.cost_usd),
            "judge/failures": float(sum(self.failures.values())),
            "judge/retries": float(self.retries),
            "judge/reasks": float(self.reasks),
            "judge/shared_verdicts": float(self.shared),
        }
        if self.structured_fallbacks:
            out["judge/structured_output_fallbacks"] = float(self.structured_fallbacks)
        if self.standin:
            out["judge/standin_replies"] = float(self.standin)
        for status, n in sorted(self.failures.items()):
            out[f"judge/failures/{status}"] = float(n)
        return out


def _mapped_price(model: str) -> tuple[float, float] | None:
    """(USD per token in, out) from litellm's price map, or None for a model the map lacks."""
    litellm = _quiet_litellm()
    try:
        cin, _ = litellm.cost_per_token(model=model, prompt_tokens=1_000_000, completion_tokens=0)
        _, cout = litellm.cost_per_token(model=model, prompt_tokens=0, completion_tokens=1_000_000)
    except Exception:  # noqa: BLE001 - litellm raises a plain Exception for an unmapped model
        return None
    return cin / 1e6, cout / 1e6


class Prices:
    """US dollars per token in and out: the settings' override, else litellm's price map (``known``: either
    gave one). A declared price of a model the map lacks is registered there (:func:`register_price`)."""

    def __init__(self, settings: JudgeSettings):
        mapped = _mapped_price(settings.model)
        self.known = True
        if settings.cost_per_million_in is not None or settings.cost_per_million_out is not None:
            self.per_in = (settings.cost_per_million_in or 0.0) / 1e6
            self.per_out = (settings.cost_per_million_out or 0.0) / 1e6
            if mapped is None:
                register_price(settings.model, self.per_in, self.per_out)
        elif mapped is None:
            self.per_in = self.per_out = 0.0
            self.known = False
        else:
            self.per_in, self.per_out = mapped

    def cost(self, tokens_in: int, tokens_out: int) -> float:
        return tokens_in * self.per_in + tokens_out * self.per_out


class Budget:
    """Spending so far plus reservations of requests in flight, against ``max_cost_usd``."""

    def __init__(self, limit: float | None):
        self.limit = limit
        self.spent = 0.0
        self.reserved = 0.0
        self.stopped = False

    def reserve(self, worst_case: float) -> None:
        if self.limit is None:
            return
        if self.stopped or self.spent + self.reserved + worst_case > self.limit:
            self.stopped = True
            raise BudgetStop()
        self.reserved += worst_case

    def settle(self, reserved: float, actual: float) -> None:
        if self.limit is not None:
            self.reserved -= reserved
        self.spent += actual


#: The forms of structured output a server may take (docs/judge.md, "Structured output"):
#: OpenAI's ``json_schema`` (OpenAI, vLLM, llama.cpp's llama-server, Ollama) and llama-cpp-python's
#: ``{"type": "json_object", "schema": ...}``; ``text`` asks for none (the parser reads the reply).
FORMS = ("json_schema", "json_object_schema", "text")


def structured_forms(settings: JudgeSettings) -> list[str]:
    """The forms to try, in order: ``judge.structured_output`` (``auto`` = every form, falling back on a
    refusal), or for null what litellm knows of the model (``json_schema`` where it takes one, else text)."""
    v = settings.structured_output
    if v is None:
        litellm = _quiet_litellm()
        try:
            takes = bool(litellm.supports_response_schema(model=settings.model))
        except Exception:  # noqa: BLE001 - a model litellm cannot place: plain text, read by the parser
            takes = False
        return ["json_schema" if takes else "text"]
    if v == "auto":
        return list(FORMS)
    if v is True:
        return ["json_schema"]
    if v is False:
        return ["text"]
    return [v]


def response_format(form: str, kind: Any) -> dict[str, Any] | None:
    """The ``response_format`` of ``form`` asking for the JSON of ``kind`` (a
    :class:`~ragexp.metrics.judged.VerdictKind`: its name and schema); None for ``text``."""
    if form == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": f"ragexp_{kind.name}", "schema": kind.schema, "strict": True}}
    if form == "json_object_schema":
        return {"type": "json_object", "schema": kind.schema}
    return None


def refused_form(exc: BaseException) -> bool:
    """True when the server says it does not take this ``response_format``: a 400 or 422 naming it or
    ``json_schema``, or llama-cpp-python's 500 for its request validation ("'loc': ('body',
    'response_format', 'type'), 'msg': \"Input should be 'text' or 'json_object'\"")."""
    status = getattr(exc, "status_code", None)
    text = str(exc).lower()
    return status in (400, 422, 500) and ("response_format" in text or "json_schema" in text)


class RateLimiter:
    """Request starts spaced at least ``60 / requests_per_minute`` seconds apart (no bursts), and held, every
    one, until the moment a 429's ``Retry-After`` named (:meth:`pause`): the whole run backs off together.
    ``await limiter.acquire()`` before each request."""

    def __init__(self, requests_per_minute: float | None = None):
        self.interval = 60.0 / requests_per_minute if requests_per_minute else 0.0
        self._next = 0.0  # earliest start of the next request
        self._paused_until = 0.0
        self._lock: asyncio.Lock | None = None

    def pause(self, seconds: float) -> bool:
        """Hold new requests for ``seconds`` from now (a server said Retry-After); True when that moves the
        end of the pause later."""
        until = time.monotonic() + max(0.0, seconds)
        if until <= self._paused_until:
            return False
        self._paused_until = until
        return True

    def paused_for(self) -> float:
        """Seconds the current pause still holds requests (0 when none)."""
        return max(0.0, self._paused_until - time.monotonic())

    async def acquire(self, limit: float | None = None) -> None:
        """Wait for this request's turn. ``limit`` (a ``time.monotonic()`` moment): raise :class:`Paused` at once
        when a server's pause ends after it, instead of waiting for nothing."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:  # one waiter at a time keeps the spacing exact
            while True:
                now = time.monotonic()
                if limit is not None and self._paused_until > limit:
                    raise Paused(self._paused_until - now)
                start = max(now, self._next, self._paused_until)
                if start <= now:
                    break
                await asyncio.sleep(min(start - now, 1.0))  # a longer pause a later 429 sets is seen within 1 s
            self._next = time.monotonic() + self.interval


def reply_text(response: Any) -> tuple[str, str | None]:
    """(text, finish_reason) of a chat reply, or :class:`BadReply` naming what the reply lacked.

    >>> reply_text({"choices": []})
    Traceback (most recent call last):
    ...
    ragexp.judge.errors.BadReply: the judge's reply held no choices (an empty "choices" list)
    """
    choices = _field(response, "choices")
    if not choices:
        raise BadReply('the judge\'s reply held no choices (an empty "choices" list)'
                       if choices is not None else 'the judge\'s reply held no "choices"')
    choice = choices[0]
    finish = _field(choice, "finish_reason")
    message = _field(choice, "message")
    if message is None:
        raise BadReply(f"the judge's reply held a null message (finish_reason {finish!r})")
    content = _field(message, "content")
    calls = _field(message, "tool_calls") or _field(message, "function_call")
    if not content and calls:
        if not isinstance(calls, list):
            calls = [calls]
        names = sorted({str(_field(_field(c, "function") or c, "name") or "?")[:40] for c in calls})
        raise BadReply(f"the judge replied with tool calls ({', '.join(names)}) instead of text", retryable=False)
    if content is None:
        raise BadReply(f"the judge's reply message held no content (finish_reason {finish!r})")
    if not isinstance(content, str):  # a list of content parts: their texts, in order
        content = "".join(str(_field(part, "text") or "") for part in content) if isinstance(content, list) else str(content)
    return content, finish


def _field(obj: Any, name: str) -> Any:
    """``obj[name]`` of a dict, ``obj.name`` of litellm's response objects, None when absent."""
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


class JudgeClient:
    """Send chat requests for one run. Create it inside the event loop that will use it."""

    def __init__(self, settings: JudgeSettings, cache: JudgeCache | None, prices: Prices, usage: Usage,
                 budget: Budget, rng: random.Random | None = None):
        self.s = settings
        self.cache = cache
        self.prices = prices
        self.usage = usage
        self.budget = budget
        self.limiter = RateLimiter(settings.requests_per_minute)
        self.sem = asyncio.Semaphore(settings.max_concurrency)
        self.rng = rng or random.Random()
        self.fatal: Exception | None = None  # a rejected key or unknown model: no further request is sent
        self.refused = 0  # consecutive failed connections, across requests (reset by any reply)
        self.refused_since = 0.0  # when that streak began (time.monotonic())
        self.timeouts = 0  # consecutive requests that timed out, no reply between
        self.hung: str | None = None  # why no further request is sent to a server that never answers
        self.last_reply = time.monotonic()  # the last HTTP reply of any status
        self.in_flight = 0
        self.waiting = 0  # requests queued for a slot or the rate limiter's turn, or in flight
        self.waiting_since = 0.0  # when waiting last went from 0 to 1
        self._litellm = _quiet_litellm()
        self.forms = structured_forms(settings)  # the first is in use; a refusal moves to the next
        self.structured = self.forms[0] != "text"
        self._secrets: tuple[float, list[str]] | None = None  # (when read, the environment's secret values)

    def key(self, messages: list[dict[str, str]], prompt: str) -> str:
        if self.structured:  # a schema-constrained reply is another reply: cached apart
            prompt += "+schema"
        return cache_key(model=self.s.model, api_base=self.s.api_base, messages=messages,
                         temperature=self.s.temperature, seed=self.s.seed, max_tokens=self.s.max_tokens, prompt=prompt)

    def worst_case(self, messages: list[dict[str, str]]) -> float:
        """The most this request can cost: its prompt tokens and a full ``max_tokens`` reply."""
        if self.budget.limit is None:
            return 0.0
        try:
            n_in = self._litellm.token_counter(model=self.s.model, messages=messages)
        except Exception:  # noqa: BLE001 - no tokenizer for this model: a generous guess (≤ 1 token a byte / 3)
            n_in = sum(len((m.get("content") or "").encode()) for m in messages) // 3 + 8 * len(messages)
        return self.prices.cost(n_in, self.s.max_tokens)

    def backoff(self, attempt: int, retry_after: float | None) -> float:
        """Seconds before retry ``attempt`` (1-based): exponential with jitter, never under Retry-After."""
        cap = min(self.s.max_backoff_s, self.s.backoff_s * 2 ** (attempt - 1))
        delay = cap / 2 + self.rng.uniform(0, cap / 2)
        if retry_after is not None:
            delay = max(retry_after * (1 + self.rng.uniform(0, 0.1)), min(delay, retry_after + cap / 2))
        return delay

    def _cache_do(self, method: str, *args: Any, **kwargs: Any) -> Any:
        """``self.cache.<method>(...)``. A cache that stops answering mid-run (it was writable at the start:
        build_judge checks) — a full disk, a lost file, its PostgreSQL server gone — stops the run in one line."""
        try:
            return getattr(self.cache, method)(*args, **kwargs)
        except CACHE_ERRORS as exc:
            if isinstance(exc, CacheError):  # the PostgreSQL backend: its message names the server, no credentials
                fix = "every reply stored so far stays there: run again once it is back, or set judge.cache=false"
            else:
                fix = "set judge.cache_path=<a writable file> or judge.cache=false"
            self.fatal = self.fatal or ConfigError(
                f"judge cache {self.cache.path} stopped taking replies ({type(exc).__name__}: {exc}); {fix}")
            raise self.fatal from None

    def remember(self, key: str, reply: Completion) -> None:
        """Cache ``reply`` under ``key`` (a reply that parsed: never an unreadable one), its text scrubbed as the
        per-sample tables are (a key quoted in a reply never rests in the cache)."""
        if self.cache is not None:
            self._cache_do("put", key, model=self.s.model, text=scrub(reply.text, self._env_secrets()),
                           finish_reason=reply.finish_reason,
                           tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, cost_usd=reply.cost_usd)

    def _env_secrets(self) -> list[str]:
        """The environment's secret values for :func:`scrub`, read again at most once a second: reading them for
        every reply was about a tenth of the CPU a call costs (benchmarks/bench_generate.py)."""
        now = time.monotonic()
        if self._secrets is None or now - self._secrets[0] >= 1.0:
            self._secrets = (now, env_secrets())
        return self._secrets[1]

    def _unreachable(self, exc: BaseException) -> None:
        """Count a failed connection; after a short run of them (no reply between) stop every request."""
        now = time.monotonic()
        if self.refused == 0:
            self.refused_since = now
        self.refused += 1
        if self.refused >= UNREACHABLE_AFTER and now - self.refused_since >= self.outage_span():
            self.fatal = self.fatal or JudgeUnreachable(
                f"judge '{self.s.name}' cannot be reached at {self._where()}: {self.refused} connections in a row failed "
                f"over {now - self.refused_since:.1f} s ({short_error(root_cause(exc), 160)}); start the server or fix "
                "judge.api_base")

    def outage_span(self) -> float:
        """Seconds of failed connections after which the judge counts as unreachable: the shortest time one
        verdict's retries wait (half of each back-off cap: 7.5 s at the defaults), so that an outage shorter than
        that is retried as documented, never under :data:`UNREACHABLE_SPAN` first back-offs."""
        caps = (min(self.s.max_backoff_s, self.s.backoff_s * 2 ** i) / 2 for i in range(self.s.max_retries))
        return max(UNREACHABLE_SPAN * self.s.backoff_s, sum(caps))

    def _fall_back(self, sent: dict[str, Any], exc: BaseException) -> None:
        """The server refused the structured-output form in use: the next one, once for the run, recorded."""
        refused = "json_schema" if sent.get("type") == "json_schema" else "json_object_schema"
        if self.forms[0] == refused:  # not already moved on by another request's refusal
            self.forms.pop(0)
            self.usage.structured_fallbacks += 1
            log.warning("judge '%s': the server at %s refused structured output as %s (%s); using %s from now on "
                        "(set judge.structured_output=%s to skip the refusal)", self.s.name, self._where(), refused,
                        " ".join(str(exc).split(" - ", 1)[-1].split())[:300], self.forms[0], self.forms[0])

    def _where(self) -> str:
        return redact_url(self.s.api_base) if self.s.api_base else f"the {litellm_provider(self.s.model) or 'provider'} API"

    def _timed_out(self) -> None:
        """Count a request that timed out; after a run of them with no reply at all, the server is hanging."""
        self.timeouts += 1
        quiet = time.monotonic() - self.last_reply
        if self.hung is None and self.timeouts >= HANG_AFTER and quiet >= 2 * self.s.timeout_s:
            self.hung = (f"not asked: the judge at {self._where()} accepts connections but answered none of the last "
                         f"{self.timeouts} requests in {quiet:.0f} s (judge.timeout_s={self.s.timeout_s:g}); fix the "
                         "server and run again: only the missing verdicts are asked")
            log.warning("judge '%s': %s", self.s.name, self.hung[len("not asked: "):])

    def _replied(self) -> None:
        self.last_reply = time.monotonic()
        self.timeouts = 0

    async def watch(self) -> None:
        """Log one line whenever requests have waited :data:`STALL_WARN_S` (or half of ``timeout_s``: a request
        that times out and is sent again restarts the wait) without a reply."""
        stall = self.stall_s()
        told = 0.0
        while True:
            await asyncio.sleep(min(1.0, stall / 4))
            since = max(self.last_reply, self.waiting_since)
            if self.waiting and time.monotonic() - since >= stall and told < since:
                told = since
                paused = self.limiter.paused_for()
                held = f", held {paused:.0f} s more by the server's Retry-After" if paused else ""
                log.warning("judge '%s': no reply from %s for %.0f s with %d requests waiting (%d in flight%s; each "
                            "waits at most judge.timeout_s=%g s, a verdict at most judge.deadline_s=%g s)", self.s.name,
                            self._where(), time.monotonic() - since, self.waiting, self.in_flight, held,
                            self.s.timeout_s, self.s.deadline_s)

    def stall_s(self) -> float:
        """Seconds without a reply after which a wait is told in a line (:data:`STALL_WARN_S`, or half of
        ``timeout_s`` when that is shorter)."""
        return min(STALL_WARN_S, self.s.timeout_s / 2)

    def _paused(self, seconds: float) -> None:
        """A 429 asked every request to wait ``seconds``: a pause longer than the stall window is told in one line."""
        before = self.limiter.paused_for()  # a long pause already told: not told again when a sibling's 429 extends it
        if self.limiter.pause(seconds) and seconds >= self.stall_s() and before < self.stall_s():
            log.warning("judge '%s': the server at %s answered 429 asking to wait %.0f s (Retry-After); %d requests "
                        "held until then, a verdict whose judge.deadline_s=%g s ends first is recorded as rate_limited",
                        self.s.name, self._where(), seconds, self.waiting, self.s.deadline_s)

    async def complete(self, messages: list[dict[str, str]], prompt: str, key: str | None = None,
                       check: Callable[[str], Any] | None = None, schema: Any = None, sample: int = 0
                       ) -> Completion:
        """The reply to ``messages`` (``key``: their :meth:`key`, when the caller has it already), asked at most
        once across the processes sharing a PostgreSQL cache: while another job holds the question's claim (it
        is asking it now), this one waits for that reply instead of paying for it again (:meth:`_wait_for_claim`).

        ``schema``: the verdict kind whose JSON schema is asked for in the form in use (:func:`structured_forms`);
        ``sample``: the ``judge.samples`` index, added to the seed (the same question asked again).

        ``check(text)`` raises on a reply that cannot be used (it does not parse): such a reply is
        returned but never cached, and a cached one is ignored (asked again). Without ``check``
        nothing is cached: the caller does it with :meth:`remember` once the reply has parsed.
        """
        key = key or self.key(messages, prompt)
        if self.cache is None:
            return await self._ask(messages, key, check, schema, sample)
        hit = self._cached(key, check)
        if hit is None:  # looked for again once the claim is ours: the reply may have landed just before
            claimed = self._cache_do("try_claim", key)
            hit = self._cached(key, check) if claimed else await self._wait_for_claim(key, check)
        if hit is not None:
            return hit
        try:
            return await self._ask(messages, key, check, schema, sample)
        finally:
            self.cache.release(key)  # after the reply is stored: a waiting job finds it

    def _cached(self, key: str, check: Callable[[str], Any] | None) -> Completion | None:
        hit = self._cache_do("get", key)
        if hit is not None and _usable(check, hit["text"]):
            self.usage.cache_hits += 1
            return Completion(hit["text"], hit["finish_reason"], hit["tokens_in"], hit["tokens_out"], 0.0)
        return None

    async def _wait_for_claim(self, key: str, check: Callable[[str], Any] | None) -> Completion | None:
        """Another process is asking this question: its reply (a cache hit) once stored, or None when its
        claim ends without one (it failed, or died) or it takes longer than this judge's own retries would."""
        deadline = time.monotonic() + self.s.timeout_s * (self.s.max_retries + 1) * 1.5 + self.s.max_backoff_s
        while time.monotonic() < deadline:
            await asyncio.sleep(0.1 + self.rng.uniform(0, 0.1))
            hit = self._cached(key, check)
            if hit is not None:
                return hit
            if self._cache_do("try_claim", key):
                break  # ours now
        return self._cached(key, check)  # the reply may have landed just before

    async def _ask(self, messages: list[dict[str, str]], key: str, check: Callable[[str], Any] | None,
                   schema: Any, sample: int) -> Completion:
        """Send ``messages`` (with retries) and return the reply; see :meth:`complete`.

        One verdict's attempts, in named parts: :meth:`_open` (circuit breaking: a fatal error or a hanging
        server sends nothing more), :class:`Budget` (reserve, settle), :meth:`_send` (concurrency, rate limit,
        the verdict's deadline, the structured-output form), :meth:`_after_failure` (classification, circuit
        breaking, structured-output fallback, retry or give up) and :meth:`_received` (usage, budget, cache).
        """
        ask = _Attempts(self._request(messages, sample), self.worst_case(messages))
        while True:
            self._open()
            self.budget.reserve(ask.worst)
            ask.held = ask.worst
            try:
                return self._received(ask, await self._send(ask, schema), key, check)
            except (asyncio.CancelledError, KeyboardInterrupt, CallFailed):
                self._settle(ask, 0.0)
                raise
            except Exception as exc:  # noqa: BLE001 - every failure is classified by _after_failure
                self._settle(ask, 0.0)
                delay = self._after_failure(ask, exc)
                if delay is None:  # the same request in the next structured-output form: not a retry
                    continue
                log.debug("judge request failed (%s); retry %d in %.2f s", ask.last, ask.attempt + 1, delay)
                await asyncio.sleep(delay)
                ask.attempt += 1

    def _settle(self, ask: "_Attempts", cost: float) -> None:
        """The attempt's reservation against the budget, replaced by what it cost (once)."""
        if ask.held is not None:
            self.budget.settle(ask.held, cost)
            ask.held = None

    def _request(self, messages: list[dict[str, str]], sample: int) -> dict[str, Any]:
        """litellm's arguments for this verdict: no retries inside litellm or the OpenAI SDK."""
        kwargs: dict[str, Any] = dict(
            model=self.s.model, messages=messages, temperature=self.s.temperature, max_tokens=self.s.max_tokens,
            timeout=self.s.timeout_s, num_retries=0, max_retries=0, drop_params=True,
        )
        if self.s.seed is not None:
            kwargs["seed"] = self.s.seed + sample
        if self.s.api_base:
            kwargs["api_base"] = self.s.api_base
        api_key = self.s.api_key()
        if api_key:
            kwargs["api_key"] = api_key
        return kwargs

    def _open(self) -> None:
        """Circuit breaking: raise when no request may be sent (a rejected key, an unknown model, an unreachable
        or hanging server)."""
        if self.fatal is not None:
            raise self.fatal
        if self.hung is not None:
            raise CallFailed("timeout", self.hung)

    async def _send(self, ask: "_Attempts", schema: Any) -> Any:
        """One HTTP request: a concurrency slot, the rate limiter's turn, the timeout left by the verdict's deadline
        (which starts at its first request, queueing before it excluded) and the structured-output form in use."""
        kwargs = ask.kwargs
        if not self.waiting:
            self.waiting_since = time.monotonic()
        self.waiting += 1
        try:
            async with self.sem:
                try:  # a server's pause is waited for only when it ends within the verdict's deadline
                    await self.limiter.acquire(limit=ask.deadline or time.monotonic() + self.s.deadline_s)
                except Paused as p:
                    raise CallFailed("rate_limited", f"the server at {self._where()} asked every request to wait "
                                     f"{p.seconds:.0f} s more (429 Retry-After), past this verdict's judge.deadline_s="
                                     f"{self.s.deadline_s:g} s; run again later: only the missing verdicts are asked"
                                     + (f" (the last: {ask.last})" if ask.last else "")) from None
                self._open()  # a fatal error or a hang may have come while this request waited for its turn
                now = time.monotonic()
                ask.deadline = ask.deadline or now + self.s.deadline_s
                self.usage.calls += 1
                if ask.attempt:
                    self.usage.retries += 1
                kwargs["timeout"] = max(0.05, min(self.s.timeout_s, ask.deadline - now))
                form = response_format(self.forms[0], schema) if schema is not None else None
                kwargs.pop("response_format", None)
                if form is not None:
                    kwargs["response_format"] = form
                self.in_flight += 1
                try:
                    return await asyncio.wait_for(self._litellm.acompletion(**kwargs),
                                                  timeout=kwargs["timeout"] * 1.5 + 1)
                finally:
                    self.in_flight -= 1
        finally:
            self.waiting -= 1

    def _after_failure(self, ask: "_Attempts", exc: Exception) -> float | None:
        """What a failed request means: raise (fatal, or the verdict fails for good), None (ask again at once in
        the next structured-output form), or the seconds to wait before the next retry."""
        if exc is self.fatal:
            raise exc
        try:
            status, retryable = classify(exc)
        except (CredentialsError, ConfigError) as fatal:
            self.fatal = self.fatal or fatal
            raise self.fatal from None
        self._count(exc, status)
        kwargs = ask.kwargs
        if "response_format" in kwargs and refused_form(exc) and len(self.forms) > 1:
            self._fall_back(kwargs["response_format"], exc)
            return None
        ask.last = short_error(exc)
        wait_hint = retry_after(exc)
        if status == "rate_limited" and wait_hint is not None:
            self._paused(wait_hint)
        if not retryable or ask.attempt == self.s.max_retries:
            tries = f" after {ask.attempt + 1} attempts" if ask.attempt else ""
            raise CallFailed(status, f"{ask.last}{tries}") from None
        delay = self.backoff(ask.attempt + 1, wait_hint)
        if wait_hint is not None and time.monotonic() + wait_hint >= ask.deadline:
            raise CallFailed(status, f"the server asked to wait {wait_hint:.0f} s (Retry-After), past judge.deadline_s="
                                     f"{self.s.deadline_s:g} s ({ask.attempt + 1} attempts; the last: {ask.last}); run "
                                     "again later: only the missing verdicts are asked") from None
        if time.monotonic() + delay >= ask.deadline:
            raise CallFailed("timeout", f"no usable reply within judge.deadline_s={self.s.deadline_s:g} s "
                                        f"({ask.attempt + 1} attempts; the last: {ask.last})") from None
        return delay

    def _count(self, exc: BaseException, status: str) -> None:
        """Circuit breaking's counters: a failed connection, a timeout, or an error reply (the server is there)."""
        if connection_failed(exc):
            self._unreachable(exc)
            if self.fatal is not None:
                raise self.fatal from None
            return
        self.refused = 0
        if status == "timeout":
            self._timed_out()
        else:
            self._replied()  # an error status is a reply: the server is there

    def _received(self, ask: "_Attempts", response: Any, key: str, check: Callable[[str], Any] | None) -> Completion:
        """A reply: usage and budget settled from its token counts, cached when ``check`` says it is usable; a reply
        without a text to read (:func:`reply_text`) raises :class:`BadReply` after its tokens are counted."""
        self.refused = 0
        self._replied()
        u = _field(response, "usage")
        t_in, t_out = int(_field(u, "prompt_tokens") or 0), int(_field(u, "completion_tokens") or 0)
        cost = self.prices.cost(t_in, t_out)
        self._settle(ask, cost)
        self.usage.answered += 1
        self.usage.tokens_in += t_in
        self.usage.tokens_out += t_out
        self.usage.cost_usd += cost
        if _field(response, "system_fingerprint") == STANDIN_FINGERPRINT:
            self.usage.standin += 1
        text, finish = reply_text(response)
        reply = Completion(text, finish, t_in, t_out, cost)
        if check is not None and _usable(check, text):
            self.remember(key, reply)
        return reply


@dataclass
class _Attempts:
    """One verdict's requests: litellm's arguments, the worst-case cost reserved per attempt, the retry count,
    the deadline (set at the first request) and the last failure's text."""

    kwargs: dict[str, Any]
    worst: float
    attempt: int = 0
    deadline: float = 0.0
    last: str = ""
    held: float | None = None  # the budget reservation of the attempt under way


def _usable(check: Callable[[str], Any] | None, text: str) -> bool:
    if check is None:
        return True
    try:
        check(text)
    except ValueError:  # ParseError
        return False
    return True
