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
(``tracking``), ``run_name``, ``progress``, ``execution`` (how the run is carried out: the same numbers),
``data_dir`` (a machine's folder; the dataset's digest
and source tell data apart). The whole composed config stays in the ``config.yaml`` artifact.

What an option brings by itself is what Hydra composes from the run's group choices alone
(:func:`hydra_context`: Hydra's ``runtime.choices``; one ``compose`` per set of choices, cached).
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

import functools
from typing import Any, Iterable, Mapping

from ragexp.common.secrets import MAX_PARAM_LEN, flatten, redact, scrub

#: Top-level keys that are never params: where and how the run is logged or shown, and machine paths.
NOT_PARAMS = frozenset({"tracking", "run_name", "progress", "execution", "data_dir", "hydra"})
REMOVED = "(removed)"
_MISSING = object()


# --- What the group choices give alone: Hydra's compose ------------------------------------------------


@functools.lru_cache(maxsize=None)
def _compose(overrides: tuple[str, ...], app: bool = True) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(group choices, config unresolved)`` of the root config with ``overrides``, through Hydra's compose
    API: the running app's Hydra (its search path included) when ``app``, else (or when the app has no
    such config) ragexp's conf dir. Cached (read only)."""
    from hydra import compose
    from hydra.core.global_hydra import GlobalHydra
    from omegaconf import OmegaConf

    from ragexp.common.paths import compose as compose_ragexp

    cfg = None
    if app and GlobalHydra.instance().is_initialized():
        try:
            cfg = compose(config_name="config", overrides=list(overrides), return_hydra_config=True)
        except Exception:  # noqa: BLE001 - another app's Hydra (run(cfg) from a user's @hydra.main): ragexp's own
            pass
    if cfg is None:
        cfg = compose_ragexp(overrides, hydra_config=True)
    found = OmegaConf.to_container(cfg, resolve=False)
    hydra = found.pop("hydra")
    return {k: v for k, v in hydra["runtime"]["choices"].items() if "/" not in k}, found


def composed_context(overrides: Iterable[str]) -> tuple[dict[str, Any], list[str]]:
    """What :func:`hydra_context` gives inside a Hydra job, for a config composed from ragexp's conf dir with
    ``overrides`` by Hydra's compose API (``ragexp.evaluate``): the group choices and the overrides."""
    overrides = tuple(str(o) for o in overrides)
    return _compose(overrides, app=False)[0], list(overrides)


def root_defaults() -> dict[str, Any]:
    """The root config's choice of every group (``config.yaml``'s defaults list: ``retriever: none``)."""
    return _compose(())[0]


def _group_options(group: str) -> list[str]:
    from hydra.core.global_hydra import GlobalHydra

    hydra = GlobalHydra.instance()
    if hydra.is_initialized():
        return hydra.config_loader().get_group_options(group)
    from ragexp.common.paths import conf_options

    return conf_options(group)


def _base(choices: Mapping[str, Any]) -> dict[str, Any]:
    """The config the group choices give alone (an experiment left out: its values count as set): the root
    config with the groups that differ from its own choices (the plain demo run composes nothing more)."""
    root = root_defaults()
    overrides = []
    for group, choice in sorted(choices.items()):
        if group == "experiment" or "@" in group or "/" in group or group in root and choice == root[group]:
            continue
        if choice is None:  # no option chosen: Hydra's way is to delete the group's entry
            overrides += [f"~{group}"] if root.get(group) is not None else []
        else:
            overrides.append(f"{'' if group in root else '+'}{group}={_choice_text(choice)}")
    return _compose(tuple(overrides))[1]


# --- Choices: Hydra's, or the root's where Hydra has none ---------------------------------------------


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
    """Each group's option: ``known`` (Hydra's choices) as given; a group Hydra did not record (a list of
    options, ``metric: [recall_at_k, mrr, ndcg]``), or every group of a config composed elsewhere: the
    option its ``name`` names, else the root config's choice when the keys are its keys, else the
    members it holds (a list)."""
    out = {k: v for k, v in (known or {}).items() if not k.startswith("hydra/")}
    for group, default in root_defaults().items():
        if group in out or (known is not None and group not in config):
            continue
        node = config.get(group)
        if not isinstance(node, Mapping):
            out[group] = None
            continue
        options = _group_options(group)
        members = [k for k, v in node.items() if isinstance(v, Mapping) and k in options]
        name, rooted = node.get("name"), _compose(())[1].get(group)
        if isinstance(name, str) and name in options:
            out[group] = name
        elif isinstance(rooted, Mapping) and set(rooted) == set(node) or not members:
            out[group] = default
        else:
            out[group] = members if len(members) > 1 else members[0]
    return out


# --- Params -----------------------------------------------------------------------------------------------


def run_params(config: Mapping[str, Any], choices: Mapping[str, Any] | None = None,
               overrides: Iterable[str] = ()) -> dict[str, str]:
    """The params that tell this run apart (module docstring), as MLflow strings, secrets redacted.

    ``config``: the composed config, resolved, as plain data. ``choices``: Hydra's group choices
    (derived from ``config`` when ``None``). ``overrides``: the command line's ``key=value`` items.
    """
    choices = derive_choices(config, choices)
    base_config = _base(choices)
    groups = [g for g in config if g in choices] + [g for g in choices if g not in config]
    out: dict[str, Any] = {}
    for group in groups:
        if group in NOT_PARAMS:
            continue
        out[group] = _choice_text(choices.get(group))
        node = config.get(group)
        if group == "experiment" or not isinstance(node, Mapping):
            continue  # an experiment's values land in the other groups, and are compared there
        base = base_config.get(group)
        base = _resolved(base if isinstance(base, Mapping) else {}, group, config)
        if node.get("_target_") and base.get("_target_") and node["_target_"] != base["_target_"]:
            out[group] = f"{out[group]} ({node['_target_']})"
        out.update(_diff(node, base, group))
    root = _resolved({k: v for k, v in base_config.items() if k not in NOT_PARAMS and k not in choices}, None, config)
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
        resolved = OmegaConf.to_container(OmegaConf.create({**config, **base} if group is None else
                                                           {**config, group: base}), resolve=True)
        return resolved if group is None else resolved[group]
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
            node = node.get(part, _MISSING) if isinstance(node, Mapping) else _MISSING
        if isinstance(node, Mapping):
            out.update({f"{key}.{k}": v for k, v in flatten(node).items()} if node else {key: node})
        elif node is not _MISSING:
            out[key] = node
    return {k: v for k, v in out.items() if not k.endswith("._target_")}


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


def run_name(dataset: str, params: Mapping[str, str]) -> str:
    """A single run's name: the dataset, then the group choices that differ from the root config's
    and the values set (``demo · retriever=bm25 · top_k=5``); the plain demo run is ``demo``."""
    defaults = root_defaults()
    choices = [f"{k}={v}" for k, v in params.items()
               if "." not in k and k != "dataset" and k in defaults and v != _choice_text(defaults[k])]
    choices += [f"{k}={v}" for k, v in params.items() if "." not in k and k not in defaults and k != "dataset"]
    keys = [k for k in params if "." in k]
    values = [f"{s}={v if len(v := params[k]) <= 40 else v[:39] + '…'}" for s, k in zip(_short_keys(keys), keys)]
    dataset_choice = params.get("dataset")
    head = dataset if dataset_choice in (None, dataset) else f"{dataset} ({dataset_choice})"
    return " · ".join([scrub(head), *map(scrub, choices), *map(scrub, values)])


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
    return scrub("sweep " + " × ".join(parts) + f" · {started}" if parts else f"sweep · {started}")


def _noise(key: str) -> bool:
    return "/" in key or key.split(".")[0] in NOT_PARAMS


def _short_keys(keys: list[str]) -> list[str]:
    """``retriever.top_k`` → ``top_k`` (the group is implied), unless two keys would then read the same."""
    short = [k.split(".", 1)[1] if "." in k else k for k in keys]
    return [k if short.count(s) > 1 else s for k, s in zip(keys, short)]
