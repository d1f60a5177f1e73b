"""From records and a metric config to per-sample scores and aggregates — no I/O here.

``build_metrics`` turns the ``metric`` config node (name → ``_target_`` + options) into
:class:`MetricSpec` objects, expanding list-valued variant options (``k: [1, 5, 10]`` →
``ndcg/ndcg_at_1``, ``ndcg/ndcg_at_5``, ``ndcg/ndcg_at_10``). ``check_fields`` refuses, before any work, a metric
whose fields the dataset lacks. ``score`` computes the deterministic metrics; the run's one
aggregator, :class:`ragexp.core.tally.Tally`, reduces them to the run's numbers.
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any, Callable, Iterable, Mapping

from ragexp.common.paths import plain
from ragexp.common.renamed import cutoff_key
from ragexp.common.targets import resolve
from ragexp.errors import ConfigError, FieldsError
from ragexp.metrics.base import MetricSpec, Score, info_for, is_int, is_number
from ragexp.common.records import Record, present_fields
from ragexp.common.collector import collector_paused

#: Keys of the ``metric`` node that are settings of the suite, not metrics.
SUITE_KEYS = ("_all_that_apply_", "_headline_")


def _variant_label(param: str, value: Any, name: str = "") -> str:
    """A variant's key segment; a cut-off names its metric (``hit_rate_at_5``, ``recall_at_5`` for
    ``recall_at_k``), since MLflow titles a chart by a key's last segment (docs/metrics.md, "Variants").

    >>> _variant_label("k", 5, "hit_rate"), _variant_label("k", 5, "recall_at_k"), _variant_label("matcher", "rouge_chunk")
    ('hit_rate_at_5', 'recall_at_5', 'rouge_chunk')
    """
    if param == "k":
        return cutoff_key(name, value)
    if isinstance(value, Mapping):
        return str(value.get("name", param))
    return str(value)


def build_metrics(metric_cfg: Mapping[str, Any] | None, matcher_cfg: Any = None) -> tuple[list[MetricSpec], bool]:
    """Specs for every metric in the ``metric`` node, and whether the suite asks for "all that apply"."""
    metric_cfg = plain(metric_cfg) or {}
    all_that_apply = bool(metric_cfg.get("_all_that_apply_", False))
    specs: list[MetricSpec] = []
    for key, node in metric_cfg.items():
        if key in SUITE_KEYS:
            continue
        if node is None:
            continue  # a suite member switched off with metric.<name>=null
        if not isinstance(node, Mapping) or "_target_" not in node:
            raise ConfigError(f"metric '{key}': expected a mapping with a _target_, got {node!r}")
        fn = resolve(node["_target_"], f"metric.{key}._target_")
        try:
            info = info_for(fn)
        except KeyError:
            raise ConfigError(f"metric '{key}': '{node['_target_']}' is not a registered metric") from None
        options = {k: v for k, v in node.items() if not k.startswith("_")}
        unknown = sorted(set(options) - set(info.options))
        if unknown:
            raise ConfigError(
                f"metric '{key}' has no option {', '.join(repr(u) for u in unknown)}; "
                f"its options are: {', '.join(sorted(info.options)) or '(none)'}"
            )
        lists = [p for p in info.variant_params if isinstance(options.get(p), list)]
        for p in lists:
            if not options[p]:  # an empty list would make no variant at all: the metric would vanish
                raise ConfigError(f"metric '{key}': option '{p}' expected a value or a non-empty list of values, "
                                  f"got []; set metric.{key}.{p}=...")
        combos = itertools.product(*[options[p] for p in lists]) if lists else [()]
        for combo in combos:
            opts = dict(options)
            suffix = ""
            for p, v in zip(lists, combo):
                opts[p] = v
                suffix += "/" + _variant_label(p, v, key)
            spec = MetricSpec(key=key + suffix, info=info, options=opts)
            if info.uses_matcher:
                from ragexp.matchers import build_matcher

                chosen = opts.pop("matcher", None)
                if chosen is None:
                    chosen = plain(matcher_cfg)
                if chosen is None:
                    raise ConfigError(f"metric '{key}' needs a matcher: choose one with matcher=<name> "
                                      "(exact_chunk, exact_sentence, rouge_chunk, rouge_sentence)")
                spec.matcher = build_matcher(chosen)
                spec.options = opts
            _check_options(spec, key)
            specs.append(spec)
    return specs, all_that_apply


def _check_options(spec: MetricSpec, key: str | None = None) -> None:
    """Every option's value checked, and field names resolved, so a bad option fails before any
    work with one line naming the metric, the option, what was expected and what was got.

    The expected type comes from the metric function's annotation (``k: int | None``,
    ``use_stemmer: bool``); the metric's ``option_rules`` add what a type cannot say (k ≥ 1, a
    threshold in [0, 1], the allowed words).
    """
    key = key or spec.key.split("/", 1)[0]
    hints = _option_types(spec.info.fn)
    for name, value in spec.options.items():
        expected = _option_problem(spec.info.option_rules.get(name), value, hints.get(name))
        if expected is not None:
            raise ConfigError(f"metric '{key}': option '{name}' expected {expected}, got {_shown(value)}; "
                              f"set metric.{key}.{name}=...")
    try:
        spec.fields
    except ValueError as exc:
        raise ConfigError(f"metric '{key}': {exc}") from None


def _shown(value: Any) -> str:
    text = repr(value)
    text = text if len(text) <= 80 else text[:77] + "..."
    return f"{text} ({type(value).__name__})" if value is not None else text


def _option_types(fn: Callable[..., Any]) -> dict[str, Any]:
    """The annotated types of a metric's keyword options (empty when they cannot be resolved)."""
    import typing

    try:
        return typing.get_type_hints(fn)
    except Exception:  # noqa: BLE001 - an annotation naming what is imported only for type checkers
        return {}


def _type_accepts(tp: Any, value: Any) -> tuple[bool, str] | None:
    """Whether ``value`` fits the annotation ``tp``, and the type in words; None when not checkable."""
    import types
    import typing

    if tp is typing.Any or tp is None:
        return None
    if tp is type(None):
        return value is None, "null"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        parts = [_type_accepts(a, value) for a in typing.get_args(tp)]
        if any(p is None for p in parts):
            return None
        return any(ok for ok, _ in parts), " or ".join(w for _, w in parts)
    if origin is list:
        (item,) = typing.get_args(tp) or (typing.Any,)
        if not isinstance(value, list):
            return False, "a list"
        inner = [_type_accepts(item, v) for v in value]
        return all(p is None or p[0] for p in inner), "a list"
    if tp is bool:
        return isinstance(value, bool), "true or false"
    if tp is int:
        return is_int(value), "an integer"
    if tp is float:
        return is_number(value), "a number"
    if tp is str:
        return isinstance(value, str), "a string"
    return None


def _option_problem(rule: Any, value: Any, annotation: Any) -> str | None:
    """What an option expects when ``value`` does not fit its ``rule`` (or else its annotation), else None."""
    if rule is not None:
        accepts, expected = rule
        return None if accepts(value) else expected()
    checked = _type_accepts(annotation, value)
    if checked is None or checked[0]:
        return None
    return checked[1]


def check_fields(specs: list[MetricSpec], records: list[Record], dataset: str,
                 all_that_apply: bool = False, provided: Iterable[str] = ()) -> tuple[list[MetricSpec], list[str]]:
    """Keep the metrics the dataset can feed; raise (or, for "all that apply", skip and say so).

    ``provided`` names fields a pipeline will fill in before scoring.
    """
    have = present_fields(records)
    have += [f for f in provided if f not in have]
    kept: list[MetricSpec] = []
    lacking_by_key: dict[str, list[str]] = {}
    for spec in specs:
        if spec.info.resolve is not None:
            spec.options = spec.info.resolve(dict(spec.options), tuple(have))
        lacking = [f for f in spec.fields if f not in have]
        if not lacking:
            kept.append(spec)
            continue
        if not all_that_apply:
            raise FieldsError(
                f"metric '{spec.key}' needs {', '.join(repr(f) for f in lacking)}; dataset '{dataset}' has: "
                f"{', '.join(have)} (choose another metric or dataset, or a suite that skips what does not apply)")
        lacking_by_key[spec.key] = lacking
    # one line per missing-field set, naming every metric it skips (variants folded: ndcg/k1..k10 → ndcg)
    groups: dict[tuple[str, ...], list[str]] = {}
    for key, lacking in lacking_by_key.items():
        names = groups.setdefault(tuple(lacking), [])
        base = key.split("/", 1)[0]
        if base not in names:
            names.append(base)
    skipped = [f"skipped {', '.join(names)}: need{'s' if len(names) == 1 else ''} "
               f"{', '.join(repr(f) for f in lacking)}; dataset '{dataset}' has: {', '.join(have)}"
               for lacking, names in groups.items()]
    if specs and not kept:
        raise FieldsError(
            f"none of the configured metrics applies to dataset '{dataset}' (it has: {', '.join(have)}); "
            "a dataset without contexts or answers needs a pipeline to produce them, e.g. retriever=bm25 "
            "generator=extractive")
    return kept, skipped


#: Score is immutable: the ok Score of a value met before is shared (0, 1 and the few fractions of the
#: ranked metrics make most of a run's scores) instead of building one per sample
_OK_SCORES: dict[float, Score] = {0.0: Score(0.0), 1.0: Score(1.0)}


def _as_score(value: Any) -> Score:
    """A metric's return value as a Score: NaN or None is an undefined value (status ``undefined``), never a 0."""
    if type(value) is float and value == value:  # the usual case first: a plain float, not NaN
        if value == 0.0 and math.copysign(1.0, value) < 0:
            return Score(value)  # -0.0 keeps its own Score (it is a key equal to 0.0)
        kept = _OK_SCORES.get(value)
        if kept is None:
            kept = Score(value)
            if len(_OK_SCORES) < 4096:
                _OK_SCORES[value] = kept
        return kept
    if isinstance(value, Score):
        return value
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return Score.undefined("undefined for this sample")
    return Score(float(value))


def _option_key(value: Any) -> Any:
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


#: with ``processes`` left to the machine, a run scores on several processes from this many records on
_PARALLEL_FROM = 5_000
#: in a scoring process: the records and the metrics, inherited from the parent by fork (never pickled)
_INHERITED: tuple[list[Record], list[MetricSpec]] = ([], [])


def score(records: list[Record], specs: Iterable[MetricSpec], progress: Callable[[Iterable], Iterable] | None = None,
          processes: int | None = None) -> dict[str, list[Score]]:
    """Per-sample scores of every sample-level, non-judge metric, in record order.

    Metrics that declare a shared first step (``MetricInfo.prepare``: the ranked metrics' relevance
    judgement) get it done once per record and setting, and each finishes from it. Where the system
    forks (Linux), parts of the records are scored on ``processes`` processes (None: one per core
    from 5,000 records on while a core is idle), each inheriting the records instead of receiving a
    copy: the same Scores in the same order as in one process (docs/performance.md, "Scale")."""
    from ragexp.common.processes import can_fork, fork_pool, processes_for

    sample_specs = [s for s in specs if s.info.level == "sample" and not s.info.judge]
    if processes is None:  # the machine's rule (ragexp.common.processes), from 5,000 records on
        processes = processes_for(None) if len(records) >= _PARALLEL_FROM else 1
    if processes < 2 or len(records) < 2 or not can_fork():
        return _score_part(progress(records) if progress else records, sample_specs)
    step = -(-len(records) // (processes * 8))  # parts small enough to balance the processes and move the bar
    bar = iter(progress(records) if progress else records)
    out: dict[str, list[Score]] = {s.key: [] for s in sample_specs}
    pool = fork_pool(processes, _inherit, (records, sample_specs))
    try:
        for part, caught in pool.map(_score_range, range(0, len(records), step), itertools.repeat(step)):
            for key, scores in part.items():
                out[key] += scores
            for message in caught:
                warnings.warn(message)
            for _ in itertools.islice(bar, step):
                pass
        for _ in bar:  # to its end: a bar closes there
            pass
    finally:
        pool.shutdown(cancel_futures=True)
    return out


def clear_text_caches() -> None:
    """Empty the bounded caches of the metrics and matchers keyed by texts (``functools.lru_cache``s of 4,096
    entries or more: token lists, n-gram counts, keyword sets): a streamed run's last step, so that the caller's
    process keeps none of its texts and its exit does not walk tens of thousands of cached sets (at 100,000
    realistic records 0.86 s of CPU from ``evaluate`` returning to exit, 0.35 s after this: docs/performance.md)."""
    import sys

    for name, module in list(sys.modules.items()):
        if name.startswith(("ragexp.metrics.", "ragexp.matchers.", "ragexp.common.text")):
            for f in list(vars(module).values()):
                if hasattr(f, "cache_parameters") and (f.cache_parameters()["maxsize"] or 0) >= 4096:
                    f.cache_clear()


def _inherit(records: list[Record], specs: list[MetricSpec]) -> None:
    global _INHERITED
    from ragexp.common.isolation import die_with_parent

    die_with_parent()  # a kill -9 of the run leaves no scoring process behind (docs/guarantees.md)
    _INHERITED = (records, specs)


def _score_range(start: int, size: int) -> tuple[dict[str, list[Score]], list[Warning]]:
    """In a scoring process: the scores of ``size`` records from ``start``, and the warnings they gave."""
    records, specs = _INHERITED
    with warnings.catch_warnings(record=True) as caught:
        return _score_part(records[start:start + size], specs), [w.message for w in caught]


@collector_paused()  # scoring makes no reference cycle, as reading makes none: docs/performance.md, "Scale"
def _score_part(records: Iterable[Record], sample_specs: list[MetricSpec]) -> dict[str, list[Score]]:
    out: dict[str, list[Score]] = {s.key: [] for s in sample_specs}
    # each spec's fields and options settled once, not per record
    plans = []
    shared: dict[tuple, tuple] = {}  # (prepare, fields, its options) → (fields, prepare, options, members)
    for s in sample_specs:
        fields, opts, info = s.fields, s.call_options(), s.info
        if info.prepare is None:
            plans.append((fields, info.fn, opts, out[s.key]))
            continue
        pre_opts = {k: opts[k] for k in info.prepare_options if k in opts}
        key = (info.prepare, fields, tuple((k, _option_key(v)) for k, v in sorted(pre_opts.items())))
        if key not in shared:
            shared[key] = (fields, info.prepare, pre_opts, [])
        own = {k: v for k, v in opts.items() if k not in pre_opts}  # the prepared step used the others
        shared[key][3].append((info.finish, own, out[s.key]))
    needed = {f for s in sample_specs for f in s.fields}
    records = iter(records)
    # metric by metric over a block of records (its fields as columns), not record by record; a block
    # no larger than a matcher's memory of its last results (matchers/base.py): groups share a match
    while block := list(itertools.islice(records, 64)):
        columns = {f: [getattr(r, f, None) for r in block] for f in needed}
        for fields, fn, opts, column in plans:
            column += [_missing(fields, row) if None in row else _as_score(fn(*row, **opts))
                       for row in zip(*[columns[f] for f in fields])]
        for fields, prepare, pre_opts, members in shared.values():
            # a prepared Score (absent field, undefined value) is every sharing metric's score
            prepared = [_missing(fields, row) if None in row else prepare(*row, **pre_opts)
                        for row in zip(*[columns[f] for f in fields])]
            for finish, opts, column in members:
                column += [p if isinstance(p, Score) else _as_score(finish(p, **opts)) for p in prepared]
    return out


def _missing(fields: tuple[str, ...], row: tuple) -> Score:
    """An absent (None) field is missing_field; a present but empty output goes to the metric, a miss."""
    return Score.missing(f"no {', '.join(f for f, v in zip(fields, row) if v is None)}")


def dataset_value(spec: MetricSpec, records: list[Record]) -> float | None:
    columns = [[getattr(r, f) for r in records] for f in spec.fields]  # None where absent; empty stays empty
    return _as_score(spec.call(*columns)).value


def ratio_parts(spec: MetricSpec, records: list[Record], cache: dict[Any, list[tuple]]
                ) -> tuple[list[float], list[float]] | None:
    """A dataset-level ratio's per-record numerator and denominator (``MetricInfo.ratio``); None for a
    dataset metric without one (no resampling rule)."""
    if spec.info.ratio is None:
        return None
    parts, num_of, den_of = spec.info.ratio
    opts = spec.call_options()
    cache_key = (parts, repr(sorted(opts.items())))
    if cache_key not in cache:
        cache[cache_key] = [parts(*[getattr(r, f) for f in spec.fields], **opts) for r in records]
    return [num_of(*c) for c in cache[cache_key]], [den_of(*c) for c in cache[cache_key]]
