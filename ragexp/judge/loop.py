"""The event loops the judge's HTTP calls run on, and what keeps them responsive.

With a fast server, a judge call is mostly litellm's own CPU (a few milliseconds), and every
call in flight on a loop waits behind the others' share of it. Three things here keep that wait
short; ``benchmarks/bench_judge.py`` measures them.

- :func:`run_sync` runs the judge on one private loop in a daemon thread (one per process), so
  ``Judge.score`` works the same from a script, a Hydra job, or a notebook whose loop is running.
- :class:`InlineSetupExecutor`: ``litellm.acompletion`` first builds the request in a
  synchronous function that it sends to the loop's default thread pool; for the providers in
  :data:`NATIVE_ASYNC` that function only builds the request and returns a coroutine (the HTTP
  happens when the loop awaits it), so the thread hop buys nothing and costs GIL hand-offs
  (up to ``sys.getswitchinterval()``, 5 ms) while the loop is busy with other calls' replies. Inside
  :func:`litellm_setup_inline` such jobs run inline; DNS lookups and every job of any other
  provider (one might do its HTTP right there) still go to threads.
- :func:`quiet_gc`: a full garbage collection walks every object in the process — some
  300,000 once litellm is imported, 430,000 with MLflow and pandas: ~150 ms during which no reply is
  read. While the judge runs, the objects that existed before it are left out of collections
  (``gc.freeze``), and put back afterwards (``gc.unfreeze``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import functools
import gc
import os
import socket
import sys
import threading
from typing import Any, Awaitable, Iterator

#: litellm providers whose ``acompletion`` setup job returns a coroutine without touching the network
#: (checked against litellm's code path for each: the job builds the request, the loop sends it).
NATIVE_ASYNC = frozenset({"openai", "hosted_vllm", "azure", "anthropic", "gemini", "ollama_chat", "ollama"})

_INLINE: contextvars.ContextVar[bool] = contextvars.ContextVar("ragexp_litellm_setup_inline", default=False)
_BLOCKING = (socket.getaddrinfo, socket.getnameinfo)


class InlineSetupExecutor(concurrent.futures.ThreadPoolExecutor):
    """A loop's default executor that runs litellm's request-building job inline when that is safe."""

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        if not _INLINE.get() or fn in _BLOCKING:
            return super().submit(fn, *args, **kwargs)
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, as a thread would
            future.set_exception(exc)
        return future


@functools.lru_cache(maxsize=64)
def litellm_provider(model: str, api_base: str | None = None) -> str | None:
    """The litellm provider a model name routes to (``hosted_vllm``, ``openai``…), None if litellm has none."""
    import litellm

    try:
        return litellm.get_llm_provider(model=model, api_base=api_base)[1]
    except Exception:  # noqa: BLE001 - an unknown model: litellm raises its own error when the call is made
        return None


@contextlib.contextmanager
def litellm_setup_inline(kwargs: dict[str, Any]) -> Iterator[None]:
    """Around one ``litellm.acompletion(**kwargs)``: inline its setup job if the provider is natively async."""
    token = _INLINE.set(litellm_provider(kwargs["model"], kwargs.get("api_base")) in NATIVE_ASYNC)
    try:
        yield
    finally:
        _INLINE.reset(token)


def new_loop() -> asyncio.AbstractEventLoop:
    """A fresh event loop whose default executor is an :class:`InlineSetupExecutor`."""
    loop = asyncio.new_event_loop()
    loop.set_default_executor(InlineSetupExecutor(thread_name_prefix="ragexp-judge-io"))
    return loop


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_PID: int | None = None
_THREAD: threading.Thread | None = None
_LOOP_LOCK = threading.Lock()
_AT_EXIT: list[int] = []  # pids that registered :func:`shutdown` with atexit


def background_loop() -> asyncio.AbstractEventLoop:
    """One long-lived loop in a daemon thread per process (re-made after a fork or a :func:`shutdown`)."""
    global _LOOP, _LOOP_PID, _THREAD
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP_PID != os.getpid() or _LOOP.is_closed():
            loop = new_loop()
            _THREAD = threading.Thread(target=loop.run_forever, name="ragexp-judge-loop", daemon=True)
            _THREAD.start()
            _LOOP, _LOOP_PID = loop, os.getpid()
            if os.getpid() not in _AT_EXIT:  # closed before the interpreter tears down, on any exit
                import atexit

                atexit.register(shutdown)
                _AT_EXIT.append(os.getpid())
        return _LOOP


#: Coroutine functions that end what a module keeps on the running loop (:func:`on_close`).
_CLOSERS: list[Any] = []


def on_close(closer: Any) -> None:
    """Have :func:`close_clients` await ``closer()`` on the loop it closes (once per function)."""
    if closer not in _CLOSERS:
        _CLOSERS.append(closer)


async def close_clients() -> None:
    """On the loop that used them: end its tasks, close its worker processes and litellm's HTTP clients.

    litellm keeps its clients (the OpenAI SDK's, httpx's, aiohttp's sessions) in a process-wide cache.
    Left to the garbage collector at interpreter exit, an aiohttp session's ``__del__`` can block on
    the import lock held by a thread the interpreter has already frozen, and the process never
    exits. Here they are closed while everything still runs, and the cache is emptied so that
    nothing is left for a ``__del__`` or a later loop.
    """
    me = asyncio.current_task()
    tasks = [t for t in asyncio.all_tasks() if t is not me and not t.done()]
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=2.0)
    for closer in list(_CLOSERS):  # the worker pools (registered by .workers: nothing here imports upward)
        with contextlib.suppress(Exception):
            await closer()
    litellm = sys.modules.get("litellm")
    if litellm is not None:
        cache = getattr(litellm, "in_memory_llm_clients_cache", None)
        for client in list(getattr(cache, "cache_dict", {}).values()):
            closer = getattr(client, "close", None)  # the OpenAI SDK's AsyncOpenAI
            if type(client).__name__.startswith("Async") and closer is not None and asyncio.iscoroutinefunction(closer):
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(closer(), 2.0)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(litellm.close_litellm_async_clients(), 5.0)  # httpx clients, aiohttp sessions
        if cache is not None:
            with contextlib.suppress(Exception):
                cache.flush_cache()
    await asyncio.sleep(0)  # let the closed transports run their connection_lost callbacks


def shutdown(timeout: float = 10.0) -> None:
    """Close the judge's HTTP clients and worker processes, stop its loop and join its thread.

    Idempotent, bounded by ``timeout`` seconds, and called on every way out: after an error or an
    interrupt in :meth:`~ragexp.judge.engine.Judge.score`, and at exit (atexit) after a success.
    The next ``score`` in the same process starts a fresh loop.
    """
    global _LOOP, _THREAD
    with _LOOP_LOCK:
        loop, thread = _LOOP, _THREAD
        if loop is None or _LOOP_PID != os.getpid():
            return
        _LOOP, _THREAD = None, None
    if loop.is_closed():
        return
    if loop.is_running():
        future = asyncio.run_coroutine_threadsafe(close_clients(), loop)
        try:
            future.result(timeout)
        except (Exception, concurrent.futures.TimeoutError):  # noqa: BLE001 - closing is best effort, and bounded
            future.cancel()
        with contextlib.suppress(RuntimeError):
            asyncio.run_coroutine_threadsafe(loop.shutdown_default_executor(), loop).result(timeout)
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout)
    if not loop.is_running():
        loop.close()


def run_sync(coro: Awaitable[Any]) -> Any:
    """Run a coroutine to completion on the judge's loop, from any thread, inside a running loop or not."""
    future = asyncio.run_coroutine_threadsafe(coro, background_loop())  # type: ignore[arg-type]
    try:
        return future.result()
    except KeyboardInterrupt:
        future.cancel()
        raise


_FROZEN = 0
_FROZEN_LOCK = threading.Lock()


@contextlib.contextmanager
def quiet_gc() -> Iterator[None]:
    """Leave the objects that exist now out of garbage collections until the block ends (re-entrant).

    >>> import gc
    >>> with quiet_gc():
    ...     gc.get_freeze_count() > 0
    True
    >>> gc.get_freeze_count()
    0
    """
    global _FROZEN
    with _FROZEN_LOCK:
        if _FROZEN == 0:
            gc.freeze()
        _FROZEN += 1
    try:
        yield
    finally:
        with _FROZEN_LOCK:
            _FROZEN -= 1
            if _FROZEN == 0:
                gc.unfreeze()
