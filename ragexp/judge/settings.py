"""The judge's settings: one ``conf/judge/<name>.yaml`` = one :class:`JudgeSettings`.

The keys of the YAML are exactly the fields below. Credentials never sit in the config: it
holds the *name* of the environment variable (``api_key_env: OPENAI_API_KEY``), and
:meth:`JudgeSettings.check` refuses, before any work, a judge whose variable is not set::

    >>> s = JudgeSettings.from_config({"name": "gpt4o", "model": "gpt-4o", "api_key_env": "RAGEXP_DOCTEST_UNSET_KEY"})
    >>> s.check()
    Traceback (most recent call last):
    ...
    ragexp.errors.CredentialsError: judge 'gpt4o' (gpt-4o) needs an API key: set the environment variable RAGEXP_DOCTEST_UNSET_KEY (or pick another judge=...)
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from ragexp.errors import ConfigError, CredentialsError
from ragexp.common.paths import conf_file, launch_dir

#: What litellm's OpenAI client is given when a server needs no key (vLLM, llama.cpp, Ollama).
NO_KEY = "no-key-needed"
#: litellm prefixes of a model on an OpenAI-compatible server of one's own (needs ``api_base``).
_COMPATIBLE = ("openai/", "hosted_vllm/")


@dataclass
class JudgeSettings:
    """How to reach one judge model and how hard to push it. Each setting's meaning and default are in
    ``conf/judge_base.yaml`` (their one place): :meth:`from_config` fills what a config leaves out from there."""

    name: str
    model: str
    api_base: str | None
    api_key_env: str | None
    temperature: float
    seed: int | None
    max_tokens: int
    timeout_s: float
    deadline_s: float
    max_concurrency: int
    requests_per_minute: float | None
    max_retries: int
    backoff_s: float
    max_backoff_s: float
    cache: bool
    cache_backend: str
    cache_path: str
    max_cost_usd: float | None
    cost_per_million_in: float | None
    cost_per_million_out: float | None
    structured_output: bool | str | None
    samples: int
    examples: int

    def __post_init__(self) -> None:
        from ragexp.common.secrets import declare_secret_env

        declare_secret_env(self.api_key_env)  # its value is a secret whatever the variable is called

    @classmethod
    def from_config(cls, cfg: Mapping[str, Any]) -> "JudgeSettings":
        """Build from a ``judge`` config node; an unknown key is a :class:`ConfigError` naming the valid ones."""
        data = {k: v for k, v in {**conf_file("judge_base"), **dict(cfg)}.items() if not str(k).startswith("_")}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"judge has no setting {', '.join(repr(u) for u in unknown)}; "
                              f"its settings are: {', '.join(sorted(known))}")
        s = cls(**data)
        s.validate()
        return s

    def validate(self) -> None:
        where = f"judge '{self.name}'"
        if not self.model or not isinstance(self.model, str):
            raise ConfigError(f"{where}: model must be a litellm model name, got {self.model!r}")
        if self.structured_output not in (None, True, False, "auto", "json_schema", "json_object_schema"):
            raise ConfigError(f"{where}: structured_output must be null, auto, json_schema, json_object_schema, "
                              f"true or false, got {self.structured_output!r}")
        for field_name, low in (("max_concurrency", 1), ("max_tokens", 1), ("samples", 1), ("max_retries", 0),
                                 ("examples", 0)):
            v = getattr(self, field_name)
            if not isinstance(v, int) or v < low:
                raise ConfigError(f"{where}: {field_name} must be an integer ≥ {low}, got {v!r}")
        for field_name in ("timeout_s", "deadline_s", "backoff_s", "max_backoff_s"):
            v = getattr(self, field_name)
            if not isinstance(v, (int, float)) or v <= 0:
                raise ConfigError(f"{where}: {field_name} must be a positive number of seconds, got {v!r}")
        if self.requests_per_minute is not None and self.requests_per_minute <= 0:
            raise ConfigError(f"{where}: requests_per_minute must be positive or null, got {self.requests_per_minute!r}")
        if self.cache_backend != "sqlite":
            from ragexp.judge.cache import is_postgres_url

            if not isinstance(self.cache_backend, str) or not is_postgres_url(self.cache_backend):
                from ragexp.common.secrets import redact_url

                raise ConfigError(f"{where}: cache_backend must be sqlite or a postgresql://USER@HOST:PORT/DB URL, "
                                  f"got {redact_url(str(self.cache_backend))!r}")
        if self.max_cost_usd is not None and self.max_cost_usd < 0:
            raise ConfigError(f"{where}: max_cost_usd must be ≥ 0 or null, got {self.max_cost_usd!r}")

    def check(self) -> None:
        """Refuse, before any work, a judge that cannot be reached: missing key or missing api_base."""
        if self.api_base is None and self.api_key_env is None and self.model.startswith(_COMPATIBLE):
            raise ConfigError(f"judge '{self.name}' needs the server's URL: set judge.api_base=http://HOST:PORT/v1")
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise CredentialsError(f"judge '{self.name}' ({self.model}) needs an API key: set the environment "
                                   f"variable {self.api_key_env} (or pick another judge=...)")

    def api_key(self) -> str | None:
        """The key's value, read from the environment at call time (never stored in the config)."""
        if self.api_key_env:
            return os.environ.get(self.api_key_env)
        if self.model.startswith(_COMPATIBLE) or self.api_base:
            return NO_KEY  # OpenAI-compatible servers without auth: the client still wants a string
        return None

    def resolved_cache_path(self) -> Path:
        p = Path(self.cache_path).expanduser()
        if p.is_absolute():
            return p
        return launch_dir() / p
