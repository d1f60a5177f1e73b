"""The event loop the judge's HTTP calls run on, and how it is closed.

:func:`run_sync` runs the judge on one private loop in a daemon thread (one per process), so
``Judge.score`` works the same from a script, a Hydra job, or a notebook whose loop is running.
:func:`shutdown` closes litellm's HTTP clients on that loop on every way out (an error, Ctrl-C,
the interpreter's exit) and stops it.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import os
import sys
import threading
from typing import Any, Awaitable, Callable, Iterable

from ragexp.common.collector import collector_paused


def import_litellm() -> Any:
    """``import litellm`` with the garbage collector paused, then as it was. The import makes about 380,000
    objects, none of them garbage, and the collections it set off on the way (each walking every object made so
    far) were 0.6–0.8 s of its 3.3–3.4 s of CPU (docs/performance.md, "Test-set generation")."""
    if "litellm" not in sys.modules:
        with collector_paused():
            import litellm  # noqa: F401
    import litellm  # another thread's import under way: waits for it to end

    return litellm


@functools.lru_cache(maxsize=64)
def litellm_provider(model: str, api_base: str | None = None) -> str | None:
    """The litellm provider a model name routes to (``hosted_vllm``, ``openai``…), None if litellm has none."""
    litellm = import_litellm()
    try:
        return litellm.get_llm_provider(model=model, api_base=api_base)[1]
    except Exception:  # noqa: BLE001 - an unknown model: litellm raises its own error when the call is made
        return None


_LOOP: asyncio.AbstractEventLoop | None = None
_LOOP_PID: int | None = None
_THREAD: threading.Thread | None = None
_LOOP_LOCK = threading.Lock()


def background_loop() -> asyncio.AbstractEventLoop:
    """One long-lived loop in a daemon thread per process (re-made after a fork or a :func:`shutdown`)."""
    global _LOOP, _LOOP_PID, _THREAD
    with _LOOP_LOCK:
        if _LOOP is None or _LOOP_PID != os.getpid() or _LOOP.is_closed():
            if _LOOP_PID != os.getpid():  # this process's first loop: closed before the interpreter tears down
                atexit.register(shutdown)
            loop = asyncio.new_event_loop()
            _THREAD = threading.Thread(target=loop.run_forever, name="ragexp-judge-loop", daemon=True)
            _THREAD.start()
            _LOOP, _LOOP_PID = loop, os.getpid()
        return _LOOP


async def close_clients() -> None:
    """On the loop that used them: end its tasks and close litellm's HTTP clients.

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
    """Close the judge's HTTP clients, stop its loop and join its thread.

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


async def gather_watched(client: Any, tasks: list[asyncio.Future], *, bar: Any = None,
                         settle: Callable[[], Awaitable[Any]] | None = None,
                         also_cancel: Callable[[], Iterable[asyncio.Future]] = tuple,
                         tolerate: tuple[type[BaseException], ...] = ()) -> list[Any]:
    """Await every task with ``client``'s stall watcher on (a line when the server goes quiet); then
    ``settle()`` (requests still in flight finishing). An interruption cancels the tasks and
    ``also_cancel()``; the watcher and the progress ``bar`` are closed on every way out. The first
    exception a task ended with (but ``tolerate``'s) is raised once all are done; else the results."""
    watch = asyncio.ensure_future(client.watch())
    try:
        results = await asyncio.gather(*tasks, return_exceptions=True)
        if settle is not None:
            await settle()
    except BaseException:
        for t in [*tasks, *also_cancel()]:
            t.cancel()
        raise
    finally:
        watch.cancel()
        if bar is not None:
            bar.close()
    fatal = next((r for r in results if isinstance(r, BaseException) and not isinstance(r, tolerate)), None)
    if fatal is not None:
        raise fatal
    return results
