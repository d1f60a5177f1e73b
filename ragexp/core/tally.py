"""The run's one aggregator: scores reduced to what its statistics need, chunk by chunk — no I/O here.

A run in memory is one chunk; a streamed run (:mod:`ragexp.workflow.streaming`) many. :func:`part_of`
turns one chunk's scores into a :class:`ChunkPart` (per metric its ``ok`` values, NaN elsewhere, its
status counts, the confusion metrics' per-record ratio parts, the pipeline stages' timings, the
label verdicts; :func:`score_chunk` scores the chunk first, in whichever process holds it).
:class:`Tally` keeps, for the whole run, only those numbers — 8 bytes per sample per metric (and 16
per confusion metric), never a record, a text or a Score, in :class:`Columns` (in memory) or columns
on disk that the caller passes in (:class:`ragexp.results.tables.ColumnFiles`, so that a streamed
run's memory does not grow with its records) — and gives the run's numbers, each in one place:
:meth:`Tally.aggregate` (every metric's value and status counts), :meth:`Tally.stage_latencies`,
:meth:`Tally.intervals` (every aggregate's uncertainty) and :meth:`Tally.trust`. A breakdown of a
metric by a record's group, or a cheaper interval, plugs in there: both paths of a run get it.
"""

from __future__ import annotations

import math
import warnings
from array import array
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable

from ragexp.results.columns import per_sample_columns
from ragexp.core.scoring import MetricSpec, dataset_value, ratio_parts, score
from ragexp.metrics.base import STATUSES

_NAN = float("nan")
_STATUS, _SAMPLES = attrgetter("status"), attrgetter("samples")


def streamable(specs: list[MetricSpec], judged: bool = False) -> str | None:
    """Why these metrics cannot be scored chunk by chunk (a judge metric unless ``judged``: a judge asks for each
    chunk; a dataset-level metric without per-record parts), or None when they can."""
    for s in specs:
        if s.info.judge and not judged:
            return f"judge metric '{s.key}'"
        if s.info.level == "dataset" and ratio_parts(s, [], {}) is None:
            return f"dataset-level metric '{s.key}' without per-record parts"
    return None


@dataclass
class ChunkPart:
    """One chunk's scores, as :class:`Tally` takes them."""

    n: int
    table: dict[str, list]  # the chunk's per-sample columns (ragexp.results.columns.per_sample_columns)
    values: dict[str, list[float]]  # metric key → value where ok, NaN elsewhere
    statuses: dict[str, Counter]
    ratios: dict[str, tuple[list[int], list[int]]]  # confusion metric → per-record (numerator, denominator)
    timings: dict[str, list[float]]  # stage → seconds, NaN where a record did not time it
    notes: list[str] = field(default_factory=list)
    verdicts: tuple[list[int], list[float], list[float]] | None = None  # ragexp.core.labels.label_verdicts
    disagreeing: list[tuple[int, Any]] = field(default_factory=list)  # (index, id/query/answer) of the first ones
    usage: dict[str, float] = field(default_factory=dict)  # the judge's counters for this chunk (judge/…)
    pairs: dict[str, dict] = field(default_factory=dict)  # judge metric → ragexp.core.labels.label_pairs, "shown" added
    failed: dict[str, str] = field(default_factory=dict)  # judge metric → its first failed verdict's reason
    samples: dict[str, list] = field(default_factory=dict)  # judge.samples > 1: metric → each record's verdicts
    whole: dict[str, float | None] = field(default_factory=dict)  # a dataset metric without ratio parts (one chunk)
    groups: dict | None = None  # the chunk's categories and per-source values (ragexp.core.breakdown.Breakdown.part)


def score_chunk(records: list, specs: list[MetricSpec], judge: Any = None,
                labelled: Collection[str] | None = None) -> ChunkPart:
    """Every sample-level metric of ``specs`` on ``records`` (one process), and the confusion parts; the judge
    metrics' too when a ``judge`` (:class:`ragexp.judge.engine.Judge`) is given, with their pairs of people's
    labels and the judge's values when the run has labels (``labelled``: the run's label keys)."""
    usage: dict[str, float] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        scores = score(records, specs, processes=1)
        if judge is not None:
            judged, usage = judge.score(records, [s for s in specs if s.info.judge])
            scores.update(judged)
        part = part_of(records, specs, scores, table=per_sample_columns(records, scores),
                       labelled=labelled if judge is not None else None)
    part.notes = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    part.usage = usage
    return part


def part_of(records: list, specs: list[MetricSpec], scores: Mapping[str, list], *, table: dict[str, list] | None = None,
            labelled: Collection[str] | None = None) -> ChunkPart:
    """What :class:`Tally` keeps of the chunk ``records`` and their ``scores`` (metric key → Scores, in record
    order); ``labelled``: the run's label keys, when the judge's values are to be paired with people's labels
    here (a streamed run's chunk). A dataset-level metric without per-record parts is computed on ``records``:
    a run of one chunk only (:func:`streamable` sends the others to memory)."""
    values = {key: [s.value if s.status == "ok" and s.value is not None else _NAN for s in per]
              for key, per in scores.items()}
    statuses = {key: Counter(map(_STATUS, per)) for key, per in scores.items()}
    confusions: dict[Any, list] = {}  # metrics sharing a ratio's parts share each record's counts
    ratios, whole = {}, {}
    for s in specs:
        if s.info.level == "dataset":
            parts = ratio_parts(s, records, confusions)
            if parts is None:
                whole[s.key] = dataset_value(s, records)
            else:
                ratios[s.key] = parts
    stages = dict.fromkeys(stage for r in records for stage in (r.timings or {}))
    timings = {stage: [(r.timings or {}).get(stage, _NAN) for r in records] for stage in stages}
    from ragexp.judge import FAILED
    from ragexp.core.labels import MAX_DISAGREEMENTS, label_pairs, label_verdicts

    failed = {}
    for s in specs:
        if not s.info.judge:  # only a judge metric's verdicts fail with a reason to keep
            continue
        first = next((str(sc.detail)[:200] for sc in scores.get(s.key, ()) if sc.status in FAILED and sc.detail), None)
        if first is not None:
            failed[s.key] = first
    # judge.samples > 1 gives Scores their samples; a metric none of whose Scores has any is passed over at C speed
    samples = {key: [sc.samples if sc.status == "ok" and sc.samples else () for sc in per]
               for key, per in scores.items()
               if any(map(_SAMPLES, per)) and any(sc.samples and len(sc.samples) > 1 for sc in per)}
    pairs = label_pairs(specs, scores, records, labelled) if labelled else {}
    for key, p in pairs.items():  # the rows the disagreements table may show: the largest differences first
        rows = sorted((-abs(h - j), i) for i, h, j in zip(p["idx"], p["human"], p["judge"]) if h != j)
        p["shown"] = [(d, i, _Shown(records[i].id, records[i].query, records[i].answer), scores[key][i])
                      for d, i in rows[:MAX_DISAGREEMENTS]]
    verdicts = label_verdicts(specs, records)
    disagreeing = []
    if verdicts is not None:
        for i, h, j in zip(*verdicts):
            if h != j and len(disagreeing) < MAX_DISAGREEMENTS:
                r = records[i]
                disagreeing.append((i, _Shown(r.id, r.query, r.answer)))
    from ragexp.core.breakdown import Breakdown

    return ChunkPart(len(records), table or {}, values, statuses, ratios, timings, [], verdicts, disagreeing, {},
                     pairs, failed, samples, whole, Breakdown(specs).part(records))


def tally_of(specs: list[MetricSpec], scores: Mapping[str, list], records: list, **part: Any) -> Tally:
    """The :class:`Tally` of a run held in memory: its records as one chunk."""
    tally = Tally(specs)
    tally.add(part_of(records, specs, scores, **part))
    return tally


@dataclass
class _Shown:
    """What the disagreements table shows of a record."""

    id: str
    query: Any
    answer: Any


class Columns(Mapping):
    """Columns appended chunk by chunk (``typecode`` ``"d"``: float64, ``"q"``: int64), in memory; read
    as a mapping of name → numpy array (a view, valid until the column grows)."""

    def __init__(self) -> None:
        self._data: dict[Any, array] = {}

    def extend(self, name: Any, values: Any, typecode: str = "d") -> None:
        self._data.setdefault(name, array(typecode)).extend(values)

    def __getitem__(self, name: Any) -> Any:
        import numpy as np

        a = self._data[name]
        return np.frombuffer(a, dtype=a.typecode)

    def __contains__(self, name: Any) -> bool:
        return name in self._data

    def __iter__(self) -> Any:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)


class Tally:
    """What a streamed run keeps of its scores, chunk after chunk, in record order. ``columns(group)``
    makes the store of a group of columns (values, ratio parts, timings, verdicts): :class:`Columns`
    by default."""

    def __init__(self, specs: list[MetricSpec], columns: Callable[[str], Any] = lambda group: Columns()) -> None:
        self.specs = specs
        self.n = 0
        self.values = columns("values")  # metric key → float64, NaN where not ok
        self.statuses: dict[str, Counter] = {}
        self.ratios = columns("ratios")  # (confusion metric key, 0 numerator / 1 denominator) → int64
        self.timings = columns("timings")  # stage → float64 seconds, NaN where a record did not time it
        self.notes: dict[str, None] = {}
        self.verdicts = columns("verdicts")  # 0 index (int64), 1 label, 2 verdict (float64): labelled records
        self.disagreeing: dict[int, Any] = {}
        self.usage: dict[str, float] = {}  # the judge's counters, summed over the chunks
        self.failed: dict[str, str] = {}  # judge metric → the first reason a verdict failed (ragexp.judge.judge_failed)
        self.paired = columns("pairs")  # (judge metric, idx / human / judge / unlabelled / rest_idx) → its column
        self.pairs: dict[str, dict] = {}  # judge metric → failed, kind, scale, presence, shown (ragexp.core.labels)
        self.samples: dict[str, list] = {}  # judge.samples > 1: metric → each record's verdicts (a run in memory)
        self.whole: dict[str, float | None] = {}  # a dataset metric without ratio parts (a run of one chunk)
        from ragexp.core.breakdown import Breakdown

        self.breakdown = Breakdown(specs)  # by category and by source (docs/metrics.md), chunk after chunk

    def add(self, part: ChunkPart) -> None:
        for key, n in part.usage.items():
            self.usage[key] = self.usage.get(key, 0.0) + n
        for key, vals in part.values.items():
            self.values.extend(key, vals)
            self.statuses.setdefault(key, Counter()).update(part.statuses[key])
        for key, (num, den) in part.ratios.items():
            self.ratios.extend((key, 0), num, "q")
            self.ratios.extend((key, 1), den, "q")
        for stage in [s for s in self.timings if s not in part.timings]:
            self.timings.extend(stage, [_NAN] * part.n)
        for stage, secs in part.timings.items():
            if stage not in self.timings:
                self.timings.extend(stage, [_NAN] * self.n)
            self.timings.extend(stage, secs)
        self.notes.update(dict.fromkeys(part.notes))
        for key, reason in part.failed.items():
            self.failed.setdefault(key, reason)
        for key, per in part.samples.items():
            self.samples.setdefault(key, []).extend(per)
        self.whole.update(part.whole)
        self.breakdown.merge(part.groups, part.n)
        if part.verdicts is not None:
            self.verdicts.extend(0, [i + self.n for i in part.verdicts[0]], "q")
            self.verdicts.extend(1, part.verdicts[1])
            self.verdicts.extend(2, part.verdicts[2])
        from ragexp.core.labels import MAX_DISAGREEMENTS

        for key, p in part.pairs.items():
            t = self.pairs.setdefault(key, {"failed": 0, "kind": p["kind"], "scale": p["scale"],
                                            "presence": (Counter(), Counter()), "shown": []})
            for name in ("idx", "rest_idx"):
                self.paired.extend((key, name), [i + self.n for i in p[name]], "q")
            for name in ("human", "judge", "unlabelled"):
                self.paired.extend((key, name), p[name])
            t["failed"] += p["failed"]
            t["presence"][0].update(p["presence"][0]), t["presence"][1].update(p["presence"][1])
            t["shown"] = sorted(t["shown"] + [(d, i + self.n, *rest) for d, i, *rest in p["shown"]],
                                key=lambda row: row[:2])[:MAX_DISAGREEMENTS]
        for i, shown in part.disagreeing[: MAX_DISAGREEMENTS - len(self.disagreeing)]:
            self.disagreeing[i + self.n] = shown
        self.n += part.n

    def aggregate(self) -> tuple[dict[str, float | None], dict[str, dict[str, int]]]:
        """Every metric's value (the mean of its ``ok`` values, None when there is none: never a silent 0; a
        confusion metric's summed numerators over its summed denominators) and its status counts."""
        import numpy as np

        values: dict[str, float | None] = {}
        counts: dict[str, dict[str, int]] = {}
        for spec in self.specs:
            if spec.key in self.whole:
                values[spec.key] = self.whole[spec.key]
            elif spec.info.level == "dataset":
                total_num, total_den = int(self.ratios[spec.key, 0].sum()), int(self.ratios[spec.key, 1].sum())
                if total_den == 0:  # the metric's own zero-division value and warning
                    with warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always", RuntimeWarning)
                        values[spec.key] = dataset_value(spec, [])
                    self.notes.update(dict.fromkeys(str(w.message) for w in caught))
                else:
                    values[spec.key] = total_num / total_den
                continue
            if spec.key not in self.values:
                continue
            a = self.values[spec.key]
            ok = a[~np.isnan(a)]
            values[spec.key] = math.fsum(ok) / len(ok) if len(ok) else None
            c = self.statuses[spec.key]
            counts[spec.key] = {k: c[k] for k in (*STATUSES, *c) if c[k]}
        return values, counts

    def trust(self, *, resamples: int, confidence: float, seed: int, target_halfwidth: float | None) -> dict[str, Any]:
        """As :func:`ragexp.core.labels.judge_trust` over the whole run (the judge metrics' agreement with people's
        labels, the keyword verdict's with ``label``), empty when nothing is labelled."""
        from ragexp.core.labels import judge_trust, verdict_pairs

        pairs: dict[str, Any] = {}
        shown, scores = dict(self.disagreeing), {}
        for key, t in self.pairs.items():
            p = {name: self.paired[key, name].tolist() for name in ("idx", "human", "judge", "unlabelled", "rest_idx")}
            if p["idx"] or t["failed"]:
                pairs[key] = {**p, "failed": t["failed"], "kind": t["kind"], "scale": t["scale"],
                              "presence": t["presence"]}
                scores[key] = {i: sc for _, i, _, sc in t["shown"]}
                shown.update({i: r for _, i, r, _ in t["shown"]})
        if 0 in self.verdicts and len(self.verdicts[0]):
            pairs.update(verdict_pairs(self.specs, *(self.verdicts[i].tolist() for i in range(3))))
        if not pairs:
            return {}
        return judge_trust(self.specs, scores, shown, resamples=resamples, confidence=confidence, seed=seed,
                           target_halfwidth=target_halfwidth, pairs=pairs)

    def stage_latencies(self) -> dict[str, float]:
        """Mean seconds per pipeline stage over the records that timed it (``latency/<stage>``)."""
        import numpy as np

        out = {}
        for stage in self.timings:
            a = self.timings[stage]
            a = a[~np.isnan(a)]
            out[f"latency/{stage}"] = math.fsum(a) / len(a)
        return out

    def intervals(self, *, resamples: int, confidence: float, seed: int, method: str,
                  clusters: list[Any] | None = None) -> dict[str, Any]:
        """An :class:`~ragexp.stats.intervals.Interval` for every aggregate: sample metrics over their ``ok``
        values, the confusion metrics by resampling records, ``latency/<stage>`` over the records that timed
        the stage — one resample draw shared by every interval (clustered by ``clusters``, one label per record,
        when given); judge.samples > 1: items, then verdicts within an item (docs/judge-trust.md, "Judge noise")."""
        from ragexp.stats.intervals import Interval, joint_intervals

        out: dict[str, Any] = {}
        for s in self.specs:
            if s.key in self.whole:
                out[s.key] = Interval(self.whole[s.key], None, None, None, self.n, None, float(confidence),
                                      note="a dataset-level metric without a resampling rule: no interval")
            elif s.key in self.samples:
                from ragexp.stats.twostage import two_stage_interval

                out[s.key] = two_stage_interval(self.samples[s.key], binary=s.info.binary, clusters=clusters,
                                                resamples=int(resamples), confidence=float(confidence), seed=int(seed))
            elif s.info.level == "dataset":
                out[s.key] = None  # keeps the specs' order
        ratio_keys = [key for key, part in self.ratios if part == 0]
        ratios = _Read({key: (self.ratios, (key, 0), (key, 1)) for key in ratio_keys})
        columns = {s.key: (self.values, s.key) for s in self.specs
                   if s.info.level != "dataset" and s.key in self.values and s.key not in self.samples}
        for stage in sorted(self.timings):
            columns[f"latency/{stage}"] = (self.timings, stage)
        # each column read when the intervals come to it (joint_intervals converts them one at a time)
        out.update(joint_intervals(_Read(columns), ratios, clusters=clusters, resamples=int(resamples),
                                   confidence=float(confidence), seed=int(seed), method=str(method)))
        return out


class _Read(Mapping):
    """key → a column read from its store when asked for (``(store, name)``), or a pair of them."""

    def __init__(self, where: dict[str, tuple]) -> None:
        self._where = where

    def __getitem__(self, key: str) -> Any:
        store, *names = self._where[key]
        return store[names[0]] if len(names) == 1 else tuple(store[n] for n in names)

    def __iter__(self) -> Any:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)
