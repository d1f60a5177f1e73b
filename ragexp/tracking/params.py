"""What tells one run from another in MLflow's runs table: a few params under stable keys, and names.

A run's params are

- the chosen option of every config group, under the group's name (``retriever: bm25``,
  ``judge: null``, ``metric: default``);
- every value that differs from that option's own YAML (``retriever.top_k: 3``), a member a suite
  lost (``metric.bleu: (removed)``), a key the config did not have (``extra.note``);
- every key set on the command line, even to its default, so all children of a sweep carry
  the swept keys (``dataset.system: strong`` beside ``weak``).

A key is the dotted path of the value in the composed config. An option's keys are its target's
keyword arguments, and options of a group share the names of what they share (BM25's ``k1`` is
``retriever.k1`` under ``retriever=bm25`` and ``retriever=hybrid``), so the compare view lines them
up. Never params: ``_target_`` (the option implies it; a changed group ``_target_`` is shown in
the group's value, ``pipeline: custom (my_rag.KeywordRAG)``), where and how the run is logged
(``tracking``), ``run_name``, ``progress``, ``data_dir`` (a machine's folder; the dataset's digest
and source tell data apart). The whole composed config stays in the ``config.yaml`` artifact.

An option's defaults are read from its YAML file (a suite merges its members' files in its
``defaults`` order): 15–25 ms for the demo's params here, where composing the whole config again
through Hydra took 0.3–0.55 s.
Secrets are redacted (:mod:`ragexp.common.secrets`).

    >>> p = run_params({"dataset": {"_target_": "ragexp.datasets.demo.load_demo", "name": "demo", "system": "weak",
    ...                             "path": None, "limit": None},
    ...                 "retriever": {"_target_": "ragexp.pipeline.retrievers.BM25Retriever", "name": "bm25",
    ...                               "top_k": 3, "k1": 1.5, "b": 0.75, "method": "lucene", "stopwords": "en"},
    ...                 "progress": False}, {"dataset": "demo", "retriever": "bm25"})
    >>> p
    {'dataset': 'demo', 'dataset.system': 'weak', 'retriever': 'bm25', 'retriever.top_k': '3'}
    >>> run_name("demo", p)
    'demo · retriever=bm25 · system=weak · top_k=3'
    >>> sweep_name(["retriever=bm25,dense", "retriever.top_k=3,5", "progress=false"], {}, "2026-11-23 14:05")
    'sweep retriever=bm25,dense × top_k=3,5 · 2026-11-23 14:05'
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping

from ragexp.common.secrets import MAX_PARAM_LEN, redact, scrub

#: Top-level keys that are never params: where and how the run is logged or shown, and machine paths.
NOT_PARAMS = frozenset({"tracking", "run_name", "progress", "data_dir", "hydra"})
REMOVED = "(removed)"
#: MLflow's limit on a run name.
MAX_NAME = 250

_LOCK = threading.Lock()
_REPO: list[Any] = []  # ragexp's own Hydra config repository, made once if ever needed
_OPTIONS: dict[tuple[str, str], Any] = {}  # (group, option) → its defaults, or None
_UNREADABLE = object()


# --- An option's defaults: its YAML file (ragexp's conf dir first, else Hydra's search path) -------------


def option_defaults(group: str, option: Any) -> dict[str, Any] | None:
    """The values an option of a group brings by itself (a suite: its members merged in its
    ``defaults`` order), as plain data; ``None`` when the option cannot be read on its own (not
    found, or a defaults list ragexp's suites do not use: another group, a package, an override)."""
    options = list(option) if isinstance(option, (list, tuple)) else [option]
    merged: dict[str, Any] = {}
    for name in options:
        key = (group, str(name))
        with _LOCK:
            known = key in _OPTIONS
            found = _OPTIONS.get(key)
        if not known:
            found = _load_option(group, str(name), depth=0)
            with _LOCK:
                _OPTIONS[key] = found
        if found is None:
            return None
        merged = _merge(merged, found)
    return merged


def _load_option(group: str, name: str, depth: int) -> dict[str, Any] | None:
    raw = _read(group, name)
    if raw is _UNREADABLE or depth > 8:
        return None
    own, entries = raw
    if "_self_" not in entries:
        entries = [*entries, "_self_"]  # Hydra >= 1.1: a config's own values come after its defaults
    merged: dict[str, Any] = {}
    for entry in entries:
        member = own if entry == "_self_" else _load_option(group, entry, depth + 1)
        if member is None:
            return None
        merged = _merge(merged, member)
    return merged


def _read(group: str, name: str) -> Any:
    """``(own values, defaults entries)`` of ``<group>/<name>.yaml``, or ``_UNREADABLE``.

    ragexp's conf dir is Hydra's primary config path (it wins over any added search path), read
    with a C YAML parser and OmegaConf's scalar rules (0.1 ms a file, against 7 ms through
    OmegaConf); an option found only on the user's search path is read through Hydra."""
    from ragexp.common.paths import conf_dir

    path = conf_dir() / group / f"{name}.yaml"
    if not path.is_file():
        return _read_through_hydra(group, name)
    import yaml

    text = path.read_text()
    if "@package" in text.split("\n\n", 1)[0]:
        return _UNREADABLE  # a package header (an experiment's _global_): not one group's values
    try:
        data = yaml.load(text, Loader=_yaml_loader()) or {}
    except yaml.YAMLError:
        return _UNREADABLE
    entries = data.pop("defaults", None) or []
    if not isinstance(data, dict) or not all(isinstance(e, str) and "/" not in e for e in entries):
        return _UNREADABLE  # another group, an override, an optional entry: compose would be needed
    return data, entries


def _read_through_hydra(group: str, name: str) -> Any:
    from omegaconf import OmegaConf

    try:
        loaded = _repository().load_config(f"{group}/{name}")
    except Exception:  # noqa: BLE001 - a file Hydra cannot read: no defaults to compare with
        return _UNREADABLE
    if loaded is None or (loaded.header or {}).get("package"):
        return _UNREADABLE
    entries = []
    for d in loaded.defaults_list or []:
        path = getattr(d, "path", None)
        if d.is_self():
            entries.append("_self_")
        elif type(d).__name__ != "ConfigDefault" or d.package or d.is_override() or not path or "/" in path:
            return _UNREADABLE
        else:
            entries.append(path)
    return OmegaConf.to_container(loaded.config, resolve=False), entries


def _repository() -> Any:
    """Hydra's config repository: the running app's (it knows the user's search path), else ragexp's conf dir."""
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if hydra.is_initialized():
        repo = getattr(hydra.config_loader(), "repository", None)
        if repo is not None:
            return repo
    with _LOCK:
        if not _REPO:
            from hydra._internal.config_repository import ConfigRepository
            from hydra._internal.utils import create_config_search_path

            from ragexp.common.paths import conf_dir

            _REPO.append(ConfigRepository(create_config_search_path(str(conf_dir()))))
        return _REPO[0]


def _yaml_loader() -> Any:
    """libyaml's safe loader with OmegaConf's scalar rules (``1e-3`` is a float, no timestamps)."""
    import yaml
    from omegaconf._utils import get_yaml_loader

    rules = get_yaml_loader()
    if not hasattr(yaml, "CSafeLoader"):
        return rules

    class Loader(yaml.CSafeLoader):
        yaml_implicit_resolvers = rules.yaml_implicit_resolvers

    return Loader


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        if isinstance(v, Mapping) and isinstance(out.get(k), Mapping):
            out[k] = _merge(out[k], v)
        else:
            out[k] = v
    return out


def _root() -> tuple[dict[str, Any], dict[str, Any]]:
    """``config.yaml``: the group choices of its defaults list (``retriever: none``) and its own values."""
    import yaml

    from ragexp.common.paths import conf_dir

    data = yaml.load((conf_dir() / "config.yaml").read_text(), Loader=_yaml_loader()) or {}
    choices = {}
    for entry in data.pop("defaults", None) or []:
        if isinstance(entry, dict) and len(entry) == 1:
            (group, option), = entry.items()
            if " " not in group and "/" not in group:
                choices[group] = option
    return choices, data


def root_defaults() -> dict[str, Any]:
    """The root config's choice of every group (``config.yaml``'s defaults list: ``retriever: none``)."""
    return _root()[0]


def _group_options(group: str) -> list[str]:
    from ragexp.common.paths import conf_dir

    return sorted(f.stem for f in (conf_dir() / group).glob("*.yaml"))


# --- Choices: Hydra's, or derived from the config ---------------------------------------------------------


def hydra_context() -> tuple[dict[str, Any] | None, list[str]]:
    """The running Hydra job's group choices and command-line overrides, or ``(None, [])`` without Hydra."""
    try:
        from hydra.core.hydra_config import HydraConfig
        from omegaconf import OmegaConf

        if not HydraConfig.initialized():
            return None, []
        hc = HydraConfig.get()
        choices = OmegaConf.to_container(hc.runtime.choices, resolve=True)
        return {k: v for k, v in choices.items() if not k.startswith("hydra/")}, [str(o) for o in hc.overrides.task]
    except Exception:  # noqa: BLE001 - Hydra not running (run(cfg) from a script)
        return None, []


def derive_choices(config: Mapping[str, Any], known: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Each group's option where Hydra did not record it (a config composed by ``ragexp.evaluate``;
    a list of options, as ``metric: [recall_at_k, mrr, ndcg]`` in an experiment): ``known`` as given,
    the others derived from the config (:func:`_derive`)."""
    out = dict(known or {})
    for group, default in root_defaults().items():
        if group not in out and (known is None or group in config):  # Hydra leaves out only list choices
            out[group] = _derive(group, config.get(group), default)
    return out


def _derive(group: str, node: Any, default: Any) -> Any:
    """The option named by the group's ``name`` when its file has the same target; else the option,
    or list of options (a suite's members), the values differ least from (the root's choice on a tie)."""
    if not isinstance(node, Mapping):
        return None
    name = node.get("name")
    if isinstance(name, str):
        known = option_defaults(group, name)
        if known is not None and known.get("_target_") == node.get("_target_"):
            return name
    options = _group_options(group)
    candidates: list[Any] = list(options)
    members = [k for k, v in node.items() if isinstance(v, Mapping) and k in options]
    if len(members) > 1:
        candidates.append(members)
    ranked = []
    for i, option in enumerate(candidates):
        base = option_defaults(group, option)
        if base is not None:
            ranked.append((len(_diff(node, base, group)), option != default, i))
    return candidates[min(ranked)[2]] if ranked else name


# --- Params -----------------------------------------------------------------------------------------------


def run_params(config: Mapping[str, Any], choices: Mapping[str, Any] | None = None,
               overrides: Iterable[str] = ()) -> dict[str, str]:
    """The params that tell this run apart (module docstring), as MLflow strings, secrets redacted.

    ``config``: the composed config, resolved, as plain data. ``choices``: Hydra's group choices
    (derived from ``config`` when ``None``). ``overrides``: the command line's ``key=value`` items.
    """
    choices = derive_choices(config, choices)
    groups = [g for g in config if g in choices] + [g for g in choices if g not in config]
    out: dict[str, Any] = {}
    for group in groups:
        if group in NOT_PARAMS:
            continue
        choice = choices.get(group)
        out[group] = _choice_text(choice)
        node = config.get(group)
        if group == "experiment" or not isinstance(node, Mapping):
            continue  # an experiment's values land in the other groups, and are compared there
        base = option_defaults(group, choice) if choice is not None else {}
        if base is None:  # an option that cannot be read alone: all its values
            base = {}
        base = _resolved(base, group, config)
        if node.get("_target_") and base.get("_target_") and node["_target_"] != base["_target_"]:
            out[group] = f"{out[group]} ({node['_target_']})"
        out.update(_diff(node, base, group))
    root = _resolved({k: v for k, v in _root()[1].items() if k not in NOT_PARAMS}, None, config)
    for key, value in config.items():
        if key in NOT_PARAMS or key in choices:
            continue
        if isinstance(value, Mapping):
            out.update(_diff(value, root.get(key) if isinstance(root.get(key), Mapping) else {}, key))
        elif key not in root or not _same(root[key], value):
            out[key] = value
    out.update(_set_on_command_line(config, choices, overrides))
    return {k: _text(v) for k, v in redact(out).items()}


def _diff(node: Mapping[str, Any], base: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """Dotted keys of ``node`` whose values differ from ``base`` (``_target_`` never), and what it lost."""
    out: dict[str, Any] = {}
    for k, v in node.items():
        if k == "_target_":
            continue
        key = f"{prefix}.{k}"
        if isinstance(v, Mapping) and v:
            out.update(_diff(v, base.get(k) if isinstance(base.get(k), Mapping) else {}, key))
        elif k not in base or not _same(base[k], v):
            out[key] = v
    for k in base:
        if k not in node and k != "_target_":
            out[f"{prefix}.{k}"] = REMOVED
    return out


def _same(a: Any, b: Any) -> bool:
    """Equal values, NaN included (``zero_division: .nan`` is its own default)."""
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


def _resolved(base: Mapping[str, Any], group: str | None, config: Mapping[str, Any]) -> dict[str, Any]:
    """An option's defaults with interpolations (``${data_dir}/squad2/…``) resolved against the run's config."""
    from omegaconf import OmegaConf

    if "${" not in repr(base):
        return dict(base)
    try:
        root = dict(config)
        if group is None:
            root.update(base)
            return OmegaConf.to_container(OmegaConf.create(root), resolve=True)
        root[group] = base
        return OmegaConf.to_container(OmegaConf.create(root), resolve=True)[group]
    except Exception:  # noqa: BLE001 - an interpolation that only resolves inside Hydra: compare as written
        return dict(base)


def _set_on_command_line(config: Mapping[str, Any], choices: Mapping[str, Any],
                         overrides: Iterable[str]) -> dict[str, Any]:
    """The values typed on the command line (``retriever.top_k=5``), default or not."""
    out: dict[str, Any] = {}
    for override in overrides:
        raw = str(override)
        key = raw.split("=", 1)[0].lstrip("+~")
        if "/" in key or key in choices or key.split(".")[0] in NOT_PARAMS or "." not in key and key not in config:
            continue
        if raw.startswith("~"):
            out[key] = REMOVED
            continue
        node: Any = config
        for part in key.split("."):
            node = node.get(part) if isinstance(node, Mapping) else None
        if isinstance(node, Mapping):
            from ragexp.common.secrets import flatten

            out.update({f"{key}.{k}": v for k, v in flatten(node).items()} if node else {key: node})
        elif node is not None or _has(config, key):
            out[key] = node
    return {k: v for k, v in out.items() if not k.endswith("._target_")}


def _has(config: Mapping[str, Any], key: str) -> bool:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _choice_text(choice: Any) -> str:
    if choice is None:
        return "null"
    if isinstance(choice, (list, tuple)):
        return "[" + ",".join(map(str, choice)) + "]"
    return str(choice)


def _text(value: Any) -> str:
    text = "null" if value is None else str(value)
    return text if len(text) <= MAX_PARAM_LEN else text[: MAX_PARAM_LEN - 3] + "..."


# --- Names ------------------------------------------------------------------------------------------------


def run_name(dataset: str, params: Mapping[str, str], defaults: Mapping[str, Any] | None = None) -> str:
    """A single run's name: the dataset, then the group choices that differ from the root config's
    and the values set (``demo · retriever=bm25 · top_k=5``); the plain demo run is ``demo``."""
    defaults = root_defaults() if defaults is None else defaults
    choices = [f"{k}={v}" for k, v in params.items()
               if "." not in k and k != "dataset" and k in defaults and v != _choice_text(defaults[k])]
    choices += [f"{k}={v}" for k, v in params.items() if "." not in k and k not in defaults and k != "dataset"]
    keys = [k for k in params if "." in k]
    values = [f"{s}={_short_value(params[k])}" for s, k in zip(_short_keys(keys), keys)]
    dataset_choice = params.get("dataset")
    head = dataset if dataset_choice in (None, dataset) else f"{dataset} ({dataset_choice})"
    return _cut(" · ".join([scrub(head), *map(scrub, choices), *map(scrub, values)]))


def sweep_name(overrides: Iterable[str], sweeper_params: Mapping[str, Any] | None, started: str) -> str:
    """A sweep parent's name: what it sweeps and when (``sweep retriever=bm25,dense × top_k=3,5 · 2026-11-23 14:05``).

    The swept command-line overrides and the sweeper's own ``params`` (an experiment's grid, an
    Optuna search space); with nothing swept, the overrides the jobs share.
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    items = [str(o) for o in overrides]
    try:
        parsed = OverridesParser.create().parse_overrides(items)
        swept = [o.input_line for o in parsed if o.is_sweep_override()]
    except Exception:  # noqa: BLE001 - Hydra parsed them already; be lenient here
        swept = [o for o in items if "," in o]
    swept += [f"{k}={v}" for k, v in (sweeper_params or {}).items()]
    chosen = [o for o in (swept or items) if not _noise(o.split("=", 1)[0].lstrip("+~"))]
    short = _short_keys([o.split("=", 1)[0].lstrip("+~") for o in chosen])
    parts = [f"{s}={o.split('=', 1)[1] if '=' in o else ''}" for s, o in zip(short, chosen)]
    return _cut(scrub("sweep " + " × ".join(parts) + f" · {started}" if parts else f"sweep · {started}"))


def _noise(key: str) -> bool:
    return "/" in key or key.split(".")[0] in NOT_PARAMS


def _short_keys(keys: list[str]) -> list[str]:
    """``retriever.top_k`` → ``top_k`` (the group is implied), unless two keys would then read the same."""
    short = [k.split(".", 1)[1] if "." in k else k for k in keys]
    return [k if short.count(s) > 1 else s for k, s in zip(keys, short)]


def _short_value(value: str) -> str:
    return value if len(value) <= 40 else value[:39] + "…"


def _cut(name: str) -> str:
    return name if len(name) <= MAX_NAME else name[: MAX_NAME - 1] + "…"
