"""Writing and checking the questions through the judge's one client (:class:`ragexp.judge.client.JudgeClient`).

Every sampled item becomes one :class:`Candidate` whose ``outcome`` says how it ended: ``kept``, a filter
(``filtered:<reason>``), a failed call (``failed:<status>``: ``timeout``, ``rate_limited``, ``api_error``,
``parse_error``, as the judge metrics record them) or ``not_generated:budget`` when the judge's budget
stopped the run before its question was asked. Calls go through the judge's cache (a re-run asks nothing
already answered; an unreadable reply is never cached), its concurrency limit, rate limit, retries and
budget. Per item: one question call; then, unless a filter that needs no model already dropped it,
one answerability call with the gold passages alone (its verdict is recorded).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import gc
import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ragexp.judge.errors import BudgetStop, CallFailed
from ragexp.judge.client import Budget, JudgeClient, Usage
from ragexp.judge.loop import gather_watched, run_sync, shutdown
from ragexp.judge.errors import ParseError
from ragexp.judge.templates import load_prompt
from ragexp.testset import checks
from ragexp.testset.passages import Passage
from ragexp.testset.replies import ANSWERABLE_FORM, QUESTION_FORM, read_answerable, read_question

PROMPT_VERSION = "v1"

#: what each kind of question asks of the model (the prompt's ``instruction``)
INSTRUCTIONS = {
    "factoid": "Write one factual question whose answer is a short fact (a name, a number, a date, a term) "
               "stated in the passage.",
    "descriptive": "Write one question asking to describe or explain something the passage explains "
                   "(how, why, what happens); the answer is one or two sentences from the passage.",
    "multi": "Write one question that needs BOTH passages to answer: it combines a fact from the first "
             "passage with a fact from the second. Quote one evidence sentence from each passage.",
    "unanswerable": "Write one question on the same topic as the passage that the passage does NOT answer "
                    "(it asks for something the passage never states). Leave the answer empty and the "
                    "evidence empty.",
}


@dataclass
class Candidate:
    """One sampled item and how it ended."""

    index: int
    kind: str
    passages: list[Passage]
    outcome: str = "pending"
    detail: str = ""
    question: str = ""
    answer: str = ""
    evidence: list[str] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    language: str | None = None
    waits: bool = False  # asked once the run's side work is done (a multi item's partner passage)

    def drop(self, reason: str, detail: str = "") -> None:
        self.outcome, self.detail = f"filtered:{reason}", detail

    @property
    def answerable(self) -> bool:
        return self.kind != "unanswerable"

    @property
    def id(self) -> str:
        key = f"{self.kind}|{'|'.join(p.id for p in self.passages)}|{self.question}"
        h = hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()  # an id read with a lone surrogate
        return f"gen-{self.index:05d}-{h[:8]}"


@dataclass
class Limits:
    q_words: tuple[int, int] = (4, 40)
    a_max_words: int = 80


async def check_answerable(client: JudgeClient, contexts: list[str], question: str, usage: Usage
                           ) -> tuple[dict[str, Any] | None, str, str]:
    """The answerability filter's verdict on ``question`` from ``contexts`` alone: ``(verdict, "ok", "")`` or
    ``(None, status, detail)`` for a failed call or an unreadable reply."""
    ap = load_prompt("testset_answerable", PROMPT_VERSION)
    messages = ap.render(contexts=contexts, question=question)
    try:
        reply = await client.complete(messages, ap.id, check=read_answerable, schema=ANSWERABLE_FORM)
        return read_answerable(reply.text), "ok", ""
    except CallFailed as exc:
        usage.fail(exc.status)
        return None, exc.status, str(exc)[:300]
    except ParseError as exc:
        usage.fail("parse_error")
        return None, "parse_error", f"{exc}; reply: {reply.text[:200]!r}"


def answerability(judge: Any, items: list[tuple[list[str], str]]) -> tuple[list[tuple[dict | None, str, str]], Usage]:
    """:func:`check_answerable` on every ``(contexts, question)`` through the judge's client (its cache, limits and
    budget): the filter measured on its own, e.g. against people's labels (docs/testset.md, "How far to trust it")."""

    async def all_of() -> tuple[list[tuple[dict | None, str, str]], Usage]:
        usage = Usage()
        client = JudgeClient(judge.settings, judge.cache, judge.prices, usage, Budget(judge.settings.max_cost_usd))
        gate = asyncio.Semaphore(max(8, 4 * judge.settings.max_concurrency))

        async def one(contexts: list[str], question: str) -> tuple[dict | None, str, str]:
            async with gate:
                return await check_answerable(client, contexts, question, usage)

        return list(await asyncio.gather(*[one(c, q) for c, q in items])), usage

    try:
        return run_sync(all_of())
    except BaseException:
        shutdown()
        raise


async def _one(client: JudgeClient, c: Candidate, limits: Limits, usage: Usage) -> None:
    qp = load_prompt("testset_question", PROMPT_VERSION)
    contexts = [p.text for p in c.passages]
    messages = qp.render(contexts=contexts, instruction=INSTRUCTIONS[c.kind])
    try:
        reply = await client.complete(messages, qp.id, check=read_question, schema=QUESTION_FORM)
        got = read_question(reply.text)
    except CallFailed as exc:
        usage.fail(exc.status)
        c.outcome, c.detail = f"failed:{exc.status}", str(exc)[:300]
        return
    except ParseError as exc:
        usage.fail("parse_error")
        c.outcome, c.detail = "failed:parse_error", f"{exc}; reply: {reply.text[:200]!r}"
        return
    c.question, c.answer, c.evidence = got["question"], got["answer"], got["evidence"]
    # the filters that need no model, before paying for the answerability call
    if c.answerable and (said := checks.refusal(c.answer)):
        return c.drop("refusal", f"the reference says {said!r}")
    if why := checks.length(c.question, c.answer, limits.q_words, limits.a_max_words, c.answerable):
        return c.drop("length", why)
    c.language, why = checks.language(c.question, "\n".join(contexts))
    if why:
        return c.drop("language", why)
    c.verdict, status, detail = await check_answerable(client, contexts, c.question, usage)
    if c.verdict is None:
        c.outcome, c.detail = f"failed:{status}", f"answerability check: {detail}"
        return
    if c.verdict["answerable"] != c.answerable:
        return c.drop("answerability", "the check found it answerable from its passages" if not c.answerable
                      else "the check could not answer it from its gold passages alone")
    c.outcome = "generated"


#: seconds after which the side work of :func:`agenerate` starts though no reply came back yet (a slow judge)
SIDE_AFTER_S = 3.0


async def agenerate(judge: Any, candidates: list[Candidate], limits: Limits, progress: bool = False,
                    side: Callable[[], concurrent.futures.Future] | None = None) -> Usage:
    """Ask and check every candidate (in place) on the judge's client; the run's usage.

    ``side`` starts work to run beside the calls (in its own thread) and returns its future: it is started once the
    first reply is back (a cache hit, a failure, or :data:`SIDE_AFTER_S` seconds without one), so that its CPU falls
    in the wait for the other replies and not in litellm's first call, which must finish before any request leaves
    (docs/performance.md, "Test-set generation"); candidates that ``wait`` are asked after it is done, and its
    failure fails the run."""
    usage = Usage()
    budget = Budget(judge.settings.max_cost_usd)
    client = JudgeClient(judge.settings, judge.cache, judge.prices, usage, budget)
    gate = asyncio.Semaphore(max(8, 4 * judge.settings.max_concurrency))
    loop = asyncio.get_running_loop()
    side_done: asyncio.Future = loop.create_future()
    bar = None
    if progress:
        import sys

        from tqdm.auto import tqdm

        bar = tqdm(total=len(candidates), desc="generate", file=sys.stderr, leave=False, mininterval=0.5)

    async def beside() -> None:
        since, asks_first = loop.time(), any(not c.waits for c in candidates)  # else nothing is asked before it
        while (asks_first and not (usage.answered or usage.cache_hits or usage.failures)
               and loop.time() - since < SIDE_AFTER_S):
            await asyncio.sleep(0.01)
        try:
            side_done.set_result(await asyncio.wrap_future(side()))
        except BaseException as exc:
            side_done.set_exception(exc)
            side_done.exception()  # raised here; the items waiting for it raise it too
            raise

    async def guarded(c: Candidate) -> None:
        if c.waits and side is not None:
            await asyncio.shield(side_done)
        async with gate:
            if budget.stopped:
                c.outcome, c.detail = "not_generated:budget", "the judge's max_cost_usd was reached first"
                return
            try:
                await _one(client, c, limits, usage)
            except BudgetStop:
                if c.question:  # asked, but its check could not be paid for
                    c.outcome, c.detail = "not_generated:budget", "its answerability check would pass max_cost_usd"
                else:
                    c.outcome, c.detail = "not_generated:budget", "the judge's max_cost_usd was reached first"
            finally:
                if bar is not None:
                    bar.update(1)

    tasks = [asyncio.ensure_future(guarded(c)) for c in candidates]
    if side is not None:
        tasks.append(asyncio.ensure_future(beside()))
    await gather_watched(client, tasks, bar=bar)
    return usage


def generate(judge: Any, candidates: list[Candidate], limits: Limits, progress: bool = False,
             side: Callable[[], concurrent.futures.Future] | None = None) -> Usage:
    """:func:`agenerate` on the judge's own event loop (closed on every way out, as the judge metrics do)."""
    try:
        return run_sync(agenerate(judge, candidates, limits, progress, side))
    except BaseException:
        shutdown()
        raise


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """What exists on entry (litellm's 380,000 objects, the passages) frozen out of the garbage collector's full
    collections (:func:`gc.freeze`) until the exit, unless the caller froze some itself: each of them walked it
    all — over 800 calls 0.5 s of CPU against 0.2 s frozen, and 0.2–0.5 s in the BM25 round trip after
    (docs/performance.md, "Test-set generation")."""
    ours = gc.get_freeze_count() == 0
    if ours:
        gc.freeze()
    try:
        yield
    finally:
        if ours:
            gc.unfreeze()
