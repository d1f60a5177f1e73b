"""Matchers: when is a retrieved passage (or sentence) relevant to a ground-truth one — ``exact_chunk``,
``exact_sentence``, ``rouge_chunk``, ``rouge_sentence`` (``conf/matcher/``), one instance per
configuration, shared by the metrics. Definitions: docs/metrics.md, "Matchers".

    >>> m = build_matcher("rouge_chunk")
    >>> m.threshold, m.inclusive, m.granularity
    (0.7, False, 'chunk')
    >>> build_matcher({"name": "rouge_sentence", "inclusive": True}).inclusive
    True
    >>> build_matcher("rouge_chunk") is m      # one matcher per configuration, shared by the metrics
    True
"""

from __future__ import annotations

from typing import Any, Mapping

from ragexp.errors import ConfigError
from ragexp.matchers.base import Matcher, Matches
from ragexp.matchers.exact import ExactMatcher
from ragexp.matchers.rouge import RougeMatcher
from ragexp.matchers.sentences import split_sentences

#: Each matcher's options and their defaults (the same values as ``conf/matcher/<name>.yaml``).
DEFAULTS: dict[str, dict[str, Any]] = {
    "exact_chunk": {},
    "exact_sentence": {},
    "rouge_chunk": {"threshold": 0.7, "inclusive": False, "use_stemmer": False, "implementation": "rouge_score"},
    "rouge_sentence": {"threshold": 0.8, "inclusive": False, "use_stemmer": False, "implementation": "rouge_score"},
}

_BUILT: dict[tuple, Matcher] = {}


def build_matcher(cfg: str | Mapping[str, Any] | Matcher) -> Matcher:
    """A matcher from a name (``"rouge_chunk"``) or a config mapping (``{name: …, threshold: …}``)."""
    if isinstance(cfg, Matcher):
        return cfg
    if isinstance(cfg, str):
        cfg = {"name": cfg}
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"matcher: expected a name or a mapping with a 'name', got {cfg!r}")
    name = cfg.get("name")
    if name not in DEFAULTS:
        raise ConfigError(f"matcher: unknown name {name!r}; expected one of: {', '.join(DEFAULTS)}")
    options = dict(DEFAULTS[name])
    unknown = sorted(k for k in cfg if k != "name" and not str(k).startswith("_") and k not in options)
    if unknown:
        raise ConfigError(f"matcher '{name}' has no option {', '.join(map(repr, unknown))}; "
                          f"its options are: {', '.join(options) or '(none)'}")
    options.update({k: v for k, v in cfg.items() if k in options})
    key = (name, repr(sorted(options.items())))
    if key not in _BUILT:
        granularity = name.split("_", 1)[1]
        try:
            _BUILT[key] = ExactMatcher(granularity) if name.startswith("exact") else RougeMatcher(granularity, **options)
        except ValueError as exc:  # the matcher's own check of its options
            raise ConfigError(f"matcher '{name}': {exc}") from None
    return _BUILT[key]


__all__ = ["DEFAULTS", "Matcher", "Matches", "ExactMatcher", "RougeMatcher", "build_matcher", "split_sentences"]
