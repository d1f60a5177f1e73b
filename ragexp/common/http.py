"""How a failed HTTP request to a model (through litellm) is classified and when to ask again.

Shared by the judge (:mod:`ragexp.judge`) and the pipeline's language model
(:mod:`ragexp.pipeline.llm`): a failure becomes a status and whether retrying can fix it
(:func:`classify`), the wait a 429 or 503 asked for (:func:`retry_after`), and whether the
connection itself failed (:func:`connection_failed`).

    >>> connection_failed(OSError("the request failed")), connection_failed(ConnectionRefusedError(111, "refused"))
    (False, True)
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import re
import time

from ragexp.errors import ConfigError, CredentialsError


def connection_failed(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) is a failed connection: refused, host unknown, no route.

    litellm reports a closed port as a 500 (``InternalServerError``) whose cause chain holds
    ``httpx.ConnectError`` / aiohttp's ``ClientConnectorError`` / ``ConnectionRefusedError``.
    """
    import socket

    return any(isinstance(e, (ConnectionRefusedError, socket.gaierror)) or type(e).__name__ in (
        "ConnectError", "ClientConnectorError", "ClientConnectorDNSError") for e in _chain(exc))


def root_cause(exc: BaseException) -> BaseException:
    """The first cause of ``exc`` (``ConnectionRefusedError: …`` rather than litellm's wrapping of it)."""
    return _chain(exc)[-1]


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc``, then what caused it (``__cause__``, else ``__context__``), and so on, each once."""
    chain = [exc]
    while (nxt := chain[-1].__cause__ or chain[-1].__context__) is not None and not any(nxt is e for e in chain):
        chain.append(nxt)
    return chain


def retry_after(exc: BaseException) -> float | None:
    """Seconds a 429 (or 503) asked us to wait: ``retry-after-ms``, ``retry-after`` (seconds or a date)."""
    headers = getattr(exc, "litellm_response_headers", None)
    if headers is None:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    try:
        ms = headers.get("retry-after-ms")
        if ms is not None:
            return max(0.0, float(ms) / 1000)
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def classify(exc: BaseException, who: str = "judge") -> tuple[str, bool]:
    """(status, retryable) of a failed request; raises for errors retrying cannot fix.

    ``who`` is the config group that sent it (``judge``, ``generator``, ``compressor``), named in the error.
    """
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # never fetch litellm's price map
    import litellm

    if isinstance(exc, (CredentialsError, ConfigError)):
        raise exc
    if isinstance(exc, (litellm.Timeout, asyncio.TimeoutError, TimeoutError)):
        return "timeout", True
    if isinstance(exc, litellm.RateLimitError):
        return "rate_limited", True
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)):
        raise CredentialsError(f"the {who} model rejected its credentials ({type(exc).__name__}): check the key "
                               f"in the variable {who}.api_key_env names") from None
    if isinstance(exc, litellm.NotFoundError):
        raise ConfigError(f"the {who}'s model or endpoint was not found: {short_error(exc)} "
                          f"(check {who}.model and {who}.api_base)") from None
    if isinstance(exc, litellm.APIConnectionError):
        return "api_error", True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status >= 500 or status in (408, 409)):
        return "api_error", True
    if status == 200:  # the server said OK but its body could not be read (cut off, not JSON): ask again
        return "api_error", True
    return "api_error", False  # 400s: a context too long, a content filter… the same request fails again


#: A traceback a library wrote into an exception's message (litellm's "Invalid response object Traceback …"):
#: its frames go, its last line (the exception) stays.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:(?:[ \t][^\n]*)?\n)*([^\s][^\n]*)")
#: litellm's dump of the arguments it was converting, after such a traceback.
_RECEIVED_ARGS = re.compile(r"\s*received_args=.*", re.S)


def short_error(exc: BaseException, limit: int = 300) -> str:
    """``Type: message`` on one line, at most ``limit`` characters, without an embedded traceback's frames.

    >>> short_error(ValueError("bad reply Traceback (most recent call last):\\n  File 'x', line 1\\nKeyError: 'a'\\n"))
    "ValueError: bad reply (KeyError: 'a')"
    """
    text = _RECEIVED_ARGS.sub("", _TRACEBACK.sub(r"(\1)", str(exc)))
    text = f"{type(exc).__name__}: {text}".replace("\n", " ").strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."
