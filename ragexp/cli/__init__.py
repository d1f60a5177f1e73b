"""The command lines: ``python -m ragexp`` (:mod:`ragexp.cli.run`), ``python -m ragexp.compare``
and ``python -m ragexp.ui``. Each top-level module of that name is a thin entry point here."""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any, Callable, Sequence
from ragexp.errors import GateFailed, RagexpError, RenamedKeyWarning, config_error_line

_GATE_ARG = re.compile(r"^gate\.(min|max_drop)\.[^=]+=")


def add_override_prefix(argv: Sequence[str]) -> list[str]:
    """``gate.min.<key>=v`` / ``gate.max_drop.<key>=v`` → ``++gate...``: Hydra's add-or-set.

    The default gate declares no key, and Hydra refuses to set an undeclared key without ``+``;
    ``++`` sets it either way, so ``gate.max_drop.answer_token_f1=0.02`` works as written.
    """
    return [f"++{a}" if _GATE_ARG.match(a) else a for a in argv]


def _one_line(default: Callable[..., Any]) -> Callable[..., Any]:
    """``warnings.showwarning`` printing a :class:`~ragexp.errors.RenamedKeyWarning` as one
    ``ragexp: warning:`` line; every other warning as ``default`` shows it."""
    def show(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, RenamedKeyWarning):
            print(f"ragexp: warning: {message}", file=sys.stderr)
        else:
            default(message, category, filename, lineno, file, line)

    show.ragexp = True
    return default if getattr(default, "ragexp", False) else show


def run_app(app: Callable[[], Any], on_interrupt: Callable[[BaseException], None] | None = None) -> None:
    """:func:`_run_app`; then the process ends even if the user's code left a thread running
    (:func:`ragexp.common.isolation.end_without_waiting`)."""
    from ragexp.common.isolation import end_without_waiting

    try:
        _run_app(app, on_interrupt)
    except SystemExit as exc:
        end_without_waiting(exc.code)
        raise
    end_without_waiting(0)


def _run_app(app: Callable[[], Any], on_interrupt: Callable[[BaseException], None] | None = None) -> None:
    """Run a ``@hydra.main`` app as ragexp's commands do: printed text scrubbed of secrets, ``gate.min.<key>=v``
    without Hydra's ``++``, a composition error as one line with exit 2 (Hydra raises it under HYDRA_FULL_ERROR
    instead of printing many lines; the user's own HYDRA_FULL_ERROR keeps the traceback), a bug's traceback
    with exit 2, exit 1 for a failed gate alone (docs/errors.md)."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    from ragexp.common.secrets import ScrubbingStream

    if not isinstance(sys.stdout, ScrubbingStream):
        sys.stdout = ScrubbingStream(sys.stdout)
    if not isinstance(sys.stderr, ScrubbingStream):
        sys.stderr = ScrubbingStream(sys.stderr)
    sys.argv[1:] = add_override_prefix(sys.argv[1:])
    warnings.showwarning = _one_line(warnings.showwarning)  # an old metric key: one line, no source excerpt
    full_error = os.environ.get("HYDRA_FULL_ERROR")
    os.environ["HYDRA_FULL_ERROR"] = "1"
    try:
        app()
    except KeyboardInterrupt as exc:  # raised outside a job (a launcher waiting for its workers)
        if on_interrupt is None:
            raise
        on_interrupt(exc)
    except BrokenPipeError:  # the reader went away (python -m ragexp --help | head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())  # so the interpreter's last flush does not complain
        sys.exit(141)  # 128 + SIGPIPE, as a shell reports a command ended by a closed pipe
    except Exception as exc:  # noqa: BLE001 - Hydra's and OmegaConf's errors, or a bug (its traceback)
        if full_error is not None:
            raise
        from ragexp.common.extras import missing_extra_line
        from ragexp.common.files import SAVE_FAILED, write_failure

        if missing_extra_line(exc):  # an optional package missing: the extra to install, not a traceback
            print(f"ragexp: error: {missing_extra_line(exc)}", file=sys.stderr)
        elif isinstance(exc, RagexpError):  # raised outside a job (a launcher's missing extra): its one line
            print(f"ragexp: error: {exc}", file=sys.stderr)
        elif isinstance(exc, (HydraException, OmegaConfBaseException)):
            from ragexp.common.extras import plugin_hint

            # hydra/launcher=joblib without the sweep extra: Hydra knows no such option; say which extra
            hint = plugin_hint(f"{getattr(exc, 'missing_cfg_file', '')} {exc}")
            print(f"ragexp: error: {hint or config_error_line(exc)}", file=sys.stderr)
        elif (line := write_failure(exc)) is not None:  # Hydra's own files on a full disk: one line, status 4
            print(f"ragexp: error: {line}", file=sys.stderr)
            sys.exit(SAVE_FAILED)
        else:
            import traceback

            traceback.print_exc()
        sys.exit(2)
    except SystemExit as exc:
        if exc.code == 1 and not isinstance(exc, GateFailed):
            raise SystemExit(2) from None
        raise
