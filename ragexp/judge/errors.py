"""The judge's own exceptions: raised and handled inside the judge (its client, cache, engine and reply
readers), never shown to a user as such. Each ends as a sample's status and reason (``timeout``,
``parse_error``, …) or as one of the errors of :mod:`ragexp.errors` (a cache that cannot be written:
``ConfigError``; a budget spent: ``BudgetExceeded``). They are not part of ``ragexp.__all__``
(docs/errors.md, "The exceptions").

This module imports nothing: the judged metrics' reply readers (``ragexp.metrics.judged``, a layer below the
judge) raise :class:`ParseError` from here.
"""

from __future__ import annotations


class JudgeSignal(Exception):
    """Root of the judge's control-flow exceptions: a judge call's outcome other than a verdict."""


class CallFailed(JudgeSignal):
    """A judge request failed for good; ``status`` is ``timeout``, ``rate_limited`` or ``api_error``."""

    status: str

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


class BudgetStop(JudgeSignal):
    """The next judge request could pass ``max_cost_usd``; no request is started after this."""


class Paused(JudgeSignal):
    """A server's Retry-After pause ends after this verdict's deadline: waiting for it would be waiting for nothing."""

    seconds: float

    def __init__(self, seconds: float):
        super().__init__(seconds)
        self.seconds = seconds


class BadReply(JudgeSignal):
    """A 200 reply without a text to read: no ``choices``, a null message, no content, tool calls instead of text.
    ``status_code`` 200 makes :func:`~ragexp.common.http.classify` retry it (a body that could not be read);
    ``retryable=False`` (tool calls: the same request gets them again) is recorded at once."""

    status_code: int | None

    def __init__(self, message: str, retryable: bool = True):
        super().__init__(message)
        self.status_code = 200 if retryable else None


class CacheError(JudgeSignal):
    """The judge cache's store failed (a PostgreSQL server gone, a refused write); SQLite raises ``sqlite3.Error``."""


class ParseError(JudgeSignal, ValueError):
    """A judge's reply holds no verdict of the expected shape; the message says what was missing (a ``ValueError``
    too: a reply reader's check is a value check)."""
