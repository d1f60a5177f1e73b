"""ragexp as a library: :func:`evaluate` rows in one call (the same config groups and the same steps as
``python -m ragexp``, :func:`ragexp.workflow.runner.execute`: one code path), :func:`compare_results`
of two of them (not named ``compare``: that is the module behind ``python -m ragexp.compare``).
Definitions: docs/api.md.

    >>> import ragexp
    >>> rows = [{"question": "Capital of France?", "response": "Paris", "truth": ["Paris"]},
    ...         {"question": "Largest planet?", "response": "Saturn", "truth": ["Jupiter"]}]
    >>> result = ragexp.evaluate(rows, metric="answer", log=False,
    ...                          columns={"query": "question", "answer": "response", "reference_answers": "truth"})
    >>> result.per_sample["exact_match"].tolist()
    [1.0, 0.0]
    >>> print(result.metrics.loc["exact_match", "value"], "over", result.metrics.loc["exact_match", "n"])
    0.5 over 2
"""

from __future__ import annotations

import copy
import html
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from ragexp.core.pairing import COMPARE
from ragexp.report.console import number
from ragexp.stats.intervals import CONFIDENCE
from ragexp.common.paths import compose, conf_dir, plain
from ragexp.errors import ConfigError, JudgeFailed, config_error_line

#: Config groups a keyword argument may select (a string) or tune (a dict of that group's keys).
GROUPS = ("dataset", "metric", "matcher", "judge", "pipeline", "chunker", "retriever", "compressor", "generator",
          "memory_layer", "tracking", "stats", "gate")

_PREPARED: dict[tuple[tuple[str, ...], str], tuple[Any, dict[str, Any]]] = {}
_COMPOSE_LOCK = threading.Lock()


class _Shown:
    """The text and notebook views of a result: ``_title()`` over the table of ``_rows()`` (header
    first), the columns in ``_LEFT`` left-aligned, the others right-aligned."""

    _LEFT: tuple[int, ...] = (0,)

    def __repr__(self) -> str:
        rows = self._rows()
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        lines = [self._title()]
        for row in rows:
            lines.append("  ".join(c.ljust(w) if i in self._LEFT else c.rjust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
        return "\n".join(lines)

    def _repr_html_(self) -> str:
        rows = self._rows()
        head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
        body = "".join("<tr>" + "".join(f"<td style='text-align:{'left' if i in self._LEFT else 'right'}'>"
                                        f"{html.escape(c)}</td>" for i, c in enumerate(row)) + "</tr>" for row in rows[1:])
        return (f"<p><b>{html.escape(self._title())}</b></p>"
                f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


class _LoadedOnUse:
    """A field holding a DataFrame, or the path of a Parquet file opened as a
    :class:`ragexp.results.sample_table.SampleTable` (read a column at a time) the first time it is used
    (a streamed run's per-sample table: docs/api.md, "What it returns")."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = "_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            raise AttributeError(self.name)  # no default: the dataclass field stays required
        value = obj.__dict__[self.name]
        if isinstance(value, Path):
            from ragexp.results.sample_table import SampleTable

            value = obj.__dict__[self.name] = SampleTable(value)
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.name] = value


@dataclass(eq=False, repr=False)  # DataFrames inside: equality would be ambiguous
class EvaluationResult(_Shown):
    """What :func:`evaluate` returns.

    ``per_sample``: one row per input row, in input order (id, query, answer, then every metric's
    value, status and detail) — the table ``python -m ragexp`` logs as ``per_sample.parquet``
    (``per_sample.json`` is its copy trimmed for the UI). After a streamed run (a big file: docs/performance.md,
    "Scale") it is a :class:`~ragexp.results.sample_table.SampleTable` over that Parquet file (with
    ``log=False``, a temporary file removed when the process exits): ``per_sample["metric"]`` reads that
    column alone, ``.to_arrow()`` gives Arrow, anything else of a DataFrame reads the whole table once.
    ``metrics``: one row per aggregate key: ``value`` (the mean over ``ok`` samples, or the
    dataset-level value), ``ci_low``, ``ci_high``, ``stderr`` and ``n`` (how many samples it is over).
    ``summary``: the run's ``summary.json`` as a dict. ``run_id``: the MLflow run, None when not logged.
    """

    per_sample: Any = _LoadedOnUse()
    metrics: Any
    summary: dict[str, Any]
    run_id: str | None = None
    tracking_uri: str | None = None
    config: dict[str, Any] = field(default_factory=dict, repr=False)

    def _title(self) -> str:
        s = self.summary
        logged = f"MLflow run {self.run_id}" if self.run_id else "not logged"
        return f"ragexp · {s.get('dataset')} · {s.get('n_samples')} samples · {logged}"

    def _rows(self) -> list[tuple[str, str, str, str, str]]:
        level = f"{100 * float(self.summary.get('stats', {}).get('confidence', CONFIDENCE)):g}%"
        rows = [("metric", "value", f"{level} CI", "± stderr", "over")]
        m = self.metrics
        for key, value, low, high, stderr, n in zip(m.index, m["value"], m["ci_low"], m["ci_high"], m["stderr"], m["n"]):
            ci = "" if number(low) == "—" else f"[{number(low)}, {number(high)}]"
            rows.append((str(key), number(value), ci, number(stderr), str(int(n))))
        return rows


def evaluate(data: Any, metric: str | Mapping[str, Any] = "default", matcher: str | None = None,
             judge: str | None = None, pipeline: Any = None, overrides: Sequence[str] = (),
             log: bool | str = True, run_name: str | None = None, *, columns: Mapping[str, str] | None = None,
             **options: Any) -> EvaluationResult:
    """Evaluate ``data`` with the configured metrics; return an :class:`EvaluationResult`.

    ``data``: a pandas DataFrame, a list of dicts, a path to a file (JSONL, JSON, CSV, TSV,
    Parquet: what ``dataset=mapped`` reads), or a dataset config name (``"demo"``, ``"squad2"``…).
    ``columns`` maps canonical fields to your column names (``{"query": "question"}``), as
    ``dataset.columns`` does. A bad row raises the :class:`~ragexp.errors.DataError` the CLI
    prints (one line naming the source, row and field).

    ``metric``, ``matcher``, ``judge``, ``pipeline`` and any other config group given as a keyword
    (``retriever="bm25"``, ``stats={"resamples": 2000}``) choose an option (a string) or set keys
    of the group (a dict); ``overrides`` are command-line overrides (``"judge.api_base=http://…"``);
    other keywords set top-level keys (``data_dir=…``, ``progress=True``). ``pipeline`` may also be
    your own importable callable (it becomes ``pipeline=custom``).

    ``log=True`` saves the results folder and logs an MLflow run to the configured store (as the
    CLI does), ``log="<tracking uri>"`` logs there, ``log=False`` writes nothing (the judge's and
    the pipeline's caches under ``.ragexp_cache/`` excepted; ``judge.cache=false`` turns the first off).
    When every judge metric failed on every sample, :class:`~ragexp.errors.JudgeFailed` is raised
    with the result (each sample's status and reason) as its ``.result``.
    """
    from ragexp.workflow.runner import execute

    chosen, settings, in_memory = _choices(data, dict(metric=metric, matcher=matcher, judge=judge), pipeline,
                                           dict(options), columns, run_name, log)
    composed_with = tuple(chosen) + tuple(str(o) for o in overrides)
    cfg, container = _prepared(composed_with, settings)
    dataset = None
    if in_memory is not None:
        from ragexp.datasets.mapped import load_in_memory
        from ragexp.datasets.split import SPLIT_KEYS

        ds = cfg.dataset
        dataset = load_in_memory(in_memory, columns=plain(ds.get("columns")),
                                 json_fields=plain(ds.get("json_fields", "auto")), name=ds.get("name") or "dataframe",
                                 limit=ds.get("limit"), label=ds.get("label"), **{k: ds[k] for k in SPLIT_KEYS if k in ds})
    try:
        outcome = execute(cfg, dataset=dataset, save=log is not False, show=False, overrides=composed_with)
    except JudgeFailed as exc:  # every judge metric failed: the reasons, sample by sample, go with the error
        raise JudgeFailed(*exc.args, outcome=exc.outcome,  # the runner's judge_failed_step gives the outcome
                          result=_result(exc.outcome, container)).with_traceback(exc.__traceback__) from None
    return _result(outcome, container)


def _choices(data: Any, groups: dict[str, Any], pipeline: Any, options: dict[str, Any],
             columns: Mapping[str, str] | None, run_name: str | None, log: bool | str
             ) -> tuple[list[str], dict[str, Any], Any]:
    """What :func:`evaluate`'s arguments choose: the options to compose (``metric=default``), the keys to set
    (``dataset.path=…``) and the rows given in memory (None when the data is read from a file or a config)."""
    for name in GROUPS:
        if name in options:
            groups[name] = options.pop(name)
    chosen, settings = [], {}
    if callable(pipeline) or isinstance(pipeline, str) and "." in pipeline:  # your callable, or its dotted path
        chosen.append("pipeline=custom")
        settings["pipeline._target_"] = pipeline if isinstance(pipeline, str) else _dotted(pipeline)
    elif pipeline is not None:
        groups["pipeline"] = pipeline
    in_memory, dataset_option, path = _data_source(data, conf_dir())
    if dataset_option is not None:
        groups.setdefault("dataset", dataset_option)
        if isinstance(groups["dataset"], Mapping):  # settings of the data's own option
            settings.update({f"dataset.{k}": v for k, v in groups["dataset"].items()})
            groups["dataset"] = dataset_option
    for name, value in groups.items():
        if value is None:
            continue
        if isinstance(value, str):
            chosen.append(f"{name}={value}")
        elif isinstance(value, Mapping):
            settings.update({f"{name}.{k}": v for k, v in value.items()})
        else:
            raise ConfigError(f"{name}: expected an option name (a string) or a dict of its keys, got "
                              f"{type(value).__name__}")
    if path is not None:
        settings["dataset.path"] = path
    if in_memory is not None:
        settings["dataset.name"] = "dataframe" if hasattr(in_memory, "columns") else "rows"  # not 'records': an option
    if columns is not None:
        if dataset_option != "mapped":
            raise ConfigError(f"columns= maps the columns of a DataFrame, a list of dicts or a file; dataset "
                              f"'{groups.get('dataset')}' brings its own fields")
        settings["dataset.columns"] = dict(columns)
    if run_name is not None:
        settings["run_name"] = run_name
    if isinstance(log, str):
        settings["tracking.uri"] = log
    elif not isinstance(log, bool):
        raise ConfigError(f"log: expected True, False or a tracking URI, got {log!r}")
    settings.setdefault("progress", False)
    settings.update(options)  # top-level keys: data_dir, progress, objective, ...
    if log is not False:
        settings["tracking.enabled"] = True
    return chosen, settings, in_memory


def _result(outcome: Any, config: dict[str, Any]) -> EvaluationResult:
    import pandas as pd

    summary = outcome.summary
    rows = []
    keys = list(summary["metrics"]) + [k for k in outcome.intervals if k not in summary["metrics"]]
    for key in keys:
        iv = outcome.intervals.get(key)
        value = summary["metrics"].get(key, getattr(iv, "mean", None))
        rows.append({"metric": key, "value": value, "ci_low": getattr(iv, "ci_low", None),
                     "ci_high": getattr(iv, "ci_high", None), "stderr": getattr(iv, "stderr", None),
                     "n": int(iv.n) if iv is not None else int(summary["status_counts"].get(key, {}).get("ok", 0))})
    metrics = pd.DataFrame(rows, columns=["metric", "value", "ci_low", "ci_high", "stderr", "n"]).set_index("metric")
    metrics = metrics.astype({col: float for col in ("value", "ci_low", "ci_high", "stderr")})
    from ragexp.results.columns import frame_of

    table = outcome.per_sample
    per_sample = table.path if hasattr(table, "finish") else frame_of(table)  # a streamed run's Parquet file
    return EvaluationResult(per_sample=per_sample, metrics=metrics, summary=summary,
                            run_id=summary.get("run_id"), tracking_uri=summary.get("tracking_uri"),
                            config=copy.deepcopy(config))


def _data_source(data: Any, conf: Path) -> tuple[Any, str | None, str | None]:
    """(rows in memory, the dataset option to compose, the file path) for what ``data`` is."""
    if hasattr(data, "to_dict") and hasattr(data, "columns") or isinstance(data, (list, tuple)):
        return data, "mapped", None
    if isinstance(data, (str, os.PathLike)):
        text = os.fspath(data)
        p = Path(text).expanduser()
        if (conf / "dataset" / f"{text}.yaml").is_file() and not p.exists():
            return None, text, None
        if p.exists() or p.suffix or os.sep in text:
            return None, "mapped", str(p.resolve()) if p.exists() else text
        from ragexp.common.paths import conf_options

        raise ConfigError(f"data={text!r} is neither a file nor a dataset config name "
                          f"({', '.join(conf_options('dataset'))})")
    raise ConfigError(f"data: expected a pandas DataFrame, a list of dicts, a file path or a dataset config name, "
                      f"got {type(data).__name__}")


def _dotted(fn: Any) -> str:
    """``module.qualname`` of a callable that can be imported back by that name, else a ConfigError."""
    from ragexp.common.targets import resolve

    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", None)
    try:
        found = resolve(f"{module}:{name}", "pipeline")
    except ConfigError:  # anything that does not import back
        found = None
    if found is not fn:
        raise ConfigError(f"pipeline: {fn!r} cannot be imported by name (define it at the top level of a module "
                          "or of the notebook), or pass pipeline='my_module.my_function'")
    return f"{module}.{name}"


def _prepared(overrides: tuple[str, ...], settings: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The composed config with ``settings`` applied (read-only: the runner only reads it) and its
    plain container, cached per (overrides, settings): a repeated call composes nothing (a Hydra
    compose takes about a quarter of a second)."""
    import json

    from hydra.errors import HydraException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    key = (overrides, json.dumps(settings, sort_keys=True, default=repr))
    with _COMPOSE_LOCK:  # Hydra's state is global: one composition at a time
        if key not in _PREPARED:
            try:
                cfg = compose(overrides)
            except (HydraException, OmegaConfBaseException) as exc:  # Hydra's message as one line, as the CLI prints it
                raise ConfigError(config_error_line(exc)) from None
            _apply(cfg, settings)
            OmegaConf.set_readonly(cfg, True)
            if len(_PREPARED) >= 64:  # a long session of varied calls: keep the cache small
                _PREPARED.pop(next(iter(_PREPARED)))
            _PREPARED[key] = (cfg, OmegaConf.to_container(cfg, resolve=False))
        return _PREPARED[key]


def _apply(cfg: Any, settings: Mapping[str, Any]) -> None:
    """Set dotted keys of the composed config; a key the config does not have is a ConfigError."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    for key, value in settings.items():
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent) if parent else cfg
        if node is None or not OmegaConf.is_dict(node):
            raise ConfigError(f"{key}: the config has no group {parent!r} here (is the option chosen?)")
        if leaf not in node.keys() and not parent.startswith("pipeline"):  # your pipeline's own arguments are new keys
            known = ", ".join(str(k) for k in node.keys())
            raise ConfigError(f"{key}: unknown key; {parent or 'the root config'} has {known}")
        try:
            OmegaConf.update(cfg, key, value, merge=False, force_add=True)
        except OmegaConfBaseException as exc:
            raise ConfigError(f"{key}={value!r}: {' '.join(str(exc).split())}") from None


@dataclass(eq=False, repr=False)
class ComparisonResult(_Shown):
    """What :func:`compare_results` returns: ``metrics`` (one row per metric key: both means, ``diff`` =
    candidate − baseline with its paired CI, ``p_holm``, ``verdict``, better/ties/worse, ``n`` =
    samples ok in both), ``regressions`` (per metric, the samples that got most worse) and
    ``comparison`` (every number, as ``python -m ragexp.compare`` logs it in ``comparison.json``)."""

    metrics: Any
    regressions: dict[str, list[dict[str, Any]]]
    comparison: dict[str, Any] = field(repr=False)
    _LEFT = (0, 7)

    def _rows(self) -> list[tuple[str, ...]]:
        level = f"{100 * float(self.comparison['method']['confidence']):g}%"
        rows = [("metric", "baseline", "candidate", "diff", f"{level} CI", "p (Holm)", "over", "")]
        for key, r in self.comparison["metrics"].items():
            if "p_value" not in r:
                rows.append((key, "", "", "", "", "", str(r.get("n", 0)), r.get("note", "")))
                continue
            mark = {"better": "▲ better", "worse": "▼ worse"}.get(r["verdict"], "")
            rows.append((key, number(r["mean_baseline"]), number(r["mean_candidate"]), f"{r['diff']:+.4f}",
                         f"[{number(r['ci_low'])}, {number(r['ci_high'])}]", f"{r['p_holm']:.3g}", str(r["n"]), mark))
        return rows

    def _title(self) -> str:
        c = self.comparison
        b, k = (role if c[role]["name"] == role else f"{role} {c[role]['name']}" for role in ("baseline", "candidate"))
        return f"ragexp.compare · {b} → {k} · {c['samples']['matched']} paired samples"


def compare_results(baseline: EvaluationResult | str, candidate: EvaluationResult | str, *, tracking_uri: str | None = None,
            resamples: int | None = None, confidence: float | None = None, seed: int | None = None,
            min_match_fraction: float = COMPARE["min_match_fraction"], regressions: int = COMPARE["regressions"]
            ) -> ComparisonResult:
    """Is ``candidate`` really different from ``baseline``? A paired comparison by sample id, metric by
    metric, with ``python -m ragexp.compare``'s statistics (:func:`ragexp.core.pairing.compare_tables`).

    Each side is an :class:`EvaluationResult` or the id or name of a logged run (read from
    ``tracking_uri``, else the store ``python -m ragexp`` uses). ``resamples``, ``confidence`` and
    ``seed`` default to the baseline's ``stats`` settings. Runs of other questions are refused
    with a :class:`~ragexp.errors.DataError`. Nothing is logged (``python -m ragexp.compare`` logs).
    """
    from ragexp.stats.settings import count_setting, fraction_setting, stats_settings

    stats = dict(baseline.summary.get("stats", {}) if isinstance(baseline, EvaluationResult) else {})
    stats.update({k: v for k, v in (("resamples", resamples), ("confidence", confidence), ("seed", seed)) if v is not None})
    stats = stats_settings({k: stats[k] for k in ("resamples", "confidence", "seed") if k in stats})
    # checked before any store is read, as python -m ragexp.compare checks them
    min_match_fraction = fraction_setting(min_match_fraction, "min_match_fraction")
    regressions = count_setting(regressions, "regressions")

    import pandas as pd

    from ragexp.core.pairing import compare_tables

    tables, client = [], None
    for side, role in ((baseline, "baseline"), (candidate, "candidate")):
        if isinstance(side, EvaluationResult):
            tables.append(_run_table(side, role))
        elif isinstance(side, str):
            from ragexp.tracking.runs import read_runs
            from ragexp.tracking.store import resolve_uri

            client, found = read_runs(resolve_uri(tracking_uri), {role: side}, client)
            tables.append(found[role])
        else:
            raise ConfigError(f"{role}: expected an EvaluationResult or a run id or name, got {type(side).__name__}")
    result = compare_tables(*tables, resamples=stats["resamples"], confidence=stats["confidence"], seed=stats["seed"],
                            min_match_fraction=min_match_fraction, regressions=regressions)
    columns = ["mean_baseline", "mean_candidate", "diff", "ci_low", "ci_high", "p_value", "p_holm", "verdict", "n",
               "better", "ties", "worse", "mde", "test"]
    frame = pd.DataFrame([{"metric": k, **{c: r.get(c) for c in columns}} for k, r in result["metrics"].items()],
                         columns=["metric", *columns]).set_index("metric")
    return ComparisonResult(metrics=frame, regressions=result["regressions"], comparison=result)


def _run_table(side: Any, role: str) -> Any:
    """The comparison's view of a result: its own per-sample table."""
    from ragexp.core.pairing import RunTable

    df = side.per_sample
    rows = df.astype(object).where(df.notna(), None).values.tolist()
    name = side.config.get("run_name") or side.run_id or role
    metrics = {k: v for k, v in side.summary["metrics"].items() if v is not None}
    return RunTable(name=str(name), columns=[str(c) for c in df.columns], rows=rows, run_id=side.run_id,
                    questions_digest=side.summary.get("questions_digest"), dataset=side.summary.get("dataset"),
                    metrics=metrics, cluster_by=(side.summary.get("stats") or {}).get("cluster_by"))
