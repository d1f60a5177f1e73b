"""The metric registry: how a metric declares its fields, options, range and aggregation.

A metric is a plain function. Its positional parameters receive record fields (named after
them), its keyword-only parameters are options with documented defaults::

    @register(bounds=(0.0, 1.0))
    def token_f1(contexts, reference_answers, *, against="reference_answers") -> float: ...

Registering it makes ``conf/metric/token_f1.yaml`` (``_target_: ragexp.metrics.token.token_f1``)
work, and the runner check its fields against the dataset before any work. A metric returns
a float, or a :class:`Score` when it must say why a value is missing.

Two levels exist. ``level="sample"`` metrics score one record and are averaged over the
records whose status is ``ok``. ``level="dataset"`` metrics (the confusion metrics,
docs/metrics.md#keyword_verdict_accuracy) receive one list per field, a value per record, and return one
number for the run.
"""

from __future__ import annotations

import inspect
import math
from collections import Counter
from operator import attrgetter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

from ragexp.common.records import HUMAN_SCALES

#: ``missing_field``: the record lacks (``None``) a field the metric reads; ``undefined``: the fields
#: are there but the definition has no value for them (an empty ground truth, a reference without
#: a keyword). An empty *output* of the system under test is neither: it scores as a miss.
STATUSES = ("ok", "missing_field", "undefined", "parse_error", "timeout", "rate_limited", "api_error")


@dataclass(frozen=True, slots=True)
class Score:
    """One per-sample value with its status (docs/metrics.md#how-to-read-a-value). ``value`` is None unless status is ok."""

    value: float | None
    status: str = "ok"
    detail: Any = None  # a judge's rationale, raw output on a parse error, an error message
    #: with ``judge.samples`` = k > 1, the k values ``value`` combines (None for a verdict without one)
    samples: tuple[float | None, ...] | None = None

    @classmethod
    def missing(cls, what: str) -> "Score":
        """The record lacks a field the metric reads (absent or null)."""
        return cls(None, "missing_field", what)

    @classmethod
    def undefined(cls, what: str) -> "Score":
        """The fields are there, but the definition gives no value (an empty ground truth)."""
        return cls(None, "undefined", what)


@dataclass(frozen=True)
class Judged:
    """What a judge metric (``ragexp/metrics/judged/``) asks, and how it enters ``overall_score``."""

    asks: tuple[Any, ...] = ()  # the VerdictKinds its plan asks (their prompts are checked before any work)
    scale: float | None = None  # its value / scale lies in [0, 1] for overall_score; None: not averaged there
    #: a metric of the run's other judge scores (overall_score): ``parts(spec, specs)`` → the keys it reads
    parts: Callable[[Any, Sequence[Any]], list[str]] | None = None


@dataclass(frozen=True)
class MetricInfo:
    """What the registry knows of one metric function."""

    name: str
    fn: Callable[..., Any]
    fields: tuple[str, ...]
    fields_for: Callable[[dict[str, Any]], tuple[str, ...]] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    level: str = "sample"
    judge: Judged | None = None  # a judge metric: its fn is its plan, ``async fn(ask, *fields, **options)``
    #: the people's label (``human.<key>``) its agreement is measured on when the records have none of its
    #: own name (a metric measuring what an existing label measures)
    agrees_with: str | None = None
    binary: bool = False  # a 0/1 verdict: with ``judge.samples`` the majority, a tie 0; no two-stage row in a comparison
    #: what an option's type cannot say: option → (accepts(value), what is expected); a list given to a
    #: variant option (``k: [1, 5]``) is checked value by value after the expansion
    option_rules: Mapping[str, tuple[Callable[[Any], bool], Callable[[], str]]] = field(default_factory=dict)
    #: a dataset-level ratio resampled by record: ``(parts(*fields, **options) -> counts, numerator(*counts),
    #: denominator(*counts))``; metrics sharing ``parts`` and its options share each record's counts
    ratio: tuple[Callable[..., tuple], Callable[..., float], Callable[..., float]] | None = None
    #: a verdict on each record that people's ``label`` is set against (the keyword verdict): ``(agreement key,
    #: verdict(*fields, **options) -> 1.0 judged correct, 0.0, or None where it gives none)``
    label_verdict: tuple[str, Callable[..., float | None]] | None = None
    bounds: tuple[float, float] = (0.0, 1.0)
    #: what an unbounded value counts, said beside it in the run's table (``s``: seconds; ``tokens``)
    unit: str = ""
    higher_is_better: bool = True
    variant_params: tuple[str, ...] = ()
    uses_matcher: bool = False
    #: ``resolve(options, dataset_fields) -> options``: settles an option that depends on the
    #: dataset (ranked metrics' ``relevance: auto``) before the fields are checked
    resolve: Callable[[dict[str, Any], tuple[str, ...]], dict[str, Any]] | None = None
    #: a first step several metrics of a suite share on a record (the ranked metrics' relevance
    #: judgement): ``prepare(*fields, **the options named in prepare_options)``, done once per record
    #: and setting, then ``finish(prepared, **the other options)`` per metric — the same value as ``fn`` gives;
    #: a prepared :class:`Score` (an undefined value) is every sharing metric's score
    prepare: Callable[..., Any] | None = None
    prepare_options: tuple[str, ...] = ()
    finish: Callable[..., Any] | None = None

    def required_fields(self, options: dict[str, Any] | None = None) -> tuple[str, ...]:
        """The record fields this metric reads with these options."""
        if self.fields_for is not None:
            merged = {**self.options, **(options or {})}
            return tuple(self.fields_for(merged))
        return self.fields

    @property
    def label_scale(self) -> tuple[str, float, float]:
        """The scale people's labels of it (``human.<name>``) are checked on: a 0/1 verdict is binary, a
        range past 1 (points) ordinal, a share continuous, over its range."""
        lo, hi = (int(b) if float(b).is_integer() else b for b in self.bounds)
        return ("binary" if self.binary else "ordinal" if hi > 1 else "continuous"), lo, hi


@dataclass
class MetricSpec:
    """One metric as it will be computed and logged under ``key``."""

    key: str
    info: MetricInfo
    options: dict[str, Any] = field(default_factory=dict)
    matcher: Any = None  # a built matcher, for metrics with a ``matcher`` option

    @property
    def fields(self) -> tuple[str, ...]:
        return self.info.required_fields(self.options)

    def call_options(self) -> dict[str, Any]:
        """The keyword arguments the metric function is called with (the built matcher included)."""
        opts = dict(self.options)
        if self.matcher is not None:
            opts["matcher"] = self.matcher
        return opts

    def call(self, *args: Any) -> Any:
        return self.info.fn(*args, **self.call_options())


REGISTRY: dict[str, MetricInfo] = {}
_BY_FUNCTION: dict[Callable[..., Any], MetricInfo] = {}


def register(*, fields: Sequence[str] | None = None, fields_for: Callable[[dict[str, Any]], Sequence[str]] | None = None,
             **settings: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a metric function under its own name; ``settings`` are :class:`MetricInfo`'s (``level``,
    ``judge``, ``binary``, ``option_rules``, ``ratio``, ``bounds``, ``unit``, ``higher_is_better``, ``variant_params``,
    ``resolve``, ``prepare``, ``prepare_options``, ``finish``).

    ``fields`` defaults to the names of the function's positional parameters; ``fields_for``
    computes them from the options when an option changes what is read (token metrics'
    ``against``). ``variant_params`` are options that may be given a list, each value making
    one variant logged under ``name/<value>`` (``ndcg/ndcg_at_10``, ``context_recall/rouge_chunk``).
    ``resolve(options, dataset_fields)`` returns the options with dataset-dependent choices
    settled; the runner calls it before checking fields. ``prepare``/``finish`` split the metric
    into a step shared with other metrics and its own arithmetic (see :class:`MetricInfo`).
    """
    if ("prepare" in settings) != ("finish" in settings):
        raise ValueError("prepare and finish go together")

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        params = inspect.signature(fn).parameters.values()
        options = {p.name: p.default for p in params if p.kind == p.KEYWORD_ONLY and p.default is not p.empty}
        positional = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        positional = positional[1:] if settings.get("judge") else positional  # a plan's first is ``ask``
        if "option_rules" in settings:  # a module's rules: the ones for this metric's options
            settings["option_rules"] = {k: v for k, v in settings["option_rules"].items() if k in options}
        info = MetricInfo(name=fn.__name__, fn=fn, fields=tuple(positional if fields is None else fields),
                          fields_for=(lambda o: tuple(fields_for(o))) if fields_for else None, options=options,
                          uses_matcher="matcher" in options, **settings)
        if info.name in REGISTRY and REGISTRY[info.name].fn is not fn:
            raise RuntimeError(f"metric name '{info.name}' registered twice")
        REGISTRY[info.name] = _BY_FUNCTION[fn] = info
        return fn

    return deco


def info_for(fn: Callable[..., Any]) -> MetricInfo:
    """The :class:`MetricInfo` of a registered function."""
    try:
        return _BY_FUNCTION[fn]
    except KeyError:
        raise KeyError(f"{getattr(fn, '__qualname__', fn)!r} is not a registered metric") from None


def direction(key: str) -> tuple[bool, bool]:
    """``(higher_is_better, known)`` of an aggregate key: the registered metric of the part before the
    first '/' (``ndcg/ndcg_at_10`` → ``ndcg``); ``latency/<stage>`` (seconds) is lower-is-better; an unknown key
    is taken as higher-is-better, with ``known`` False.

    >>> direction("ndcg/ndcg_at_10"), direction("avg_latency"), direction("latency/generate"), direction("nosuch")
    ((True, True), (False, True), (False, True), (True, False))
    """
    base = key.split("/", 1)[0]
    if base == "latency":
        return False, True
    info = REGISTRY.get(base) or load_all().get(base)
    return (info.higher_is_better, True) if info is not None else (True, False)


def is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


#: the option rule of a cut-off ``k`` (:attr:`MetricInfo.option_rules`)
K_RULE = (lambda v: v is None or (is_int(v) and v >= 1), lambda: "a positive integer or null (or a list of them)")


def check_k(k: Any) -> None:
    """A ValueError unless ``k`` (a metric's cut-off) is a positive integer or None."""
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        raise ValueError(f"k must be a positive integer or null, got {k!r}")


def mean_ok(scores: Sequence[Score]) -> float | None:
    """The mean of the ``ok`` values; None when there is none (never a silent 0)."""
    values = [v for s in scores if s.status == "ok" and (v := s.value) is not None and not math.isnan(v)]
    if not values:
        return None
    return math.fsum(values) / len(values)


def status_counts(scores: Sequence[Score]) -> dict[str, int]:
    counts = Counter(map(attrgetter("status"), scores))
    return {k: counts[k] for k in (*STATUSES, *counts) if counts[k]}


def label_scales() -> dict[str, tuple[str, float, float]]:
    """Every labelled key's scale, for :func:`ragexp.common.records.to_record`: each judge metric's own, and
    the labels that have no metric (``HUMAN_SCALES``)."""
    return {**HUMAN_SCALES, **{n: info.label_scale for n, info in load_all().items() if info.judge}}


def load_all() -> dict[str, MetricInfo]:
    """Import every metric module so the registry is complete; return it."""
    import importlib
    import pkgutil

    from ragexp import metrics as pkg

    for mod in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        if not mod.name.rpartition(".")[2].startswith("_") and mod.name != f"{pkg.__name__}.base":
            importlib.import_module(mod.name)
    return REGISTRY
