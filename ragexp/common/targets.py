"""From a config node to an object, the one way every part of ragexp takes: ``_target_`` is the dotted
path of a function or class, the node's other keys (not those starting with ``_``) its keyword
arguments. The arguments are checked against the target's signature first, then
``hydra.utils.instantiate`` calls it; every failure is one :class:`ConfigError` line naming the config
group, and an error of ragexp's own raised by the target passes through unchanged.

    >>> build({"_target_": "ragexp.pipeline.chunking.Chunker", "size": 50}, "chunker").size
    50
    >>> build({"_target_": "ragexp.pipeline.chunking.Chunker", "sise": 50}, "chunker")
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: chunker (ragexp.pipeline.chunking.Chunker): got an unexpected keyword argument 'sise'; its arguments are size, overlap, unit, tokenizer, name
    >>> resolve("ragexp.no_such_module.f", "metric.x._target_")
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: metric.x._target_: cannot import module 'ragexp.no_such_module' (No module named 'ragexp.no_such_module'); is its folder on PYTHONPATH or the current directory?
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any, Mapping

from ragexp.common.paths import plain
from ragexp.errors import ConfigError, RagexpError


def resolve(target: Any, where: str) -> Any:
    """What ``module.name`` or ``module:name.attr`` names (``where``: the config key, for the error line)."""
    if not isinstance(target, str) or not (":" in target or "." in target) or target.startswith((":", ".")):
        raise ConfigError(f"{where}: expected a dotted path like my_module.my_function (or my_module:my_function), "
                          f"got {target!r}")
    module, _, attr = target.partition(":") if ":" in target else target.rpartition(".")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        raise ConfigError(f"{where}: cannot import module {module!r} ({exc}); is its folder on PYTHONPATH "
                          "or the current directory?") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{where}: module {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def build(node: Any, group: str, default: Any = None) -> Any:
    """The object ``node`` (a config group's node) names; ``default`` when the node is null."""
    from hydra.errors import InstantiationException
    from hydra.utils import instantiate
    from omegaconf import DictConfig

    for key in node if isinstance(node, DictConfig) else ():  # a missing value (???) refused as Hydra does it,
        node[key]  # noqa: B018 - under its full key (dataset.experiment)
    node = plain(node)
    if node is None:
        return default
    if not isinstance(node, Mapping) or "_target_" not in node:
        raise ConfigError(f"{group}: expected a mapping with a _target_ (see conf/{group}/), got {node!r}")
    target = node["_target_"]
    fn = resolve(target, f"{group}._target_")
    kwargs = {k: v for k, v in node.items() if not str(k).startswith("_")}
    try:
        inspect.signature(fn).bind(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"{group} ({target}): {exc}; its arguments are "
                          f"{', '.join(inspect.signature(fn).parameters)}") from None
    try:
        return instantiate({"_target_": target, **kwargs}, _convert_="all")
    except InstantiationException as exc:
        cause = exc.__cause__
        while cause is not None and not isinstance(cause, RagexpError) and cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, RagexpError):
            raise cause from None
        raise ConfigError(f"{group}: {cause or exc}") from None


__all__ = ["build", "resolve"]
