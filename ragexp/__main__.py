"""``python -m ragexp``: compose the config, run the evaluation, print one line on a user error."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

#: Hydra's flags that print something instead of running
_NO_RUN_FLAGS = ("--help", "-h", "--cfg", "-c", "--info", "-i", "--hydra-help", "--shell-completion", "-sc")


def _will_log(argv: list[str]) -> bool:
    """Whether this command runs evaluations that log to MLflow (not --cfg, --info, tracking.enabled=false)."""
    if any(a in _NO_RUN_FLAGS or a.startswith(("--cfg=", "--info=")) for a in argv):
        return False
    return not any(a.replace(" ", "").lower() in ("tracking.enabled=false", "tracking=null", "~tracking")
                   for a in argv)


if __name__ == "__main__" and _will_log(sys.argv[1:]):  # first, before Hydra's import: the most overlap
    from .tracking.background import prestart

    prestart()  # MLflow is imported in a helper process while this one composes the config and computes

import hydra  # noqa: E402 - after the helper's start
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from .confdir import conf_dir
from .errors import RagexpError, Terminated


def _launch_id() -> str:
    from .tracking.log import launch_id

    return launch_id()


# ${ragexp_launch_id:} in conf/config.yaml's output folders: unique per launch, the same in joblib's workers
OmegaConf.register_new_resolver("ragexp_launch_id", _launch_id, replace=True)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _app(cfg: DictConfig) -> float | None:
    from .gate import floor_failures, read_gate, record_failures
    from .runner import run

    _handle_sigterm()  # again here: joblib's worker processes run jobs without main()
    try:
        max_drop, floors = read_gate(cfg.get("gate"))  # a malformed gate fails before any work
        summary = run(cfg)
    except RagexpError as exc:
        from .tracking.log import STOPPED

        from .tracking.secrets import scrub

        STOPPED.append(exc)
        print(f"ragexp: error: {scrub(str(exc))}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt as exc:  # Ctrl-C or SIGTERM: one line, no traceback
        _interrupted(exc)
    if max_drop:
        print("ragexp: gate.max_drop needs two runs (python -m ragexp.compare); this run checks gate.min only",
              file=sys.stderr)
    failed = floor_failures(summary["metrics"], floors)
    for line in failed:
        print(line, file=sys.stderr)
    if failed:
        if not _in_multirun():
            record_failures(failed, None)
            sys.exit(1)
        from hydra.core.hydra_config import HydraConfig

        record_failures(failed, Path(HydraConfig.get().runtime.output_dir))  # the sweep exits 1 at its end
    return summary.get("objective")


def _in_multirun() -> bool:
    from hydra.core.hydra_config import HydraConfig

    return HydraConfig.initialized() and str(HydraConfig.get().mode) == "RunMode.MULTIRUN"


_SIGTERM: list[int] = []  # set once a SIGTERM arrived (the judge turns the interrupt into its own)


def _on_sigterm(signum: int, frame: object) -> None:
    if _SIGTERM:  # a second SIGTERM while closing up: the default action, at once
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
        return
    _SIGTERM.append(signum)
    raise Terminated("SIGTERM")


def _handle_sigterm() -> None:
    """SIGTERM (timeout, CI cancel, pre-emption) is handled like Ctrl-C: runs end FAILED with the reason."""
    try:
        signal.signal(signal.SIGTERM, _on_sigterm)
    except ValueError:  # not the main thread: leave it to the process's owner
        pass


def _interrupted(exc: BaseException) -> None:
    """One line saying what stopped the run and what was logged; exit 130 (Ctrl-C) or 143 (SIGTERM)."""
    from .tracking.log import STOPPED, interrupt_report

    STOPPED.append(Terminated("SIGTERM") if _SIGTERM else exc)
    term = bool(_SIGTERM) or isinstance(exc, Terminated)
    said = f": {exc}" if str(exc) and not isinstance(exc, Terminated) else ""
    what = "terminated (SIGTERM)" if term else "interrupted"
    from .tracking.secrets import scrub

    print(scrub(f"ragexp: {what}{said}. {interrupt_report()}"), file=sys.stderr)
    sys.exit(143 if term else 130)


def _warn_typed_secrets(argv: list[str]) -> None:
    """Once, on stderr: overrides typed on the command line that hold a secret (shown redacted)."""
    from .tracking.secrets import scrub

    held = [scrub(a) for a in argv if "=" in a and not a.startswith("-") and scrub(a) != a]
    if held:
        print(f"ragexp: warning: {' '.join(held)}: this command line holds a secret. ragexp redacts it in "
              "everything it writes and logs (MLflow, the results, Hydra's .hydra/*.yaml and multirun.yaml, "
              "rewritten as each job starts, and its log lines), but your shell history keeps it: put it in "
              "an environment variable instead (a judge reads its key from the one judge.api_key_env names)",
              file=sys.stderr)


def _scrub_output() -> None:
    """This process's stdout and stderr scrubbed of secrets (Hydra quotes a bad override back in full)."""
    from .tracking.secrets import ScrubbingStream

    if not isinstance(sys.stdout, ScrubbingStream):
        sys.stdout = ScrubbingStream(sys.stdout)
    if not isinstance(sys.stderr, ScrubbingStream):
        sys.stderr = ScrubbingStream(sys.stderr)


def _one_repository_for_help() -> None:
    """``--help`` lists every config group and its options, and Hydra deep-copies its whole config
    repository for each of those ~120 listings (1–2 s here). A listing only reads the repository, so
    the copy made for the first serves the rest; composing the config still gets a copy of its own."""
    try:
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
    except ImportError:  # a Hydra laid out differently: its own (slower) way
        return
    original = getattr(ConfigLoaderImpl, "_parse_overrides_and_create_caching_repo", None)
    if original is None:
        return
    made: dict[int, Any] = {}

    def shared(self: Any, config_name: str | None, overrides: list[str]) -> Any:
        if config_name is not None or overrides:  # composing a config, not listing groups
            return original(self, config_name, overrides)
        if id(self) not in made:
            made[id(self)] = original(self, config_name, overrides)
        return made[id(self)]

    ConfigLoaderImpl._parse_overrides_and_create_caching_repo = shared


def main() -> None:
    from .tracking.log import LAUNCH_ENV, new_launch_id

    os.environ[LAUNCH_ENV] = new_launch_id()  # this launch's own, never one inherited from a parent ragexp
    _warn_typed_secrets(sys.argv[1:])
    _scrub_output()
    from . import gate
    from .gate import add_override_prefix

    _handle_sigterm()
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        _one_repository_for_help()
    sys.argv[1:] = add_override_prefix(sys.argv[1:])  # gate.min.<key>=v works without Hydra's ++
    from .plugins import expose_plugins

    expose_plugins()  # hydra/launcher=ray from an editable install too
    try:
        _app()
    except KeyboardInterrupt as exc:  # raised outside a job (a launcher waiting for its workers)
        _interrupted(exc)
    except BrokenPipeError:  # the reader went away (python -m ragexp --help | head): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())  # so the interpreter's last flush does not complain
        sys.exit(141)  # 128 + SIGPIPE, as a shell reports a command ended by a closed pipe
    except SystemExit as exc:
        if exc.code == 1 and not gate.FAILED:  # Hydra's own errors (a bad override): exit 1 means the gate
            raise SystemExit(2) from None
        raise
    if gate.FAILED:  # a multirun's jobs that missed a floor (in this process, or in joblib's workers)
        sys.exit(1)


if __name__ == "__main__":
    main()
