"""The LLM judge: one small interface in front of litellm (docs/metrics.md#answer_similarity, docs/metrics.md#questeval_recall).

``build_judge(cfg, specs)`` checks everything a run needs from the judge *before any work* —
credentials (one line naming the variable to set), the server URL, the prompt versions, the
budget's price — and returns a :class:`Judge`. Modules:

- :mod:`.settings` — ``conf/judge/<name>.yaml`` = :class:`JudgeSettings`;
- :mod:`.templates` and ``prompts/`` — versioned prompt files, content delimited and defused;
- :mod:`.parse` — replies → typed verdicts, tolerant of how models answer;
- :mod:`.client` — the one retry layer, rate limit, concurrency, budget, usage, fail-fast on an
  unreachable server;
- :mod:`.loop` — the event loop the calls run on, and :func:`.loop.shutdown`, which closes the HTTP
  clients on every way out;
- :mod:`.cache` — the persistent SQLite cache shared by runs and sweep jobs;
- :mod:`.engine` — the metric plans, shared verdicts, and the event loop.

Importing this package imports neither litellm nor anything heavy.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ragexp.common.paths import conf_dir, conf_file, plain
from ragexp.errors import ConfigError

CONF_DIR = conf_dir() / "judge"
JUDGE_NAMES_HINT = "gpt4o, gpt4o_mini, claude_sonnet, gemini_flash, ollama, openai_compatible"


def _settings(cfg: Any):
    from ragexp.judge.settings import JudgeSettings

    if isinstance(cfg, JudgeSettings):
        return cfg
    if isinstance(cfg, str):
        path = CONF_DIR / f"{cfg}.yaml"
        if not path.exists():
            raise ConfigError(f"no judge '{cfg}' (looked for {path}); choose one of: {JUDGE_NAMES_HINT}")
        cfg = conf_file(f"judge/{cfg}")  # what differs from conf/judge_base.yaml, which from_config adds
    cfg = plain(cfg)
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"judge: expected a judge config (mapping) or a name, got {cfg!r}")
    return JudgeSettings.from_config(cfg)


def build_judge(cfg: Any, specs: Sequence[Any] = ()) -> "Judge":
    """A ready :class:`Judge` from a config node, a ``conf/judge`` name, or :class:`JudgeSettings`.

    Raises :class:`ragexp.errors.CredentialsError` when the key's variable is unset and
    :class:`ragexp.errors.ConfigError` for anything else that would fail later.
    """
    judge_specs = [s for s in specs if getattr(getattr(s, "info", None), "judge", False)]
    if cfg is None:
        names = ", ".join(s.key for s in judge_specs) or "judge metrics"
        raise ConfigError(f"{names} ask an LLM judge, but none is configured: add judge=<name> "
                          f"({JUDGE_NAMES_HINT})")
    settings = _settings(cfg)
    settings.check()
    from ragexp.judge.engine import Judge, check_specs

    check_specs(judge_specs)
    cache = None
    if settings.cache:
        from ragexp.judge.errors import CacheError
        from ragexp.judge.cache import CACHE_ERRORS, open_cache

        path = settings.resolved_cache_path()
        try:  # before any work: a cache that cannot take a reply would fail after the first one is paid for
            cache = open_cache(settings.cache_backend, path)
            cache.check_writable()
        except CacheError as exc:  # the PostgreSQL backend: its message names the server (no credentials)
            raise ConfigError(f"judge cache {exc}: start the server or fix judge.cache_backend, "
                              "or set judge.cache=false") from None
        except (OSError, *CACHE_ERRORS) as exc:
            raise ConfigError(f"judge cache {path} cannot be written ({type(exc).__name__}: {exc}): make it and its "
                              "folder writable, or set judge.cache_path=<a writable file> or judge.cache=false") from None
    judge = Judge(settings, cache)
    if settings.max_cost_usd is not None and not judge.prices.known:
        raise ConfigError(f"judge.max_cost_usd is set but litellm has no price for '{settings.model}': "
                          "set judge.cost_per_million_in and judge.cost_per_million_out")
    return judge


#: Statuses of a judge score that failed (the judge did not give a usable verdict).
FAILED = ("timeout", "rate_limited", "api_error", "parse_error")


def judge_failed(scores: Mapping[str, Sequence[Any]]) -> str | None:
    """One line when no judge score of any sample is ``ok`` and some failed: the run measured nothing.

    ``scores``: metric key → that metric's scores (what :meth:`Judge.score` returns). None otherwise.
    """
    counts: dict[str, int] = {}
    first = ""
    for per in scores.values():
        for sc in per:
            if sc.status == "ok":
                return None
            if sc.status in FAILED:
                counts[sc.status] = counts.get(sc.status, 0) + 1
                first = first or str(sc.detail or "")[:200]
    return failed_line(counts, first)


def failed_line(counts: Mapping[str, int], first: str) -> str | None:
    """:func:`judge_failed`'s line from the failed statuses' counts (no ``ok`` among them) and the first reason."""
    counts = {k: n for k, n in counts.items() if k in FAILED and n}
    if not counts:
        return None
    told = ", ".join(f"{n} {status}" for status, n in sorted(counts.items()))
    return f"every judge metric failed on every sample ({told}); the first: {first}"


__all__ = ["build_judge", "judge_failed"]
