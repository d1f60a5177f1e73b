"""A run's MLflow work in a helper process, started as the command starts, so it overlaps the run.

Importing MLflow and opening its store take 1.5–2.5 s here, longer than the demo run's own work.
``python -m ragexp`` starts ``python -m ragexp.tracking.background`` before it composes the config
(:func:`prestart`); the helper imports MLflow while this process loads the records and computes
the metrics. :func:`check_store` runs the store checks that need no MLflow at once (one line if the
store cannot take runs) and hands the MLflow half (open, create the experiment, close orphaned runs)
to the helper; when the standard library cannot vouch for the store, it waits for that answer
before any work, as :func:`ragexp.tracking.store.check_store` does. :func:`log_run` hands the saved
results folder to the helper and waits until the run is logged: when the command returns, the run
is in the store, or the usual one line says why not and how to log the folder later.

Without a helper (it could not start, or died) both fall back to doing the work in this process.
The helper reads one JSON request a line on stdin and answers one JSON line on stdout; it ignores
Ctrl-C (the terminal sends it to the whole process group) and is told by this process instead.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Set to 1 to do the MLflow work in the run's own process (no helper).
OFF_ENV = "RAGEXP_NO_HELPER"


class _Helper:
    """The parent's handle on one helper process."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "ragexp.tracking.background"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=None, close_fds=True)
        self.buffer = b""
        self.owed: list[str] = []  # requests sent whose answer is not read yet, oldest first
        self.checked: dict[tuple[str, str], dict[str, Any]] = {}  # (uri, experiment) → its check's answer

    def send(self, request: dict[str, Any]) -> bool:
        request = {**request, "env": dict(os.environ), "http": _http_bounds()}
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
        except (OSError, ValueError):
            return False
        self.owed.append(request["op"])
        return True

    def receive(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next answer; None if the helper is gone (or ``timeout`` seconds passed)."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.buffer:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.owed.pop(0)
        return json.loads(line)

    def stop(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait(timeout=5)
        except (OSError, subprocess.SubprocessError):
            pass
        for pipe in (self.proc.stdin, self.proc.stdout):  # closed here, not left to the garbage collector
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass


_HELPERS: list[_Helper] = []


def _http_bounds() -> dict[str, str]:
    from ragexp.tracking.store import HTTP_BOUNDS

    return dict(HTTP_BOUNDS)


def prestart() -> None:
    """Start the helper now (if none runs), so MLflow is imported while this process works."""
    if _HELPERS or os.environ.get(OFF_ENV, "") not in ("", "0"):
        return
    try:
        _HELPERS.append(_Helper())
    except OSError:
        return
    import atexit

    atexit.register(_stop_all)


def _stop_all() -> None:
    """At exit: a store check under way is let finish (bounded), so the store and the experiment exist
    as they would have, whatever ended the run early, and it is never cut off in the middle of
    creating the schema; an idle helper is simply stopped."""
    while _HELPERS:
        helper = _HELPERS.pop()
        if "check" in helper.owed:
            try:
                assert helper.proc.stdin is not None
                helper.proc.stdin.close()
                answer = helper.receive(timeout=30)
                if answer is not None and answer.get("closed"):
                    from ragexp.tracking.store import say_closed

                    say_closed([(r, p) for r, p in answer["closed"]])
            except (OSError, ValueError, KeyboardInterrupt):
                pass
        helper.stop()


def _helper() -> _Helper | None:
    if _HELPERS and _HELPERS[0].proc.poll() is not None:  # it died: work in this process from now on
        _HELPERS.pop().stop()
        return None
    return _HELPERS[0] if _HELPERS else None


def _gone() -> None:
    if _HELPERS:
        _HELPERS.pop().stop()


def _read_owed(helper: _Helper, op: str) -> dict[str, Any] | None:
    """Answers are read in order: skip to the answer of the oldest outstanding ``op``."""
    while helper.owed:
        first = helper.owed[0]
        answer = helper.receive()
        if answer is None:
            _gone()
            return None
        if first == op:
            return answer
    return None


def _read_or_interrupt(helper: _Helper, op: str) -> dict[str, Any] | None:
    """:func:`_read_owed`; a Ctrl-C or SIGTERM that arrives while waiting is passed on to the helper first."""
    try:
        return _read_owed(helper, op)
    except KeyboardInterrupt as exc:
        from ragexp.errors import Terminated

        _interrupt(helper, signal.SIGTERM if isinstance(exc, Terminated) else signal.SIGUSR1)
        raise


def check_store(uri: str, experiment: str) -> None:
    """Before any work: the store can take runs (as :func:`ragexp.tracking.store.check_store`).

    The checks that need no MLflow run here, at once; the MLflow half runs in the helper. Its answer
    is awaited now when the standard library cannot vouch for the store, else at :func:`log_run`.
    """
    from ragexp.tracking import store

    store.check_store_cheaply(uri)
    helper = _helper()
    if helper is None or not helper.send({"op": "check", "uri": uri, "experiment": experiment}):
        _gone()
        store.check_store(uri, experiment)
        return
    if not store.vouched(uri, experiment):
        _settle_check(helper, uri, experiment, None)


def _settle_check(helper: _Helper, uri: str, experiment: str, folder: Path | None) -> bool:
    """Read the helper's answer to the store check; raise its one line if the store was refused.
    False if the helper is gone (the caller then works in this process)."""
    from ragexp.errors import TrackingError
    from ragexp.tracking.store import say_closed

    answer = _read_or_interrupt(helper, "check")  # Ctrl-C or SIGTERM while MLflow's half of the check runs
    if answer is None:
        if folder is None:
            from ragexp.tracking.store import check_store as in_process

            in_process(uri, experiment)
        return False
    helper.checked[(uri, experiment)] = answer
    if "error" in answer:
        if folder is None:
            raise TrackingError(answer["error"])
        from ragexp.tracking.log import where_saved

        raise TrackingError(f"{answer['error']}; {where_saved(folder)}")
    say_closed([(r, p) for r, p in answer.get("closed", [])])
    return True


def log_run(folder: Path, *, uri: str | None = None) -> tuple[str, str]:
    """Log a saved results folder as :func:`ragexp.tracking.log.log_run` does, through the helper;
    returns ``(run_id, uri)`` once the run is logged."""
    from ragexp.tracking import log
    from ragexp.errors import TrackingError

    helper = _helper()
    if helper is None or "check" not in helper.owed and not helper.checked:
        _gone()
        return log.log_run(folder, uri=uri)  # no helper, or it was never asked to check this store
    folder = Path(folder).resolve()
    manifest = json.loads((folder / log.MANIFEST_FILE).read_text())
    uri = uri or manifest["tracking_uri"]
    if "check" in helper.owed and not _settle_check(helper, uri, manifest["experiment"], folder):
        return log.log_run(folder, uri=uri)
    if not helper.send({"op": "log", "folder": str(folder), "uri": uri}):
        _gone()
        return log.log_run(folder, uri=uri)
    answer = _read_or_interrupt(helper, "log")  # Ctrl-C or SIGTERM while the helper logs: it closes the run FAILED
    if answer is None:  # the helper died: log here (a run it had opened is closed later as orphaned)
        return log.log_run(folder, uri=uri)
    log.CLOSED.extend(answer.get("closed", []))
    if "error" in answer:
        raise TrackingError(answer["error"])
    if "interrupted" in answer:  # a signal reached the helper alone (this process was not interrupted)
        _gone()
        raise TrackingError(f"the process logging the run was {answer['interrupted']}; {log.where_saved(folder)}")
    log.LOGGED.append((answer["run_id"], answer["uri"]))
    return answer["run_id"], answer["uri"]


def _interrupt(helper: _Helper, signum: int) -> None:
    """Pass an interrupt on to the helper and wait (bounded) for it to close its run FAILED."""
    from ragexp.tracking import log

    try:
        helper.proc.send_signal(signum)
        answer = helper.receive(timeout=20)
    except (OSError, KeyboardInterrupt):
        answer = None
    if answer is not None:
        log.CLOSED.extend(answer.get("closed", []))
    _gone()


# --- the helper's side ---------------------------------------------------------------------------------


def _on_signal(signum: int, frame: object) -> None:
    from ragexp.errors import Terminated

    if signum == signal.SIGTERM:
        raise Terminated("SIGTERM")
    raise KeyboardInterrupt


def _answer(request: dict[str, Any]) -> dict[str, Any]:
    from ragexp.errors import RagexpError
    from ragexp.tracking import log, store

    os.environ.clear()
    os.environ.update(request.get("env") or {})  # the run's environment as it is now
    store.HTTP_BOUNDS.update(request.get("http") or {})
    if request["op"] == "check":
        try:
            with store.bounded_http():
                _, _, closed = store.open_store(request["uri"], request["experiment"])
        except RagexpError as exc:
            return {"error": str(exc)}
        except Exception as exc:  # noqa: BLE001 - the parent needs one line
            return {"error": f"tracking store {request['uri']} cannot be opened: {store.first_line(exc)}"}
        return {"closed": closed}
    if request["op"] == "log":
        before = len(log.CLOSED)
        try:
            run_id, uri = log.log_run(Path(request["folder"]), uri=request.get("uri"))
        except RagexpError as exc:
            return {"error": str(exc), "closed": log.CLOSED[before:]}
        except KeyboardInterrupt as exc:
            return {"interrupted": log.interrupt_reason(exc), "closed": log.CLOSED[before:]}
        return {"run_id": run_id, "uri": uri}
    return {"error": f"unknown request {request['op']!r}"}


def _serve() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what a Ctrl-C means here
    signal.signal(signal.SIGUSR1, _on_signal)  # ... and passes it on as SIGUSR1 while a run is logged
    signal.signal(signal.SIGTERM, _on_signal)
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever else writes to stdout goes to stderr, not into the answers
    from ragexp.common.secrets import ScrubbingStream

    sys.stdout = sys.stderr = ScrubbingStream(sys.__stderr__)
    # the point of this process: what logging a run imports, imported while the run works
    import mlflow  # noqa: F401
    import mlflow.data.pandas_dataset  # noqa: F401 - the dataset input's entity
    import yaml  # noqa: F401 - the redacted .hydra/ copy
    from mlflow.entities import Dataset, DatasetInput, InputTag, Metric, Param  # noqa: F401
    from mlflow.store.tracking import sqlalchemy_store  # noqa: F401 - the SQLite store's module

    try:
        for line in sys.stdin:
            if line.strip():
                replies.write(json.dumps(_answer(json.loads(line))) + "\n")
    finally:  # closed here, not left to the interpreter's exit (a ResourceWarning there, after the run's last line)
        try:
            replies.close()
        except OSError:  # the parent is gone: nothing left to flush to
            pass


if __name__ == "__main__":
    try:
        _serve()
    except (KeyboardInterrupt, BrokenPipeError):  # stopped by the parent, or the parent is gone
        os._exit(0)
