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
    from ragexp.tracking.background import prestart

    prestart()  # MLflow is imported in a helper process while this one composes the config and computes

import hydra  # noqa: E402 - after the helper's start
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from ragexp.common.paths import conf_dir
from ragexp.errors import RagexpError, Terminated


def _launch_id() -> str:
    from ragexp.tracking.log import launch_id

    return launch_id()


# ${ragexp_launch_id:} in conf/config.yaml's output folders: unique per launch, the same in joblib's workers
OmegaConf.register_new_resolver("ragexp_launch_id", _launch_id, replace=True)


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="config")
def _app(cfg: DictConfig) -> float | None:
    from ragexp.core.gate import floor_failures, read_gate, record_failures
    from ragexp.workflow.runner import run

    _handle_sigterm()  # again here: joblib's worker processes run jobs without main()
    try:
        max_drop, floors = read_gate(cfg.get("gate"))  # a malformed gate fails before any work
        summary = run(cfg)
    except RagexpError as exc:
        from ragexp.tracking.log import STOPPED

        from ragexp.common.secrets import scrub

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
    from ragexp.tracking.log import STOPPED, interrupt_report

    STOPPED.append(Terminated("SIGTERM") if _SIGTERM else exc)
    term = bool(_SIGTERM) or isinstance(exc, Terminated)
    said = f": {exc}" if str(exc) and not isinstance(exc, Terminated) else ""
    what = "terminated (SIGTERM)" if term else "interrupted"
    from ragexp.common.secrets import scrub

    print(scrub(f"ragexp: {what}{said}. {interrupt_report()}"), file=sys.stderr)
    sys.exit(143 if term else 130)


def _warn_typed_secrets(argv: list[str]) -> None:
    """Once, on stderr: overrides typed on the command line that hold a secret (shown redacted)."""
    from ragexp.common.secrets import scrub

    held = [scrub(a) for a in argv if "=" in a and not a.startswith("-") and scrub(a) != a]
    if held:
        print(f"ragexp: warning: {' '.join(held)}: this command line holds a secret. ragexp redacts it in "
              "everything it writes and logs (MLflow, the results, Hydra's .hydra/*.yaml and multirun.yaml, "
              "rewritten as each job starts, and its log lines), but your shell history keeps it: put it in "
              "an environment variable instead (a judge reads its key from the one judge.api_key_env names)",
              file=sys.stderr)


def _scrub_output() -> None:
    """This process's stdout and stderr scrubbed of secrets (Hydra quotes a bad override back in full)."""
    from ragexp.common.secrets import ScrubbingStream

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


#: ``mode`` as a word: a YAML key or an override that could name ``hydra.mode`` (``model`` is not it)
_MODE_WORD = r"(?<![\w-])mode(?![\w-])"


def _mode_is_settable(search_path: Any, overrides: list[str]) -> bool:
    """Whether composing could give ``hydra.mode`` a value: an override names it, or some config in the
    search path holds a ``mode`` key where it could land on ``hydra.mode`` (top level, or under
    ``hydra``; a package can relocate a file, so anything shallower than ``<x>.mode`` counts), or the
    search path could grow (``searchpath`` anywhere). False only when none of that can happen; anything
    this check cannot read counts as settable."""
    import re

    word = re.compile(_MODE_WORD)
    if any(word.search(o) or "searchpath" in o or "\\" in o for o in overrides):
        return True
    for element in search_path.get_path():
        where = str(element.path)
        if where.startswith("structured://"):
            if _store_sets_mode():
                return True
            continue
        if where.startswith("pkg://"):
            from importlib.resources import files

            root: Any = files(where[len("pkg://"):].strip("/").replace("/", "."))
        elif "://" in where and not where.startswith("file://"):
            return True  # a config source of a kind not read here
        else:
            root = Path(where.removeprefix("file://"))
        if not root.is_dir():
            continue
        for text in _yaml_texts(root):  # parsed only when a key could say it (or an escape could spell it)
            if (word.search(text) or "searchpath" in text or "\\" in text) and _yaml_sets_mode(text):
                return True
    return False


def _yaml_texts(folder: Any) -> Any:
    """The text of every ``.yaml``/``.yml`` file under ``folder`` (a path or an importlib Traversable)."""
    for entry in folder.iterdir():
        if entry.is_dir():
            yield from _yaml_texts(entry)
        elif entry.name.endswith((".yaml", ".yml")):
            yield entry.read_text(encoding="utf-8")


def _lands_on_mode(path: list[Any]) -> bool:
    """Whether a key at ``path`` in a config (or a config relocated by a package) can be ``hydra.mode``."""
    return not (len(path) >= 3 or (len(path) == 2 and path[0] != "hydra"))


def _yaml_sets_mode(text: str) -> bool:
    """Whether a config file holds a ``mode`` key that could land on ``hydra.mode``, or a ``searchpath``
    (more configs to read); unreadable: yes."""
    import re

    import yaml

    word = re.compile(_MODE_WORD)
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml's when there
    except yaml.YAMLError:
        return True

    def walk(node: Any, path: list[Any]) -> bool:
        if isinstance(node, dict):
            for key, value in node.items():
                if not isinstance(key, str) or "searchpath" in key:
                    return True
                if word.search(key) and (key != "mode" or _lands_on_mode([*path, key])):
                    return True
                if walk(value, [*path, key]):
                    return True
        elif isinstance(node, list):  # a defaults list: its keys name groups and packages
            return any(isinstance(item, (dict, list)) and walk(item, [*path, None, None]) for item in node)
        return False

    return walk(data, [])


def _store_sets_mode() -> bool:
    """Whether a structured config (Hydra's ConfigStore) gives a ``mode`` key that could land on
    ``hydra.mode`` a value (Hydra's own ``hydra/config`` has ``mode: None``)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import DictConfig

    def nodes(repo: dict[str, Any]) -> Any:
        for value in repo.values():
            if isinstance(value, dict):
                yield from nodes(value)
            else:
                yield value.node

    def walk(node: Any, path: list[Any]) -> bool:
        if not isinstance(node, DictConfig):
            return False
        for key in node.keys():
            child = node._get_node(key)
            if key == "mode" and _lands_on_mode([*path, key]):
                if child is None or child._is_none() is False:
                    return True
            elif isinstance(child, DictConfig) and walk(child, [*path, key]):
                return True
        return False

    return any(walk(node, []) for node in nodes(ConfigStore.instance().repo))


def _mode_from_the_command_line() -> None:
    """Hydra composes the whole config once only to read ``hydra.mode`` (``Hydra.get_mode``), then
    composes it again to run (0.3–0.7 s each here). When nothing can set ``hydra.mode`` (no override
    names it, no config in the search path holds it) that first compose returns None, and Hydra picks
    RUN or MULTIRUN from ``-m``: say None at once. Otherwise, or with a Hydra laid out differently,
    Hydra's own way."""
    try:
        from hydra._internal.hydra import Hydra
    except ImportError:
        return
    original = getattr(Hydra, "get_mode", None)
    if original is None or getattr(original, "_ragexp", False):
        return

    def get_mode(self: Any, config_name: str | None, overrides: list[str]) -> Any:
        try:
            settable = _mode_is_settable(self.config_loader.config_search_path, list(overrides))
        except Exception:  # noqa: BLE001 - anything unexpected: Hydra's own answer
            settable = True
        return original(self, config_name, overrides) if settable else None

    get_mode._ragexp = True  # type: ignore[attr-defined]
    Hydra.get_mode = get_mode


def main() -> None:
    from ragexp.tracking.log import LAUNCH_ENV, new_launch_id

    os.environ[LAUNCH_ENV] = new_launch_id()  # this launch's own, never one inherited from a parent ragexp
    _warn_typed_secrets(sys.argv[1:])
    _scrub_output()
    from ragexp.core import gate
    from ragexp.core.gate import add_override_prefix

    _handle_sigterm()
    if "--help" in sys.argv[1:] or "-h" in sys.argv[1:]:
        _one_repository_for_help()
    _mode_from_the_command_line()
    sys.argv[1:] = add_override_prefix(sys.argv[1:])  # gate.min.<key>=v works without Hydra's ++
    from ragexp.cli.plugins import expose_plugins

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
