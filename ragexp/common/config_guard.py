"""Config files that would explode are refused before Hydra reads them (docs/errors.md).

A YAML file's aliases (``*a``) are expanded by OmegaConf into a copy each: nine lines of nine aliases
each are 9⁹ nodes, minutes of CPU and gigabytes of memory from 600 bytes (an "alias bomb"). Each
``.yaml`` file of a ``--config-dir`` (``-cd``) is composed without being expanded (PyYAML's composer
shares an alias's node) and its expanded size counted; past :data:`MAX_NODES`, or a file over
:data:`MAX_BYTES`, is one line and exit status 2. ``${...}`` interpolations can do the same from any file or
the command line (nine references to nine references ...): the composed config is checked before the run
(:func:`check_interpolations`), a value standing for more than :data:`MAX_EXPANDED_CHARS` is one line.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ragexp.errors import ConfigError

#: Nodes a config file may expand to (the shipped configs have a few hundred)
MAX_NODES = 200_000
#: Bytes a config file may hold
MAX_BYTES = 10_000_000
#: Files of a config folder that are checked (a config folder holds tens)
MAX_FILES = 5_000


def config_dirs(argv: list[str]) -> list[Path]:
    """The folders ``--config-dir``/``-cd`` (and ``--config-path``/``-cp``) name on a command line."""
    out = []
    for i, arg in enumerate(argv):
        for flag in ("--config-dir", "-cd", "--config-path", "-cp"):
            if arg == flag and i + 1 < len(argv):
                out.append(Path(argv[i + 1]).expanduser())
            elif arg.startswith(flag + "="):
                out.append(Path(arg.split("=", 1)[1]).expanduser())
    return out


def expanded_size(node, limit: int = MAX_NODES) -> int:
    """Nodes ``node`` stands for once every alias is copied (counting stops past ``limit``)."""
    import yaml

    memo: dict[int, int] = {}

    def size(n) -> int:
        key = id(n)
        if key in memo:
            return memo[key]
        memo[key] = limit + 1  # a node met again while it is being counted: a cycle expands without end
        total = 1
        if isinstance(n, yaml.CollectionNode):  # a mapping's value holds (key, value) node pairs
            for child in (n.value if isinstance(n, yaml.SequenceNode) else (c for pair in n.value for c in pair)):
                total += size(child)
                if total > limit:
                    break
        memo[key] = min(total, limit + 1)
        return memo[key]

    return size(node)


def check_config_file(path: Path) -> None:
    """Raise :class:`ConfigError` for a config file too large, or whose aliases expand past :data:`MAX_NODES`."""
    import yaml

    try:
        if path.stat().st_size > MAX_BYTES:
            raise ConfigError(f"{path}: {path.stat().st_size:,} bytes, more than a config file may hold "
                              f"({MAX_BYTES:,}); refused before reading it")
        if not path.is_file():
            raise ConfigError(f"{path}: not a regular file; a config folder holds .yaml files")
        with open(path, encoding="utf-8") as fh:
            nodes = list(yaml.compose_all(fh, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return  # Hydra says what is wrong with it, in its own line
    n = sum(expanded_size(node) for node in nodes if node is not None)
    if n > MAX_NODES:
        raise ConfigError(f"{path}: its YAML aliases (*name) expand to more than {MAX_NODES:,} values (an alias "
                          "bomb?); refused before Hydra expands them. Write the values out, or use ${...} "
                          "interpolation")


def check_config_dirs(argv: list[str]) -> None:
    """Check every ``.yaml``/``.yml`` file of the config folders the command line names."""
    for folder in config_dirs(argv):
        if not folder.is_dir():
            continue
        for i, path in enumerate(sorted(p for p in folder.rglob("*") if p.suffix in (".yaml", ".yml"))):
            if i >= MAX_FILES:
                break
            check_config_file(path)


#: Characters one config value may stand for once its ``${...}`` interpolations are resolved
MAX_EXPANDED_CHARS = 10_000_000
_REFERENCE = re.compile(r"\$\{([^${}:\s]+)\}")  # ${a.b}, ${.a}, ${..a}: a plain reference (no resolver, no nesting)


def check_interpolations(cfg: Any, limit: int = MAX_EXPANDED_CHARS) -> None:
    """Raise :class:`ConfigError` naming the first value of a composed config that its ``${...}`` references
    would expand past ``limit`` characters (nine references to nine references ... is 9ⁿ copies: an
    "interpolation bomb" OmegaConf would build when the run's config is saved). Counted on the unresolved
    tree, each value once (linear in the config's size); resolvers (``${oc.env:X}``) count as their text.

    >>> from omegaconf import OmegaConf
    >>> check_interpolations(OmegaConf.create({"a": "x" * 10, "b": "${a}${a}", "c": {"d": "${..b}"}}), limit=25)
    >>> check_interpolations(OmegaConf.create({"a": "x" * 10, "b": "${a}${a}", "c": {"d": "${..b}${..b}"}}), limit=25)
    Traceback (most recent call last):
    ...
    ragexp.errors.ConfigError: config value c.d: its ${...} references expand to more than 25 characters (an interpolation bomb?); refused before they are resolved
    """
    from omegaconf import OmegaConf

    tree = OmegaConf.to_container(cfg, resolve=False)
    memo: dict[tuple, int] = {}

    def at(path: tuple) -> Any:
        node: Any = tree
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            elif isinstance(node, list) and str(key).isdigit() and int(key) < len(node):
                node = node[int(key)]
            else:
                return _MISSING
        return node

    def target(ref: str, parent: tuple) -> tuple | None:
        if ref.startswith("."):
            ups = len(ref) - len(ref.lstrip("."))
            base = parent[:len(parent) - (ups - 1)] if ups - 1 <= len(parent) else None
            if base is None:
                return None
            path = base + tuple(k for k in ref[ups:].split(".") if k)
        else:
            path = tuple(ref.split("."))
        return path if at(path) is not _MISSING else None

    def size(path: tuple) -> int:
        if path in memo:
            return memo[path]
        memo[path] = limit + 1  # met again while counted: a cycle (OmegaConf refuses it too)
        value, total = at(path), 0
        if isinstance(value, (dict, list)):
            for k, _ in _items(value):
                total += size(path + (k,))
                if total > limit:
                    break
        elif isinstance(value, str):
            total = len(value)
            for match in _REFERENCE.finditer(value):
                found = target(match.group(1), path[:-1])
                if found is not None:
                    total += size(found) - len(match.group(0))
                if total > limit:
                    break
        else:
            total = len(str(value))
        memo[path] = min(total, limit + 1)
        return memo[path]

    def leaves(node: Any, path: tuple):
        if isinstance(node, (dict, list)):
            for k, v in _items(node):
                yield from leaves(v, path + (k,))
        elif isinstance(node, str) and "${" in node:
            yield path

    for path in leaves(tree, ()):
        try:
            big = size(path) > limit
        except RecursionError:
            raise ConfigError(f"config value {'.'.join(map(str, path))}: its ${{...}} references are nested too deep "
                              "to resolve") from None
        if big:
            raise ConfigError(f"config value {'.'.join(map(str, path))}: its ${{...}} references expand to more than "
                              f"{limit:,} characters (an interpolation bomb?); refused before they are resolved")


def _items(node: dict | list) -> Any:
    """(key, value) of a mapping, (index as text, item) of a list: the path parts :func:`check_interpolations` uses."""
    return node.items() if isinstance(node, dict) else ((str(i), v) for i, v in enumerate(node))


_MISSING = object()
