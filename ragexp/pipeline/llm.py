"""The one place the pipeline calls a language model (litellm), and its prompt files.

:class:`LLMClient` holds a model's settings, checks its credentials before any work
(:class:`~ragexp.errors.CredentialsError` naming the environment variable), and sends one
user message at a time. API keys are only ever read from the environment variable named by
``api_key_env``; a config never holds a key. With ``api_base`` set and no ``api_key_env``
(a local OpenAI-compatible server), no key is needed.

Prompts are versioned text files in ``ragexp/pipeline/prompts/`` (``generate_v1.txt``) with
``{query}`` and ``{contexts}`` / ``{context}`` placeholders; ``prompt:`` in a config names one
of them or a path to your own file.

    >>> print(render("generate_v1", query="Who?", contexts=["A did it.", "B watched."]).splitlines()[-4])
    [2] B watched.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ragexp.errors import ConfigError, CredentialsError

PROMPTS = Path(__file__).with_name("prompts")


def load_prompt(prompt: str) -> str:
    """The text of a bundled prompt (by name, without .txt) or of a prompt file (by path)."""
    bundled = PROMPTS / f"{prompt}.txt"
    if "/" not in prompt and bundled.exists():
        return bundled.read_text(encoding="utf-8")
    p = Path(prompt).expanduser()
    if p.is_file():
        return p.read_text(encoding="utf-8")
    names = ", ".join(sorted(f.stem for f in PROMPTS.glob("*.txt")))
    raise ConfigError(f"prompt {prompt!r}: no such bundled prompt ({names}) or file")


def render(prompt: str, *, query: str, contexts: list[str] | None = None, context: str | None = None) -> str:
    """Fill a prompt's placeholders (``{query}``, ``{contexts}`` numbered, ``{context}``)."""
    numbered = "\n\n".join(f"[{i}] {c}" for i, c in enumerate(contexts or [], start=1)) or "(no passages)"
    return load_prompt(prompt).format_map({"query": query, "contexts": numbered, "context": context or ""})


def check_template(prompt: str, needs: tuple[str, ...], who: str) -> None:
    import string

    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(load_prompt(prompt)) if f}
    except ValueError as exc:
        raise ConfigError(f"{who}.prompt {prompt!r}: not a valid template ({exc}); write literal braces as {{{{ }}}}") from None
    unknown = fields - {"query", "contexts", "context"}
    if unknown:
        raise ConfigError(f"{who}.prompt {prompt!r}: unknown placeholder(s) {', '.join(sorted(unknown))}; "
                          "use {query}, {contexts} or {context}")
    missing = [n for n in needs if n not in fields]
    if missing:
        raise ConfigError(f"{who}.prompt {prompt!r}: expected the placeholder(s) {', '.join('{' + m + '}' for m in missing)}")


class LLMClient:
    """A litellm model with its settings; ``who`` names the config group in messages."""

    def __init__(self, model: str, *, who: str, api_base: str | None = None, api_key_env: str | None = None,
                 temperature: float = 0.0, max_tokens: int = 256, timeout_s: float = 60.0, max_retries: int = 2):
        if not model or not isinstance(model, str):
            raise ConfigError(f"{who}.model: expected a litellm model name (e.g. openai/gpt-4o-mini), got {model!r}")
        self.model, self.who, self.api_base, self.api_key_env = model, who, api_base, api_key_env
        from ragexp.common.secrets import declare_secret_env

        declare_secret_env(api_key_env)  # its value is a secret whatever the variable is called
        self.temperature, self.max_tokens, self.timeout, self.max_retries = temperature, max_tokens, timeout_s, max_retries
        self.calls = 0
        self.failures = 0
        self.tokens_in = 0
        self.tokens_out = 0

    def check_credentials(self) -> None:
        """Raise CredentialsError now if the model's key is not in the environment."""
        if self.api_key_env:
            if not os.environ.get(self.api_key_env):
                raise CredentialsError(f"{self.who} model '{self.model}' reads its API key from the environment "
                                       f"variable {self.api_key_env}, which is not set: export {self.api_key_env}=…")
            return
        if self.api_base:
            return  # a local OpenAI-compatible server: no key
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        try:
            env = litellm.validate_environment(model=self.model)
        except Exception as exc:  # noqa: BLE001 - litellm raises plain errors for unknown providers
            raise ConfigError(f"{self.who}.model: litellm does not know {self.model!r} ({exc})") from None
        if not env.get("keys_in_environment", False):
            missing = ", ".join(env.get("missing_keys") or []) or "its provider's API key"
            raise CredentialsError(f"{self.who} model '{self.model}' needs {missing} in the environment "
                                   f"(or name another variable with {self.who}.api_key_env)")

    def complete(self, prompt: str) -> str:
        """The model's reply to one user message.

        Retried up to ``max_retries`` times on 429, 5xx, timeouts and connection errors (waiting at
        least a 429's Retry-After); a 400 is not retried; a rejected key or unknown model raises
        :class:`~ragexp.errors.CredentialsError` / :class:`~ragexp.errors.ConfigError` at once.
        """
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        from ragexp.common.http import classify, retry_after

        kwargs: dict[str, Any] = {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                  "temperature": self.temperature, "max_tokens": self.max_tokens,
                                  "timeout": self.timeout,
                                  "num_retries": 0, "max_retries": 0}  # the loop below is the only retry layer
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key_env:
            kwargs["api_key"] = os.environ[self.api_key_env]
        elif self.api_base:
            kwargs["api_key"] = "no-key"
        last: Exception | None = None
        for attempt in range(self.max_retries + 1):
            self.calls += 1
            try:
                resp = litellm.completion(**kwargs)
                usage = getattr(resp, "usage", None)
                if usage is not None:
                    self.tokens_in += int(getattr(usage, "prompt_tokens", 0) or 0)
                    self.tokens_out += int(getattr(usage, "completion_tokens", 0) or 0)
                return (resp.choices[0].message.content or "").strip()
            except Exception as exc:  # noqa: BLE001 - litellm maps provider errors to many classes
                last = exc
                _, retryable = classify(exc, self.who)  # a rejected key or unknown model raises: the run stops
                if not retryable:
                    break  # a 400 (prompt too long, content filter): the same request fails again
                if attempt < self.max_retries:
                    time.sleep(max(min(2.0 ** attempt, 8.0), retry_after(exc) or 0.0))
        self.failures += 1
        raise RuntimeError(f"{self.who} model '{self.model}' failed after {attempt + 1} attempt(s): "
                           f"{type(last).__name__}: {str(last)[:200]}")
