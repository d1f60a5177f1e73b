"""Running the user's code (a traced app, a memory layer, their factories) so that nothing it does ends,
hangs or silences ragexp. Definitions: docs/guarantees.md, "Your code cannot stop ragexp".

How it runs, and why: each call of the user's object runs on **a daemon worker thread of this process** while
ragexp's main thread waits for it with a deadline. In-process, because the user's object keeps its state
between calls (a memory layer's store, an app's index) and MLflow traces what it does in the run's store
as it always has (the caller's context, with its open span, is copied into the worker). A call that misses its
deadline is left behind with its thread (a thread cannot be stopped): its result is dropped, the question gets
the status ``timeout``, the next call starts on a new worker. Threads the user's code starts from a call are daemon
threads too, so none of them keeps the process alive. The cost is two hand-overs between threads per call
(figure in docs/guarantees.md; benchmarks/bench_isolation.py).

Every way out of the user's code becomes an :class:`Outcome` (a call) or one :class:`ConfigError` line naming
the code (its import and its factory, exit status 2): an exception, ``sys.exit(n)``, any ``BaseException``,
a hang. Around every piece of user code, ragexp's ``sys.stdout``/``sys.stderr`` are put back if the code closed
or replaced them, and on the main thread its SIGTERM/SIGINT handlers and signal mask are put back if the code
changed them, so a SIGTERM still stops ragexp (saving what was paid for).

    >>> code = UserCode("my_app:build", timeout_s=5)
    >>> code.call(lambda q: q.upper(), "why").value
    'WHY'
    >>> import sys
    >>> print(code.call(sys.exit, 3).reason)
    SystemExit(3): the code called sys.exit(3)
    >>> import time
    >>> out = UserCode("slow", timeout_s=0.05).call(time.sleep, 2)
    >>> out.status, out.reason
    ('timeout', 'no answer within 0.05 s (left running in the background, its result dropped)')
"""

from __future__ import annotations

import contextvars
import io
import os
import queue
import signal
import sys
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any, Callable

from ragexp.errors import ConfigError, RagexpError

#: ``pipeline.timeout_s`` / ``memory_layer.timeout_s`` when not set: seconds one call may take
DEFAULT_TIMEOUT_S = 120.0
#: While the user's code runs longer than this, a line every this many seconds says what ragexp waits for
HEARTBEAT_S = 30.0
#: At most this much of a reason is kept (a traceback-sized message is cut)
MAX_REASON = 500
#: Non-daemon threads started by the user's code (seen new after it ran): the command does not wait for them
_LEFT: "weakref.WeakSet[threading.Thread]" = weakref.WeakSet()


def _note_threads(before: set[threading.Thread]) -> None:
    for thread in threading.enumerate():
        if thread not in before and not thread.daemon:
            _LEFT.add(thread)


@dataclass
class Outcome:
    """What one call of the user's code gave: ``status`` ``ok`` (``value`` is its return value), ``error``
    (it raised, or called ``sys.exit``) or ``timeout``; ``reason`` one line saying which (secrets redacted)."""

    value: Any = None
    status: str = "ok"
    reason: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def describe(exc: BaseException) -> str:
    """One line for what the user's code raised, secrets redacted.

    >>> describe(SystemExit(2)), describe(SystemExit()), describe(ValueError("no index"))
    ('SystemExit(2): the code called sys.exit(2)', 'SystemExit(None): the code called sys.exit()', 'ValueError: no index')
    >>> describe(SyntaxError("invalid syntax", ("app.py", 3, 1, "x = = 1")))
    'SyntaxError: invalid syntax (app.py, line 3)'
    """
    from ragexp.common.secrets import scrub

    if isinstance(exc, SystemExit):
        code = exc.code
        said = f"SystemExit({code!r}): the code called sys.exit({'' if code is None else repr(code)})"
    elif isinstance(exc, SyntaxError):
        said = f"SyntaxError: {exc.msg} ({exc.filename}, line {exc.lineno})"
    else:
        try:
            text = str(exc)
        except BaseException:  # noqa: BLE001 - a __str__ that raises is the user's too
            text = "(its message cannot be read)"
        said = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    said = " ".join(said.split())
    return scrub(said if len(said) <= MAX_REASON else said[: MAX_REASON - 1] + "…")


class _Streams:
    """``sys.stdout``/``sys.stderr`` (and ``sys.__stdout__``/``__stderr__``) as they were, put back afterwards:
    a stream the user's code replaced is restored, one it closed is reopened on the same file descriptor."""

    def __init__(self) -> None:
        self.saved = {name: getattr(sys, name) for name in ("stdout", "stderr", "__stdout__", "__stderr__")}

    @staticmethod
    def _closed(stream: Any) -> bool:
        try:
            return stream is not None and bool(stream.closed)
        except Exception:  # noqa: BLE001 - a stream without .closed: trust it
            return False

    @staticmethod
    def _reopen(fd: int, like: Any) -> Any:
        encoding = getattr(like, "encoding", None) or "utf-8"
        raw = io.open(fd, "wb", buffering=0, closefd=False)
        return io.TextIOWrapper(io.BufferedWriter(raw), encoding=encoding, errors="backslashreplace",
                                line_buffering=True, write_through=True)

    def restore(self) -> None:
        """Each stream as it was; one closed is reopened on its descriptor (1 or 2), ragexp's scrubbing stream
        kept as the same object (a progress bar holds it) with a fresh stream inside."""
        from ragexp.common.secrets import ScrubbingStream

        fresh: dict[int, Any] = {}
        for name, stream in self.saved.items():
            fd = 1 if "stdout" in name else 2
            if isinstance(stream, ScrubbingStream):
                if self._closed(stream._stream):
                    stream._stream = fresh.setdefault(fd, self._reopen(fd, stream._stream))
            elif self._closed(stream):
                stream = self.saved[name] = fresh.setdefault(fd, self._reopen(fd, stream))
            if getattr(sys, name) is not stream:
                setattr(sys, name, stream)


class _Signals:
    """On the main thread: ragexp's SIGTERM/SIGINT handlers and the signal mask, put back afterwards (a user's
    ``signal.signal(SIGTERM, SIG_IGN)`` or ``pthread_sigmask`` must not stop ragexp from stopping)."""

    NAMES = ("SIGTERM", "SIGINT")

    def __init__(self) -> None:
        self.main = threading.current_thread() is threading.main_thread()
        self.handlers = {n: signal.getsignal(getattr(signal, n)) for n in self.NAMES if hasattr(signal, n)} \
            if self.main else {}
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, []) if self.main and hasattr(signal, "pthread_sigmask") \
            else None

    def restore(self) -> None:
        if not self.main:
            return
        for name, handler in self.handlers.items():
            sig = getattr(signal, name)
            if handler is not None and signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)
        if self.mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


def _say(line: str) -> None:
    try:
        print(f"[ragexp] {line}", file=sys.stderr, flush=True)
    except Exception:  # noqa: BLE001 - a stream the user's code broke meanwhile: restored after the call
        pass


class _Heartbeat:
    """A line every :data:`HEARTBEAT_S` seconds while ``what`` is still running on the main thread."""

    def __init__(self, what: str, every: float = HEARTBEAT_S) -> None:
        self.what, self.every = what, every
        self.done = threading.Event()

    def __enter__(self) -> "_Heartbeat":
        t0 = time.monotonic()

        def beat() -> None:
            while not self.done.wait(self.every):
                _say(f"still waiting for {self.what}: {time.monotonic() - t0:.0f} s so far")

        threading.Thread(target=beat, name="ragexp-user-code-heartbeat", daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.done.set()


class _Worker:
    """A daemon thread running the jobs put in its queue one after the other; ``None`` ends it."""

    def __init__(self, name: str) -> None:
        self.jobs: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            job()


class UserCode:
    """The user's code named ``what`` (``my_app:build``; it names it in every line), called with a deadline.

    :meth:`call` runs one call on a worker thread and never raises for what the code did (an
    :class:`Outcome` instead); a SIGTERM or Ctrl-C that arrives meanwhile stops ragexp as usual.
    :meth:`build` runs a factory (or any set-up) on the calling thread, where the code may install signal
    handlers; a failure there is one :class:`ConfigError` line naming ``what`` (exit status 2).
    ``timeout_s``: seconds a call may take (None or 0: no limit; a line every 30 s still says it waits).
    """

    def __init__(self, what: str, timeout_s: float | None = DEFAULT_TIMEOUT_S, heartbeat_s: float = HEARTBEAT_S):
        if timeout_s is not None and (isinstance(timeout_s, bool) or not isinstance(timeout_s, (int, float))
                                      or timeout_s < 0):
            raise ConfigError(f"timeout_s of {what}: expected a number of seconds (0 or null: no limit), "
                              f"got {timeout_s!r}")
        self.what = what
        self.timeout_s = float(timeout_s) if timeout_s else None
        self.heartbeat_s = heartbeat_s
        self.timeouts = 0  # calls left behind, still running or not
        self._worker: _Worker | None = None
        self._free = threading.Lock()  # held while a call runs on self._worker

    def call(self, fn: Callable[..., Any], *args: Any, label: str = "", **kwargs: Any) -> Outcome:
        """``fn(*args, **kwargs)`` on this code's daemon worker thread (the caller's context variables copied:
        MLflow's open span is the parent of the code's spans), waited for up to ``timeout_s``. A worker whose
        call missed its deadline is left behind and the next call gets a new one; a call made while another
        is running (from another thread) gets a thread of its own. ``label`` names the call in the waiting
        lines (``question q17``)."""
        box: list[Outcome] = []
        done = threading.Event()
        context = contextvars.copy_context()
        streams = _Streams()
        before = set(threading.enumerate())

        def work() -> None:
            t0 = time.perf_counter()
            try:
                value = context.run(fn, *args, **kwargs)
                _note_threads(before)
                box.append(Outcome(value, "ok", "", time.perf_counter() - t0))
            except BaseException as exc:  # noqa: BLE001 - whatever the user's code raises is this call's status
                box.append(Outcome(None, "error", describe(exc), time.perf_counter() - t0))
            finally:
                done.set()

        mine = self._free.acquire(blocking=False)
        t0 = time.perf_counter()
        try:
            if mine and self._worker is None:
                self._worker = _Worker(f"ragexp-user-code {self.what}"[:60])
            worker = self._worker if mine else _Worker(f"ragexp-user-code {self.what}"[:60])
            worker.jobs.put(work)
            worker.jobs.put(None) if not mine else None  # a one-off worker ends after its call
            self._wait(done, t0, label)
        finally:  # a SIGTERM while waiting leaves the worker behind and goes on up
            if mine:
                if not done.is_set():  # still busy with the late call: it ends after it, the next call gets a new one
                    self._worker.jobs.put(None)
                    self._worker = None
                self._free.release()
            streams.restore()
        if box:
            return box[0]
        self.timeouts += 1
        return Outcome(None, "timeout", f"no answer within {self.timeout_s:g} s (left running in the background, "
                                        f"its result dropped)", time.perf_counter() - t0)

    def _wait(self, done: threading.Event, t0: float, label: str) -> None:
        while True:
            waited = time.perf_counter() - t0
            left = None if self.timeout_s is None else self.timeout_s - waited
            if left is not None and left <= 0:
                return
            step = self.heartbeat_s if left is None else min(left, self.heartbeat_s)
            if done.wait(step):
                return
            if left is None or left > step:
                _say(f"still waiting for {self.what}{f' ({label})' if label else ''}: "
                     f"{time.perf_counter() - t0:.0f} s so far"
                     f"{'' if self.timeout_s is None else f' (timeout_s={self.timeout_s:g})'}")

    def build(self, fn: Callable[..., Any], *args: Any, doing: str = "failed", **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on this thread; whatever it raises (but ragexp's own errors, SIGTERM and
        Ctrl-C) becomes ``ConfigError("<what> <doing>: <reason>")``. Streams and signal handlers put back."""
        streams, signals = _Streams(), _Signals()
        before = set(threading.enumerate())
        try:
            with _Heartbeat(self.what, self.heartbeat_s):
                return fn(*args, **kwargs)
        except (RagexpError, KeyboardInterrupt):  # ragexp's own line, a real Ctrl-C or SIGTERM (Terminated)
            raise
        except BaseException as exc:  # noqa: BLE001 - SystemExit, SyntaxError, any BaseException: one line
            raise ConfigError(f"{self.what} {doing}: {describe(exc)}") from None
        finally:
            streams.restore()
            signals.restore()
            _note_threads(before)


def end_without_waiting(status: Any, grace_s: float = 5.0) -> None:
    """Called by a command as it ends (``status``: its exit status, a ``SystemExit.code``): when a non-daemon
    thread the user's code started is still running, Python would wait for it forever; after ``grace_s``
    seconds one line names it and the process ends with ``status``. Nothing happens when there is none."""
    if not any(t.is_alive() for t in list(_LEFT)):
        return
    code = 0 if status is None else status if isinstance(status, int) else 1

    def watch() -> None:
        time.sleep(grace_s)
        alive = sorted(t.name for t in list(_LEFT) if t.is_alive())
        if not alive:
            return
        _say(f"the user's code left {len(alive)} thread(s) running ({', '.join(alive)[:200]}); ragexp ends "
             f"without waiting for them (exit status {code}, everything was saved)")
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - closed by the user's code: nothing left to flush
                pass
        os._exit(code)

    threading.Thread(target=watch, name="ragexp-exit-watch", daemon=True).start()


def die_with_parent(parent: int | None = None, every: float = 0.5) -> None:
    """In a forked worker (a scoring pool's; call it first thing in the pool's initializer): end when ``parent``,
    the process that forked it, is gone, even by ``kill -9``, instead of waiting for work for ever. A daemon
    thread compares ``os.getppid()`` with ``parent`` every ``every`` seconds; on Linux, when the main thread
    forked it, the kernel also kills it at once (``prctl(PR_SET_PDEATHSIG, SIGKILL)``: tied to the forking
    thread, so not used for a fork from another thread, which may end before the pool). ``parent`` None: the
    process's parent now."""
    parent = os.getppid() if parent is None else parent
    if threading.current_thread().name == "MainThread" and sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        except (OSError, AttributeError):  # no libc prctl here: the thread below does it
            pass
    if os.getppid() != parent:  # the parent died before this worker got here
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os._exit(1)

    threading.Thread(target=watch, name="ragexp-parent-watch", daemon=True).start()


def load(target: str, where: str) -> Any:
    """What ``module:name`` names, imported as :func:`ragexp.common.targets.resolve` does, with whatever the
    module does at import (``sys.exit``, a ``SyntaxError``, any exception) one line naming it: ``ConfigError``
    (exit status 2).

    >>> load("json:no_such", "pipeline.factory")
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: pipeline.factory: module 'json' has no attribute 'no_such'
    """
    from ragexp.common.targets import resolve

    return UserCode(f"{where} {target}", timeout_s=None).build(resolve, target, where, doing="could not be imported")


__all__ = ["DEFAULT_TIMEOUT_S", "Outcome", "UserCode", "describe", "die_with_parent", "end_without_waiting", "load"]
