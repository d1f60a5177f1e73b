"""``python -m ragexp``: compose the config, run the evaluation, print one line on a user error."""

from __future__ import annotations

import atexit
import gc
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from ragexp.cli import run_app
from ragexp.cli.plugins import expose_plugins
from ragexp.common.paths import conf_dir
from ragexp.common.secrets import hide_overrides, scrub
from ragexp.common.files import exit_status
from ragexp.errors import GateFailed, RagexpError, Terminated
from ragexp.tracking.callbacks import close_parent
from ragexp.tracking.launch import LAUNCH_ENV, launch_id, new_launch_id
from ragexp.tracking.log import RunRecord, interrupt_report

# ${ragexp_launch_id:} in conf/config.yaml's output folders: unique per launch, the same in joblib's workers
OmegaConf.register_new_resolver("ragexp_launch_id", launch_id, replace=True)
# ${ragexp_conf_dir:} in --help (conf/hydra/help/ragexp.yaml): the folder of the YAML files this install reads
OmegaConf.register_new_resolver("ragexp_conf_dir", lambda: str(conf_dir()), replace=True)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _app(cfg: DictConfig) -> float | None:
    from ragexp.core.gate import floor_failures, read_gate
    from ragexp.results.gate_files import record_failures
    from ragexp.workflow.runner import run

    _handle_sigterm()  # again here: joblib's worker processes run jobs without main()
    _die_with_the_launcher()
    record = RunRecord()  # what was saved and logged, for an interrupt's line
    gc.unfreeze()  # what the previous job froze and has since let go (a sweep's per-job configs) is collected,
    gc.collect()  # then what is alive now (modules, caches) is never traversed again by
    gc.freeze()  # the collector during this job: docs/performance.md, "Sweeps"
    try:
        from ragexp.common.config_guard import check_interpolations

        check_interpolations(cfg)  # ${...} that would expand to gigabytes when the config is saved: refused now
        max_drop, floors = read_gate(cfg.get("gate"))  # a malformed gate fails before any work
        summary = run(cfg, record=record)
    except RagexpError as exc:
        print(f"ragexp: error: {scrub(str(exc))}", file=sys.stderr)
        close_parent(exc)  # a sweep this process launched ends here: its parent run FAILED with what stopped it
        sys.exit(exit_status(exc))  # 2, or 4 when the results could not be written (docs/errors.md)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: one line, no traceback
        _interrupted(exc, record)
    if max_drop:
        print("ragexp: gate.max_drop needs two runs (python -m ragexp.compare); this run checks gate.min only",
              file=sys.stderr)
    from ragexp.core.labels import trust_metrics  # gate.min.agreement.<metric>.kappa: docs/judge-trust.md

    failed = floor_failures({**summary["metrics"], **trust_metrics(summary)}, floors)
    for line in failed:
        print(line, file=sys.stderr)
    if failed:
        from hydra.core.hydra_config import HydraConfig

        job = HydraConfig.get()
        if str(job.mode) != "RunMode.MULTIRUN":
            raise GateFailed()
        record_failures(failed, Path(job.runtime.output_dir))  # the sweep exits 1 at its end
    return summary.get("objective")


_SIGTERM: list[int] = []  # set once a SIGTERM arrived (the judge turns the interrupt into its own)


def _on_sigterm(signum: int, frame: object) -> None:
    if _SIGTERM:  # a second SIGTERM while closing up: the default action, at once
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _SIGTERM.append(signum)
    _end_anyway()
    raise Terminated("SIGTERM")


#: Seconds a SIGTERM leaves the process to close its runs and say so before it ends anyway: unwinding a call
#: deep in a library (freeing a huge structure, a C call that ignores signals) must not keep it alive.
TERM_GRACE_S = 30.0


_ARMED: list[bool] = []  # the grace timer has started (once per process)
_ARM_LOCK = threading.Lock()


def _end_anyway(grace: float = TERM_GRACE_S) -> None:
    """After ``grace`` seconds, if the process is still there: its line and exit status 143, from a thread.
    Started once, by whichever sees the SIGTERM first: the handler, or :func:`_watch_sigterm`'s thread."""
    with _ARM_LOCK:
        if _ARMED:
            return
        _ARMED.append(True)

    def stop() -> None:
        try:
            doing = "still closing" if _SIGTERM else "busy in a call that does not see signals"
            sys.__stderr__.write(f"ragexp: terminated (SIGTERM); {doing} after {grace:g} s, stopped without "
                                 "finishing (a saved results folder can be logged with python -m "
                                 "ragexp.tracking.upload)\n")
            sys.__stderr__.flush()
        finally:
            os._exit(143)

    timer = threading.Timer(grace, stop)
    timer.daemon = True
    timer.start()


_WAKEUP: list[int] = []  # the pipe signal.set_wakeup_fd writes to (read end, write end), once set up


def _watch_sigterm() -> None:
    """Start the grace timer the moment SIGTERM arrives, not when the main thread next runs Python: Python's
    handler waits for a C call to return (SQLite's wait on a locked file, a long read), which can take minutes.
    Python's C-level handler writes each signal's number to a pipe (:func:`signal.set_wakeup_fd`) that a
    thread reads. A forked child (the scoring pool) drops the pipe, so its signals are its own. Plain file
    descriptors, not socket objects: they stay open to the end without a ResourceWarning at exit."""
    if _WAKEUP:
        return
    ours, theirs = os.pipe()
    os.set_blocking(theirs, False)
    try:
        old = signal.set_wakeup_fd(theirs, warn_on_full_buffer=False)
    except ValueError:  # not the main thread
        os.close(ours), os.close(theirs)
        return
    if old != -1:  # someone else's (an event loop's): leave it to them
        signal.set_wakeup_fd(old)
        os.close(ours), os.close(theirs)
        return
    _WAKEUP.extend((ours, theirs))
    os.register_at_fork(after_in_child=_drop_wakeup)

    def watch() -> None:
        while True:
            try:
                got = os.read(ours, 64)
            except OSError:
                return
            if not got:
                return
            if signal.SIGTERM in got:
                _end_anyway()

    threading.Thread(target=watch, name="ragexp-sigterm-watch", daemon=True).start()


def _drop_wakeup() -> None:
    try:
        signal.set_wakeup_fd(-1)
    except ValueError:
        pass


def _handle_sigterm() -> None:
    """SIGTERM (timeout, CI cancel, pre-emption) is handled like Ctrl-C: runs end FAILED with the reason."""
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave it to the process's owner
        return
    _watch_sigterm()


#: The pid of the ``python -m ragexp`` process that launched this one (joblib's workers inherit it).
LAUNCHER_ENV = "RAGEXP_LAUNCHER_PID"
_WATCHING: list[int] = []  # this worker's launcher, once its watch has started


def _die_with_the_launcher(every: float = 1.0, grace: float = 20.0) -> None:
    """In a worker process of a sweep (joblib's loky workers are the launcher's children): when the
    launcher dies (``kill -9``), the worker is stopped as by SIGTERM — its run closed FAILED — and ends
    ``grace`` seconds later at the latest, so no worker (nor loky's resource tracker, which waits for
    them) is left behind blocked."""
    launcher = os.environ.get(LAUNCHER_ENV)
    if _WATCHING or not launcher or launcher == str(os.getpid()) or str(os.getppid()) != launcher:
        return
    import time

    def watch() -> None:
        while os.getppid() == int(launcher):
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os._exit(143)

    _WATCHING.append(int(launcher))
    threading.Thread(target=watch, name="ragexp-launcher-watch", daemon=True).start()


def _interrupted(exc: BaseException, record: Any = None) -> None:
    """One line saying what stopped the run and what was logged; exit 130 (Ctrl-C) or 143 (SIGTERM)."""
    term = bool(_SIGTERM) or isinstance(exc, Terminated)
    said = f": {exc}" if str(exc) and not isinstance(exc, Terminated) else ""
    what = "terminated (SIGTERM)" if term else "interrupted"
    print(scrub(f"ragexp: {what}{said}. {interrupt_report(record)}"), file=sys.stderr)
    close_parent(Terminated("SIGTERM") if _SIGTERM else exc)
    sys.exit(143 if term else 130)


def _warn_typed_secrets(argv: list[str]) -> None:
    """Once, on stderr: overrides typed on the command line that hold a secret (shown redacted)."""
    held = [scrub(a) for a in argv if "=" in a and not a.startswith("-") and scrub(a) != a]
    if held:
        print(f"ragexp: warning: {' '.join(held)}: this command line holds a secret. ragexp redacts it in "
              "everything it writes and logs (MLflow, the results, Hydra's .hydra/*.yaml and multirun.yaml, "
              "rewritten as each job starts, and its log lines), but your shell history keeps it: put it in "
              "an environment variable instead (a judge reads its key from the one judge.api_key_env names)",
              file=sys.stderr)


def main() -> None:
    os.environ[LAUNCH_ENV] = new_launch_id()  # this launch's own, never one inherited from a parent ragexp
    os.environ[LAUNCHER_ENV] = str(os.getpid())
    _warn_typed_secrets(sys.argv[1:])
    _handle_sigterm()
    try:  # a --config-dir file whose aliases would expand to millions of values: refused before Hydra reads it
        from ragexp.common.config_guard import check_config_dirs

        check_config_dirs(sys.argv[1:])
    except RagexpError as exc:
        print(f"ragexp: error: {scrub(str(exc))}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:  # SIGTERM or Ctrl-C while a big config file is checked: its line
        _interrupted(exc)
    sys.argv[1:] = hide_overrides(sys.argv[1:])  # a typed secret reaches Hydra, its files and job pickles by name only
    _handle_sigterm()
    atexit.register(gc.freeze)  # at exit (after the handlers registered later): no last collection of the heap
    expose_plugins()  # hydra/launcher=ray from an editable install too
    run_app(_app, on_interrupt=_interrupted)


if __name__ == "__main__":
    main()
