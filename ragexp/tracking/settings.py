"""The ``tracking`` config node (``conf/tracking/``) as typed settings: built once at the top of a run, a sweep or
``python -m ragexp.generate`` (:func:`tracking_settings`) and passed down, so no module below reads config keys or
restates their defaults. A setting the node leaves out (a dict given to ``ragexp.evaluate``, an older run's saved
``config.yaml``) takes its value from ``conf/tracking/local.yaml``, each default's one place.

    >>> s = TrackingSettings.from_config({"uri": "sqlite:///x.db", "traces": 0})
    >>> s.enabled, s.uri, s.experiment, s.traces, s.table_rows == conf_file("tracking/local")["table_rows"]
    (True, 'sqlite:///x.db', 'ragexp', 0, True)
    >>> TrackingSettings.from_config({"experiment": None}).experiment  # null: the default experiment
    'ragexp'
    >>> tracking_settings({"tracking": {"enabled": True}}, save=False).enabled  # ragexp.evaluate(log=False)
    False
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, Mapping

from ragexp.common.paths import conf_file, plain
from ragexp.errors import ConfigError


@dataclass(frozen=True)
class TrackingSettings:
    """Where and what a run logs to MLflow (docs/tracking.md); each field is the ``tracking.<field>`` setting."""

    enabled: bool  # false: nothing is logged (the results folder is still written)
    uri: str | None  # null: $MLFLOW_TRACKING_URI, else sqlite:///<launch dir>/mlflow.db (tracking.store.resolve_uri)
    experiment: str
    sweep_name: str | None  # a sweep's parent run's name (null: made from the sweep's overrides)
    plots: bool  # metrics.png and histograms.png
    traces: Any  # samples logged as traces: a cap, null for every one, 0 for none (checked by traces.check_cap)
    table_rows: int | None  # rows of per_sample.json (null: all)
    sweep_traces: Any  # a sweep job's traces: at most this many, the same questions in every job (null: traces)
    trace_assessments: str  # headline | all: which metrics are a trace's assessments (traces.check_assessments)
    tags: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    http_timeout_s: Any = None  # conf/tracking/server.yaml: MLflow's HTTP bounds (store.configure_http checks them)
    http_max_retries: Any = None

    @classmethod
    def from_config(cls, node: Any = None) -> "TrackingSettings":
        """Settings from a tracking node (a ``DictConfig`` or a mapping; None: the defaults)."""
        given = plain(node) if node is not None else {}
        if not isinstance(given, Mapping):
            raise ConfigError(f"tracking: expected a mapping of settings (uri, experiment, ...), got {given!r}")
        base = conf_file("tracking/local")
        names = {f.name for f in fields(cls)}
        values = {k: v for k, v in {**base, **given}.items() if k in names}
        values["experiment"] = str(values.get("experiment") or base["experiment"])
        values["tags"] = MappingProxyType(dict(values.get("tags") or {}))
        values["enabled"], values["plots"] = bool(values["enabled"]), bool(values["plots"])
        return cls(**values)

    @classmethod
    def of(cls, value: Any) -> "TrackingSettings":
        """``value`` itself when it is settings already, else settings built from it (a tracking node)."""
        return value if isinstance(value, cls) else cls.from_config(value)


def tracking_settings(cfg: Any, *, save: bool = True) -> TrackingSettings:
    """The composed config's ``tracking`` node as settings, built once at the top of a run and passed down;
    ``save=False`` (``ragexp.evaluate(log=False)``) logs nothing.

    The runner: ``tracking = tracking_settings(cfg, save=save)``, then ``tracking.enabled``, ``tracking.uri``,
    ``tracking.traces``, ... where it read ``tracking.get("enabled", True)`` and the like."""
    settings = TrackingSettings.from_config(cfg.get("tracking") if cfg is not None else None)
    return settings if save else replace(settings, enabled=False)
