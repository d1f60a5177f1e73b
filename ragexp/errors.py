"""The exceptions ragexp raises on purpose: :class:`RagexpError` and its subclasses (printed as one line,
exit status 2), and the ``KeyboardInterrupt`` subclasses :class:`Interrupted` (Ctrl-C, 130) and
:class:`Terminated` (SIGTERM, 143). Definitions: docs/errors.md, "The exceptions" and "Exit status".
"""

from __future__ import annotations

import re

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
    """Every judge metric failed on every sample (timeouts, API errors, unreadable replies): nothing was measured."""


class ParseError(ValueError):
    """A judge's reply holds no verdict of the expected shape; the message says what was missing."""


class Terminated(KeyboardInterrupt):
    """SIGTERM (a ``timeout``, a CI cancel, a pre-emption), handled like Ctrl-C; exit status 143."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during the judge's work; the message says what was received and where it is kept."""


def config_error_line(exc: BaseException) -> str:
    """A Hydra or OmegaConf composition error as one line: what was wrong and the fix, without
    Hydra's list of every option on its own line or its config search path.

    ``metric=nosuch`` → ``no option 'nosuch' in group 'metric'; the options are: accuracy, answer, …``;
    ``foo=1`` → ``Could not override 'foo'. To append to your config use +foo=1 (Key 'foo' is not in struct)``.
    """
    missing, options = getattr(exc, "missing_cfg_file", None), getattr(exc, "options", None)
    from ragexp.common.extras import plugin_hint

    hint = plugin_hint(str(missing or "") + " " + str(exc))
    if hint:  # hydra/launcher=joblib without the sweep extra: Hydra knows no such option
        return hint
    if missing and options is not None:
        group, _, option = str(missing).rpartition("/")
        return f"no option '{option}' in group '{group}'; the options are: {', '.join(options)}"
    text = str(exc).split("Config search path:")[0]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    cause = exc.__cause__
    if cause is not None and type(cause).__module__.startswith("omegaconf"):
        said = [line.strip() for line in str(cause).splitlines()
                if line.strip() and not line.strip().startswith(("full_key:", "object_type=", "reference_type="))]
        if said:
            lines.append(f"({' '.join(said)})")
    return " ".join(lines).removeprefix("In 'config': ") or type(exc).__name__
