"""One litellm call in this process, and how a failed one is classified.

Shared by :mod:`.client` (the retry layer, in the main process) and :mod:`.workers` (the child
processes of ``judge.workers``), which both import it and neither imports the other for it:
litellm imported quietly (:func:`_quiet_litellm`), a model's declared price registered
(:func:`register_price`), one ``litellm.acompletion`` (:func:`acompletion`), and a failure turned
into a status (:func:`classify`), a ``Retry-After`` (:func:`_retry_after`) and whether the
connection itself failed (:func:`connection_failed`).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import logging
import os
import time
from typing import Any

from ragexp.errors import ConfigError, CredentialsError
from ragexp.judge.loop import litellm_provider, litellm_setup_inline


class RemoteFailure(Exception):
    """A failed request, as classified in the worker: ``status``, ``retryable``, ``retry_after``, and
    ``connection`` (the connection itself failed: nothing listening, unknown host)."""

    def __init__(self, status: str, retryable: bool, retry_after: float | None, text: str, connection: bool = False):
        super().__init__(text)
        self.status, self.retryable, self.retry_after = status, retryable, retry_after
        self.connection = connection


def connection_failed(exc: BaseException) -> bool:
    """True when ``exc`` (or what caused it) is a failed connection: refused, host unknown, no route.

    litellm reports a closed port as a 500 (``InternalServerError``) whose cause chain holds
    ``httpx.ConnectError`` / aiohttp's ``ClientConnectorError`` / ``ConnectionRefusedError``.
    """
    import socket

    if getattr(exc, "connection", False):  # a RemoteFailure: the worker process looked at the chain
        return True
    seen: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and not any(e is s for s in seen):
        seen.append(e)
        if isinstance(e, (ConnectionRefusedError, socket.gaierror)) or type(e).__name__ in (
                "ConnectError", "ClientConnectorError", "ClientConnectorDNSError"):
            return True
        e = e.__cause__ or e.__context__
    return False


def _root(exc: BaseException) -> BaseException:
    """The first cause of ``exc`` (``ConnectionRefusedError: …`` rather than litellm's wrapping of it)."""
    seen = [exc]
    while True:
        nxt = seen[-1].__cause__ or seen[-1].__context__
        if nxt is None or any(nxt is s for s in seen):
            return seen[-1]
        seen.append(nxt)


def _retry_after(exc: BaseException) -> float | None:
    """Seconds a 429 (or 503) asked us to wait: ``retry-after-ms``, ``retry-after`` (seconds or a date)."""
    if hasattr(exc, "retryable"):  # a RemoteFailure: the worker process read the headers
        return getattr(exc, "retry_after", None)
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
    import litellm

    if isinstance(exc, RemoteFailure):  # classified by the worker process that sent the request
        return exc.status, exc.retryable
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
        raise ConfigError(f"the {who}'s model or endpoint was not found: {_short(exc)} "
                          f"(check {who}.model and {who}.api_base)") from None
    if isinstance(exc, litellm.APIConnectionError):
        return "api_error", True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and (status >= 500 or status in (408, 409)):
        return "api_error", True
    if status == 200:  # the server said OK but its body could not be read (cut off, not JSON): ask again
        return "api_error", True
    return "api_error", False  # 400s: a context too long, a content filter… the same request fails again


def _short(exc: BaseException, limit: int = 300) -> str:
    text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
    return text if len(text) <= limit else text[: limit - 3] + "..."


@functools.cache
def _quiet_litellm() -> Any:
    """litellm, imported once with its price map local and its per-request log lines off."""
    if not os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"):
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never fetch the price map at run time
    import litellm

    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)  # not one log line per request under Hydra's INFO logging
    return litellm


@functools.cache
def register_price(model: str, per_in: float, per_out: float) -> None:
    """Put a model that litellm's price map lacks into it, at the price the settings declare.

    litellm prices every response itself, whoever reads the figure; for a model missing from its
    map it searches the whole map for a near name on every call, about a fifth of its CPU per call
    against a fast local server (``benchmarks/bench_judge.py``). ragexp computes the cost from
    :class:`Prices` either way; this only spares litellm the search. Once per process (the worker
    processes of ``judge.workers`` do it too), and never for a model the map knows.
    """
    litellm = _quiet_litellm()
    provider = litellm_provider(model)
    entry = {"input_cost_per_token": per_in, "output_cost_per_token": per_out, "mode": "chat",
             # prompt-cache reads and writes at the full input price (no discount declared)
             "cache_read_input_token_cost": per_in, "cache_creation_input_token_cost": per_in}
    if provider:
        entry["litellm_provider"] = provider
    litellm.register_model({model: entry})


async def acompletion(kwargs: dict[str, Any], teach: tuple[str, float, float] | None = None
                      ) -> tuple[str, str | None, int, int]:
    """One ``litellm.acompletion`` in this process: (text, finish_reason, prompt tokens, completion tokens).

    ``teach``: :attr:`Prices.teach`, registered once in this process before the call.
    """
    litellm = _quiet_litellm()
    if teach is not None:
        register_price(*teach)
    with litellm_setup_inline(kwargs):
        response = await litellm.acompletion(**kwargs)
    choice = response.choices[0]
    u = getattr(response, "usage", None)
    return (choice.message.content or "", getattr(choice, "finish_reason", None),
            int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0))
