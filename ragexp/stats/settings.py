"""The ``stats`` settings and the comparison's counts, checked in one place for the run, a sweep's
leaderboard, ``python -m ragexp.compare`` and ``ragexp.compare_results``.

A value outside its range is a :class:`~ragexp.errors.ConfigError` of one line naming the key, what
was expected and what was got (docs/errors.md):

    >>> stats_settings({"confidence": 0.9})["confidence"], stats_settings(None)["resamples"]
    (0.9, 10000)
    >>> stats_settings({"resamples": 100_000_000})
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: stats.resamples must be a whole number from 100 to 1,000,000, got 100000000
    >>> count_setting(-1, "regressions")
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: regressions must be a whole number of at least 0, got -1
"""

from __future__ import annotations

import numbers
import warnings
from typing import Any, Mapping

from ragexp.common.renamed import current_key, renamed_note
from ragexp.errors import ConfigError, RenamedKeyWarning
from ragexp.stats.intervals import DEFAULTS, METHODS

#: more resamples change a 95% interval's bounds by less than 0.1% of its width and cost minutes
MAX_RESAMPLES = 1_000_000


def _whole(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def stats_settings(node: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``stats`` node with its defaults, every value checked."""
    out = {**DEFAULTS, **(node or {})}
    c, r, s = out["confidence"], out["resamples"], out["seed"]
    if not _real(c) or not 0 < c < 1:
        raise ConfigError(f"stats.confidence must be a number between 0 and 1 (e.g. 0.95), got {c!r}")
    if not _whole(r) or not 100 <= r <= MAX_RESAMPLES:
        raise ConfigError(f"stats.resamples must be a whole number from 100 to {MAX_RESAMPLES:,}, got {r!r}")
    if not _whole(s) or s < 0:
        raise ConfigError(f"stats.seed must be a whole number of at least 0, got {s!r}")
    if out["method"] not in METHODS:
        raise ConfigError(f"stats.method must be one of {', '.join(METHODS)}, got {out['method']!r}")
    for key in ("cluster_by", "primary"):
        if out[key] is not None and not isinstance(out[key], str):
            raise ConfigError(f"stats.{key} must be a name or null, got {out[key]!r}")
    note = renamed_note(out["primary"], f"stats.primary={out['primary']}") if out["primary"] else None
    if note:  # an old key of the keyword verdict's confusion metrics (ragexp.common.renamed)
        warnings.warn(note, RenamedKeyWarning, stacklevel=2)
        out["primary"] = current_key(out["primary"])
    if not isinstance(out["correct_with_labels"], bool):
        raise ConfigError(f"stats.correct_with_labels must be true or false, got {out['correct_with_labels']!r}")
    h = out["target_halfwidth"]
    if not _real(h) or not 0 < h < 1:
        raise ConfigError(f"stats.target_halfwidth must be a number between 0 and 1 (e.g. 0.05), got {h!r}")
    return out


def count_setting(value: Any, name: str, minimum: int = 0) -> int:
    """A whole-number setting (``regressions``: how many samples to list) of at least ``minimum``."""
    if not _whole(value) or value < minimum:
        raise ConfigError(f"{name} must be a whole number of at least {minimum}, got {value!r}")
    return int(value)


def fraction_setting(value: Any, name: str) -> float:
    """A share in (0, 1] (``min_match_fraction``)."""
    if not _real(value) or not 0 < value <= 1:
        raise ConfigError(f"{name} must be a number above 0 and at most 1, got {value!r}")
    return float(value)
