"""Config files that would explode are refused before Hydra reads them (docs/errors.md).

A YAML file's aliases (``*a``) are expanded by OmegaConf into a copy each: nine lines of nine aliases
each are 9⁹ nodes, minutes of CPU and gigabytes of memory from 600 bytes (an "alias bomb"). Each
``.yaml`` file of a ``--config-dir`` (``-cd``) is composed without being expanded (PyYAML's composer
shares an alias's node) and its expanded size counted; past :data:`MAX_NODES`, or a file over
:data:`MAX_BYTES`, is one line and exit status 2.
"""

from __future__ import annotations

from pathlib import Path

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
        if isinstance(n, yaml.SequenceNode):
            for child in n.value:
                total += size(child)
                if total > limit:
                    break
        elif isinstance(n, yaml.MappingNode):
            for k, v in n.value:
                total += size(k) + size(v)
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
