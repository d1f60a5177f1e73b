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

import functools
from typing import Any, Mapping

from ragexp.common.paths import conf_dir, conf_file
from ragexp.common.targets import build
from ragexp.errors import ConfigError
from ragexp.matchers.base import Matcher, Matches
from ragexp.matchers.exact import ExactMatcher
from ragexp.matchers.rouge import RougeMatcher
from ragexp.matchers.sentences import split_sentences

#: The matchers: one ``conf/matcher/<name>.yaml`` each, the one place of its class and its options' defaults.
MATCHER_NAMES = tuple(sorted(p.stem for p in (conf_dir() / "matcher").glob("*.yaml")))

_BUILT: dict[str, Matcher] = {}
_conf = functools.cache(lambda name: conf_file(f"matcher/{name}"))  # read-only


def build_matcher(cfg: str | Mapping[str, Any] | Matcher) -> Matcher:
    """A matcher from a name (``"rouge_chunk"``) or a config mapping (``{name: …, threshold: …}``)."""
    if isinstance(cfg, Matcher):
        return cfg
    if isinstance(cfg, str):
        cfg = {"name": cfg}
    if not isinstance(cfg, Mapping):
        raise ConfigError(f"matcher: expected a name or a mapping with a 'name', got {cfg!r}")
    name = cfg.get("name")
    if name not in MATCHER_NAMES:
        raise ConfigError(f"matcher: unknown name {name!r}; expected one of: {', '.join(MATCHER_NAMES)}")
    node = {k: v for k, v in _conf(name).items() if k != "name"}
    options = [k for k in node if not k.startswith("_")]
    unknown = sorted(k for k in cfg if k != "name" and not str(k).startswith("_") and k not in options)
    if unknown:
        raise ConfigError(f"matcher '{name}' has no option {', '.join(map(repr, unknown))}; "
                          f"its options are: {', '.join(options) or '(none)'}")
    node.update({k: v for k, v in cfg.items() if k in options}, granularity=name.split("_", 1)[1])
    key = repr(sorted(node.items()))
    if key not in _BUILT:
        _BUILT[key] = build(node, f"matcher '{name}'")
    return _BUILT[key]


__all__ = ["MATCHER_NAMES", "Matcher", "Matches", "ExactMatcher", "RougeMatcher", "build_matcher", "split_sentences"]
