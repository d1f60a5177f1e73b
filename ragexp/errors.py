"""The exceptions ragexp raises on purpose, its public tree (all of it in ``ragexp.__all__``): :class:`RagexpError`
and its subclasses (printed as one line, exit status 2), the ``KeyboardInterrupt`` subclasses
:class:`Interrupted` (Ctrl-C, 130) and :class:`Terminated` (SIGTERM, 143), :class:`GateFailed` (a missed
floor, exit status 1), and the warning :class:`RenamedKeyWarning`. The judge's own control flow (a call that
failed for good, a reply without a verdict, ...) is :mod:`ragexp.judge.errors`'. Every attribute an exception
carries is an argument of its constructor. Definitions: docs/errors.md, "The exceptions" and "Exit status".
"""

from __future__ import annotations

import re
from typing import Any, Iterable

#: What must not reach a terminal raw from a value quoted in a message (an id, a path, a field's text): line
#: breaks (which would forge a line of their own), other C0/C1 control characters (ANSI escape sequences start
#: with ESC), DEL, and the bidirectional overrides and isolates that reorder what is shown
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def printable(text: str) -> str:
    """``text`` with line breaks, control characters and bidirectional overrides written as escapes.

    >>> printable("id 'a\\nragexp: ok' \\x1b[31mred\\x1b[0m")
    "id 'a\\\\nragexp: ok' \\\\x1b[31mred\\\\x1b[0m"
    """
    if not _UNPRINTABLE.search(text):
        return text
    return _UNPRINTABLE.sub(lambda m: m.group(0).encode("unicode_escape").decode("ascii"), text)


class RagexpError(Exception):
    """Base class of every error a user can cause; printed as one line (values it quotes escaped: :func:`printable`)."""

    def __str__(self) -> str:
        return printable(super().__str__())


class ConfigError(RagexpError):
    """A config value is missing, unknown or of the wrong type."""


class MissingExtra(ConfigError):
    """An optional dependency the configuration needs is not installed; the message names the extra
    that installs it (``pip install 'ragexp[pipeline]'``)."""


class DataError(RagexpError):
    """A dataset file is missing, unreadable, empty, or holds a bad value.

    The message names the file, the row (1-based, as a user counts lines or items) and the
    field, then says what was expected and what was found.
    """

    def __init__(self, message: str, *, path: str | None = None, row: int | None = None,
                 field: str | None = None):
        where = [str(w) for w in (path, None if row is None else f"row {row}", None if field is None else f"field '{field}'")
                 if w is not None]
        super().__init__(f"{', '.join(where)}: {message}" if where else message)
        self.path, self.row, self.field = path, row, field


class FieldsError(RagexpError):
    """A configured metric reads a field that the dataset does not provide."""


class CredentialsError(RagexpError):
    """A model needs credentials (an API key) that are not in the environment."""


class TrackingError(RagexpError):
    """The MLflow store cannot be used, or logging to it failed; the message says where the results are."""


class SaveError(RagexpError):
    """The results folder could not be written whole (a full disk, a read-only folder): the message says
    what was saved where and how to log it."""


class BudgetExceeded(RagexpError):
    """Going on would spend more than the configured ``max_cost_usd``."""


class JudgeFailed(RagexpError):
    """Every judge metric failed on every sample (timeouts, API errors, unreadable replies): nothing was measured.

    ``outcome`` is the runner's outcome (each sample's scores, status and reason) when nothing was saved;
    ``result`` is what :func:`ragexp.evaluate` makes of it (an ``EvaluationResult``), set by ``evaluate``.
    """

    outcome: Any
    result: Any

    def __init__(self, message: str, *, outcome: Any = None, result: Any = None):
        super().__init__(message)
        self.outcome, self.result = outcome, result


class JudgeUnreachable(ConfigError):
    """Connections to the judge's server failed again and again: nothing is listening there."""







class GateFailed(SystemExit):
    """Exit status 1: a run (or a sweep's job) missed a floor. Apart from Hydra's own ``SystemExit(1)``
    on a bad override, which ``python -m ragexp`` turns into exit 2."""

    def __init__(self) -> None:
        super().__init__(1)


class RenamedKeyWarning(FutureWarning):
    """An old metric key was written (:mod:`ragexp.common.renamed`); ragexp's commands print it as one
    ``ragexp: warning:`` line."""



class Terminated(KeyboardInterrupt):
    """SIGTERM (a ``timeout``, a CI cancel, a pre-emption), handled like Ctrl-C; exit status 143."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during the judge's work; the message says what was received and where it is kept."""


def closest(word: str, choices: Iterable[str], n: int = 1) -> list[str]:
    """The ``n`` choices closest to a mistyped ``word`` (difflib's ratio at least 0.75), closest first; every
    "did you mean" of ragexp uses this one rule.

    >>> closest("contxts", ["query", "contexts", "answer"]), closest("zzz", ["bm25"])
    (['contexts'], [])
    """
    import difflib

    return difflib.get_close_matches(word, list(choices), n=n, cutoff=0.75)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``; did you mean 'x'?`` for the choice closest to ``word`` (:func:`closest`), or nothing.

    >>> did_you_mean("dataset.system=wek", ["dataset.system=weak"]), did_you_mean("zzz", ["bm25"])
    ("; did you mean 'dataset.system=weak'?", '')
    """
    near = closest(word, choices)
    return f"; did you mean {near[0]!r}?" if near else ""


def _suggestion(option: str, options: list[str]) -> str:
    """What follows "no option 'x' in group 'g'": the closest options first (a typo, or a name inside a longer one:
    ``faithfulness`` → ``claim_faithfulness``), then every option when there are few, else how to list them.

    >>> _suggestion("answer_tokn_f1", ["answer", "answer_token_f1", "bleu"] + [f"m{i}" for i in range(20)])
    "; did you mean 'answer_token_f1'? (23 options: python -m ragexp --help lists them)"
    >>> _suggestion("bm26", ["bm25", "dense", "hybrid", "none"])
    "; did you mean 'bm25'? The options are: bm25, dense, hybrid, none"
    >>> _suggestion("zzz", ["bm25", "dense"])
    '; the options are: bm25, dense'
    """
    near = closest(option, options, n=2)
    near += [o for o in options if len(option) >= 4 and option in o and o not in near]
    said = f"; did you mean {' or '.join(repr(o) for o in near[:2])}?" if near else ""
    if len(options) <= 12 or not near:
        return f"{said} The options are: {', '.join(options)}" if near else f"; the options are: {', '.join(options)}"
    return f"{said} ({len(options)} options: python -m ragexp --help lists them)"


def _unchosen_group(group: str, key: str) -> str | None:
    """``judge.cache_backend=…`` with no judge chosen: the group to choose first, with its options (None: ``group``
    is no config group of ragexp)."""
    from ragexp.common.paths import conf_options

    options = conf_options(group)
    if not options:
        return None
    return (f"{group}.{key} sets an option of the {group}, but no {group} is chosen: add {group}=<name> before it "
            f"(one of {', '.join(options)})")


def _mistyped_key(cause: BaseException | None) -> str | None:
    """``dataset.sytem=weak``: the closest key of that node, instead of Hydra's advice to append the typo as a new
    key (``+dataset.sytem=weak``); None when the key is not in a node or no key of the node is close to it.
    Reads the public attributes OmegaConf's errors carry (``key``, ``full_key``, ``parent_node``)."""
    key, full_key, parent = (getattr(cause, name, None) for name in ("key", "full_key", "parent_node"))
    if not isinstance(key, str) or not isinstance(full_key, str) or not hasattr(parent, "keys") \
            or "not in struct" not in str(cause):
        return None
    keys = [str(k) for k in parent.keys() if not str(k).startswith("_")]
    near = closest(key, keys)
    if not near:
        return None
    node = full_key[:-len(key)]
    return (f"{full_key}: no such key; did you mean {node}{near[0]}? "
            f"({'the keys of ' + node.rstrip('.') if node else 'the top-level keys'}: {', '.join(keys)})")


def config_error_line(exc: BaseException) -> str:
    """A Hydra or OmegaConf composition error as one line: what was wrong and the fix, without
    Hydra's list of every option on its own line or its config search path.

    ``metric=nosuch`` → ``no option 'nosuch' in group 'metric'; the options are: answer, answer_consistency, …``;
    ``metric=precision`` (an old name) → ``metric=precision is now called keyword_verdict_precision: …``;
    ``foo=1`` → ``Could not override 'foo'. To append to your config use +foo=1 (Key 'foo' is not in struct)``.
    """
    from ragexp.common.renamed import current_key

    missing, options = getattr(exc, "missing_cfg_file", None), getattr(exc, "options", None)
    if missing and "/" in str(missing) and options is None:  # an option inside a list (metric=[a,b]): Hydra names none
        from ragexp.common.paths import conf_options

        options = conf_options(str(missing).rpartition("/")[0])
    if missing and options:
        group, _, option = str(missing).rpartition("/")
        if group == "metric" and current_key(option) != option:  # an old key: say its new name
            return f"metric={option} is now called {current_key(option)}: write metric={current_key(option)}"
        return f"no option '{option}' in group '{group}'{_suggestion(option, list(options))}"
    text = str(exc).split("Config search path:")[0]
    old = re.match(r"Could not override 'metric\.(\w+)((?:\.\w+)*)'", text)
    if old:  # metric.accuracy.threshold=… of a suite that now holds keyword_verdict_accuracy
        name, rest = old.groups()
        if current_key(name) != name:
            new = current_key(name)
            return f"metric.{name}{rest}: '{name}' is now called {new}: write metric.{new}{rest}=…"
    text = re.sub(r"\$\{oc\.env:RAGEXP_SECRET_OVERRIDE_\d+\}", "***", text)  # a secret's stand-in: never shown
    unchosen = re.match(r"Could not override '(\w+)\.([\w.]+)'", text)
    if unchosen and f"Key '{unchosen.group(1)}' is not in struct" in str(exc.__cause__ or "") \
            and (line := _unchosen_group(*unchosen.groups())):
        return line
    if text.startswith("Could not override") and (line := _mistyped_key(exc.__cause__)):
        return line
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = exc.__cause__
    if cause is not None and type(cause).__module__.startswith("omegaconf"):
        said = [line.strip() for line in str(cause).splitlines()
                if line.strip() and not line.strip().startswith(("full_key:", "object_type=", "reference_type="))]
        if said:
            lines.append(f"({' '.join(said)})")
    return " ".join(lines).removeprefix("In 'config': ") or type(exc).__name__
