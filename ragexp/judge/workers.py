"""Judge HTTP calls spread over worker processes (``judge.workers``), one event loop each.

With a fast local server the judge is bound by litellm's own CPU per call (a few milliseconds),
and one event loop runs on one core. With ``judge.workers: N > 1`` the parent keeps everything
that is state — planning, the cache, the budget, the retry layer, the rate limit, the
concurrency limit, usage — and only the ``litellm.acompletion`` call itself runs in one of N
long-lived child processes (``python -m ragexp.judge.workers``), chosen round-robin.

The protocol is length-prefixed pickles over the child's stdin/stdout; the child sends any stray
print of litellm to stderr. A child classifies its own failures (:func:`ragexp.common.http.classify`) and
sends back only plain values, so the parent's retry layer sees the same statuses, ``Retry-After``
and fatal errors (rejected key, unknown model) as in-process calls. A child exits when its stdin
closes, that is when the parent process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import pickle
import struct
import sys
import weakref
from typing import Any

from ragexp.common.http import RemoteFailure

_HEADER = struct.Struct("!I")


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEADER.pack(len(data)) + data


async def _read(reader: asyncio.StreamReader) -> Any:
    (n,) = _HEADER.unpack(await reader.readexactly(_HEADER.size))
    return pickle.loads(await reader.readexactly(n))


class _Worker:
    def __init__(self, proc: asyncio.subprocess.Process):
        self.proc = proc
        self.pending: dict[int, asyncio.Future] = {}
        self.ready: asyncio.Future = asyncio.get_running_loop().create_future()
        self.reader = asyncio.ensure_future(self._read_loop())

    async def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        try:
            hello = await _read(self.proc.stdout)
            self.ready.set_result(hello)
            while True:
                rid, result = await _read(self.proc.stdout)
                fut = self.pending.pop(rid, None)
                if fut is not None and not fut.done():
                    fut.set_result(result)
        except (asyncio.IncompleteReadError, ConnectionError, EOFError, pickle.UnpicklingError) as exc:
            gone = RuntimeError(f"judge worker process {self.proc.pid} exited ({type(exc).__name__})")
            if not self.ready.done():
                self.ready.set_exception(gone)
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(gone)
            self.pending.clear()

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None and not self.reader.done()


class WorkerPool:
    """N child processes serving ``litellm.acompletion`` for the event loop that created them."""

    def __init__(self, n: int):
        self.n = n
        self.workers: list[_Worker] = []
        self.ids = itertools.count()
        self.turn = itertools.count()
        self.lock = asyncio.Lock()

    async def start(self) -> None:
        async with self.lock:
            self.workers = [w for w in self.workers if w.alive]
            while len(self.workers) < self.n:
                proc = await asyncio.create_subprocess_exec(
                    sys.executable, "-m", "ragexp.judge.workers", stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
                self.workers.append(_Worker(proc))
            await asyncio.gather(*[w.ready for w in self.workers])  # litellm imported in every child

    async def acompletion(self, kwargs: dict[str, Any], teach: tuple[str, float, float] | None = None
                          ) -> tuple[str, str | None, int, int]:
        """(text, finish_reason, prompt tokens, completion tokens), or raise what the worker classified.

        ``teach``: a price to register in the worker's litellm first (:func:`.client.register_price`).
        """
        worker = self.workers[next(self.turn) % len(self.workers)]
        if not worker.alive:
            raise RuntimeError(f"judge worker process {worker.proc.pid} exited")
        rid = next(self.ids)
        fut = asyncio.get_running_loop().create_future()
        worker.pending[rid] = fut
        assert worker.proc.stdin is not None
        worker.proc.stdin.write(_frame((rid, kwargs, teach)))
        try:
            kind, *rest = await fut
        finally:
            worker.pending.pop(rid, None)
        if kind == "ok":
            return tuple(rest)  # type: ignore[return-value]
        if kind == "fatal":
            from ragexp.errors import ConfigError, CredentialsError

            cls, message = rest
            raise (CredentialsError if cls == "CredentialsError" else ConfigError)(message)
        raise RemoteFailure(*rest)


_POOLS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorkerPool]" = weakref.WeakKeyDictionary()


async def pool(n: int) -> WorkerPool:
    """The running loop's pool of ``n`` started workers (started once, kept for later runs)."""
    loop = asyncio.get_running_loop()
    p = _POOLS.get(loop)
    if p is None or p.n != n:
        from ragexp.judge.loop import on_close

        on_close(close_pools)  # the loop's shutdown ends the processes
        p = _POOLS[loop] = WorkerPool(n)
    if len(p.workers) < n or not all(w.alive for w in p.workers):
        await p.start()
    return p


async def close_pools(timeout: float = 3.0) -> None:
    """End the running loop's worker processes: close their stdin (they exit), kill any that lingers."""
    p = _POOLS.pop(asyncio.get_running_loop(), None)
    if p is None:
        return
    for w in p.workers:
        if w.proc.stdin is not None and not w.proc.stdin.is_closing():
            w.proc.stdin.close()
    for w in p.workers:
        try:
            await asyncio.wait_for(w.proc.wait(), timeout)
        except asyncio.TimeoutError:
            w.proc.kill()
            await w.proc.wait()
        w.reader.cancel()
        with contextlib.suppress(BaseException):
            await w.reader
        if w.proc.stdin is not None:
            with contextlib.suppress(Exception):
                await w.proc.stdin.wait_closed()
    p.workers.clear()


# -- the child ---------------------------------------------------------------------------------------

async def _serve() -> None:
    from ragexp.errors import ConfigError, CredentialsError
    from ragexp.common.http import classify, connection_failed, retry_after, short_error
    from ragexp.judge.calls import _quiet_litellm, acompletion

    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the parent ends us (stdin closes)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a print inside litellm must not corrupt the protocol
    sys.stdout = sys.stderr
    _quiet_litellm()  # imported before "ready": the parent starts its clock after that
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)

    def send(obj: Any) -> None:
        out.write(_frame(obj))
        out.flush()

    async def one(rid: int, kwargs: dict[str, Any], teach: tuple[str, float, float] | None) -> None:
        try:
            reply = await asyncio.wait_for(acompletion(kwargs, teach), timeout=float(kwargs["timeout"]) * 1.5 + 1)
            send((rid, ("ok", *reply)))
        except Exception as exc:  # noqa: BLE001 - every failure is classified and sent back
            try:
                status, retryable = classify(exc)
                send((rid, ("err", status, retryable, retry_after(exc), short_error(exc), connection_failed(exc))))
            except (CredentialsError, ConfigError) as fatal:
                send((rid, ("fatal", type(fatal).__name__, str(fatal))))

    send("ready")
    tasks: set[asyncio.Task] = set()
    while True:
        try:
            rid, kwargs, teach = await _read(reader)
        except asyncio.IncompleteReadError:
            break  # the parent closed our stdin: it is done or gone
        t = asyncio.ensure_future(one(rid, kwargs, teach))
        tasks.add(t)
        t.add_done_callback(tasks.discard)
    for t in tasks:
        t.cancel()
    if tasks:
        await asyncio.wait(tasks, timeout=1.0)
    from ragexp.judge.loop import close_clients

    await close_clients()  # this process's litellm clients, closed before the interpreter tears down
    transport.close()
    out.close()


if __name__ == "__main__":
    asyncio.run(_serve())
