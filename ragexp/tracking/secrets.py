"""Flatten a config to MLflow params and keep secrets out of everything that is logged.

A value is redacted when its key looks like a credential (``api_key``, ``token``, ``secret``,
``password``, …) or when it contains the value of an environment variable whose name does
(``OPENAI_API_KEY``…), wherever it appears.

    >>> flatten({"judge": {"model": "gpt-4o", "api_key": "sk-123"}, "retriever": {"top_k": 5}})
    {'judge.model': 'gpt-4o', 'judge.api_key': '***', 'retriever.top_k': '5'}
"""

from __future__ import annotations

import os
import re
from typing import Any, Mapping

REDACTED = "***"
_SECRET_KEY = re.compile(
    r"(^|[_.\-])(api[_\-]?key|apikey|key|token|access[_\-]?token|secret|password|passwd|credentials?|"
    r"authorization|auth)$",
    re.IGNORECASE,
)
_SECRET_ENV = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL)", re.IGNORECASE)
_SECRET_VALUE = re.compile(r"\b(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|AIza[0-9A-Za-z_\-]{20,}|hf_[A-Za-z0-9]{20,})")
MAX_PARAM_LEN = 6000


def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(str(key)))


def _environ() -> dict[str, str]:
    """A snapshot of ``os.environ``; MLflow's telemetry thread may unset a variable while we read it."""
    for _ in range(20):
        try:
            return dict(os.environ)
        except KeyError:
            continue
    return {}


def _env_secrets() -> list[str]:
    return sorted(
        (v for k, v in _environ().items() if _SECRET_ENV.search(k) and v and len(v) >= 6),
        key=len,
        reverse=True,
    )


def scrub(text: str) -> str:
    """Replace every known secret value (from the environment, or shaped like a key) in ``text``."""
    for value in _env_secrets():
        if value in text:
            text = text.replace(value, REDACTED)
    return _SECRET_VALUE.sub(REDACTED, text)


def redact(obj: Any) -> Any:
    """A copy of a nested dict/list with secret-keyed values replaced and secret strings scrubbed."""
    if isinstance(obj, Mapping):
        return {k: (REDACTED if is_secret_key(k) and obj[k] not in (None, "") else redact(v)) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [redact(v) for v in obj]
    if isinstance(obj, str):
        return scrub(obj)
    return obj


def flatten(cfg: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Dotted keys → string values, secrets redacted, long values cut to MLflow's limit."""
    out: dict[str, str] = {}
    for key, value in redact(cfg).items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            text = str(value)
            out[name] = text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."
    return out
