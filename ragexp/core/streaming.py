"""A run scored chunk by chunk, reduced to what its statistics need — no I/O here.

:func:`score_chunk` scores one chunk of records (in whichever process holds it) and gives a
:class:`ChunkPart`: the chunk's per-sample table, and per metric its ``ok`` values (NaN elsewhere),
its status counts, the confusion metrics' per-record ratio parts, the pipeline stages' timings.
:class:`Tally` keeps, for the whole run, only those numbers — 8 bytes per sample per metric (and
16 per confusion metric), never a record, a text or a Score — and :meth:`Tally.finish` gives the
aggregates, status counts, stage latencies and intervals, the same values as
:func:`ragexp.core.scoring.aggregate`, :func:`~ragexp.core.scoring.uncertainty` and
:func:`~ragexp.core.scoring.stage_latencies` over the whole list (tests/test_streaming.py).
"""

from __future__ import annotations

import math
import warnings
from array import array
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from ragexp.core.results import per_sample_columns
from ragexp.core.scoring import MetricSpec, dataset_value, ratio_parts, score
from ragexp.metrics.base import STATUSES

_NAN = float("nan")


def streamable(specs: list[MetricSpec]) -> str | None:
    """Why these metrics cannot be scored chunk by chunk (a judge metric, a dataset-level metric without
    per-record parts), or None when they can."""
    for s in specs:
        if s.info.judge:
            return f"judge metric '{s.key}'"
        if s.info.level == "dataset" and ratio_parts(s, [], {}) is None:
            return f"dataset-level metric '{s.key}' without per-record parts"
    return None


@dataclass
class ChunkPart:
    """One chunk's scores, as :class:`Tally` takes them."""

    n: int
    table: dict[str, list]  # the chunk's per-sample columns (ragexp.core.results.per_sample_columns)
    values: dict[str, list[float]]  # metric key → value where ok, NaN elsewhere
    statuses: dict[str, Counter]
    ratios: dict[str, tuple[list[int], list[int]]]  # confusion metric → per-record (numerator, denominator)
    timings: dict[str, list[float]]  # stage → seconds, NaN where a record did not time it
    notes: list[str] = field(default_factory=list)
    verdicts: tuple[list[int], list[float], list[float]] | None = None  # ragexp.core.labels.label_verdicts
    disagreeing: list[tuple[int, Any]] = field(default_factory=list)  # (index, id/query/answer) of the first ones


def score_chunk(records: list, specs: list[MetricSpec]) -> ChunkPart:
    """Every sample-level metric of ``specs`` on ``records`` (one process), and the confusion parts."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", RuntimeWarning)
        scores = score(records, specs, processes=1)
        confusions: dict[str, list] = {}
        ratios = {s.key: ratio_parts(s, records, confusions) for s in specs if s.info.level == "dataset"}
    values = {key: [s.value if s.status == "ok" and s.value is not None else _NAN for s in per]
              for key, per in scores.items()}
    statuses = {key: Counter(s.status for s in per) for key, per in scores.items()}
    stages = dict.fromkeys(stage for r in records for stage in (r.timings or {}))
    timings = {stage: [(r.timings or {}).get(stage, _NAN) for r in records] for stage in stages}
    notes = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    from ragexp.core.labels import MAX_DISAGREEMENTS, label_verdicts

    verdicts = label_verdicts(specs, records)
    disagreeing = []
    if verdicts is not None:
        for i, h, j in zip(*verdicts):
            if h != j and len(disagreeing) < MAX_DISAGREEMENTS:
                r = records[i]
                disagreeing.append((i, _Shown(r.id, r.query, r.answer)))
    return ChunkPart(len(records), per_sample_columns(records, scores), values, statuses, ratios, timings, notes,
                     verdicts, disagreeing)


@dataclass
class _Shown:
    """What the disagreements table shows of a record."""

    id: str
    query: Any
    answer: Any


class Tally:
    """What a streamed run keeps of its scores, chunk after chunk, in record order."""

    def __init__(self, specs: list[MetricSpec]) -> None:
        self.specs = specs
        self.n = 0
        self.values: dict[str, array] = {}
        self.statuses: dict[str, Counter] = {}
        self.ratios: dict[str, tuple[array, array]] = {}
        self.timings: dict[str, array] = {}
        self.notes: dict[str, None] = {}
        self.verdicts: tuple[array, array, array] | None = None
        self.disagreeing: dict[int, Any] = {}

    def add(self, part: ChunkPart) -> None:
        for key, vals in part.values.items():
            self.values.setdefault(key, array("d")).extend(vals)
            self.statuses.setdefault(key, Counter()).update(part.statuses[key])
        for key, (num, den) in part.ratios.items():
            have = self.ratios.setdefault(key, (array("q"), array("q")))
            have[0].extend(num)
            have[1].extend(den)
        for stage in self.timings.keys() - part.timings.keys():
            self.timings[stage].extend([_NAN] * part.n)
        for stage, secs in part.timings.items():
            if stage not in self.timings:
                self.timings[stage] = array("d", [_NAN] * self.n)
            self.timings[stage].extend(secs)
        self.notes.update(dict.fromkeys(part.notes))
        if part.verdicts is not None:
            if self.verdicts is None:
                self.verdicts = (array("q"), array("d"), array("d"))
            self.verdicts[0].extend(i + self.n for i in part.verdicts[0])
            self.verdicts[1].extend(part.verdicts[1])
            self.verdicts[2].extend(part.verdicts[2])
        from ragexp.core.labels import MAX_DISAGREEMENTS

        for i, shown in part.disagreeing[: MAX_DISAGREEMENTS - len(self.disagreeing)]:
            self.disagreeing[i + self.n] = shown
        self.n += part.n

    def aggregate(self) -> tuple[dict[str, float | None], dict[str, dict[str, int]]]:
        """As :func:`ragexp.core.scoring.aggregate`: every metric's value and status counts."""
        import numpy as np

        values: dict[str, float | None] = {}
        counts: dict[str, dict[str, int]] = {}
        for spec in self.specs:
            if spec.info.level == "dataset":
                num, den = self.ratios[spec.key]
                total_num, total_den = int(np.asarray(num).sum()), int(np.asarray(den).sum())
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
            a = np.frombuffer(self.values[spec.key], dtype=np.float64)
            ok = a[~np.isnan(a)]
            values[spec.key] = math.fsum(ok) / len(ok) if len(ok) else None
            c = self.statuses[spec.key]
            counts[spec.key] = {k: c[k] for k in (*STATUSES, *c) if c[k]}
        return values, counts

    def trust(self, *, resamples: int, confidence: float, seed: int, target_halfwidth: float | None) -> dict[str, Any]:
        """As :func:`ragexp.core.labels.judge_trust` over the whole run (no judge metric: the keyword
        verdict's agreement with ``label``), empty when nothing is labelled."""
        from ragexp.core.labels import VERDICT_KEY, judge_trust, verdict_pairs

        if self.verdicts is None or not len(self.verdicts[0]):
            return {}
        pairs = {VERDICT_KEY: verdict_pairs(*(v.tolist() for v in self.verdicts))}
        return judge_trust(self.specs, {}, self.disagreeing, resamples=resamples, confidence=confidence, seed=seed,
                           target_halfwidth=target_halfwidth, pairs=pairs)

    def stage_latencies(self) -> dict[str, float]:
        """As :func:`ragexp.core.scoring.stage_latencies`."""
        import numpy as np

        out = {}
        for stage, secs in self.timings.items():
            a = np.frombuffer(secs, dtype=np.float64)
            a = a[~np.isnan(a)]
            out[f"latency/{stage}"] = math.fsum(a) / len(a)
        return out

    def intervals(self, *, resamples: int = 10_000, confidence: float = 0.95, seed: int = 0,
                  method: str = "percentile") -> dict[str, Any]:
        """As :func:`ragexp.core.scoring.uncertainty` without clusters: one draw shared by every interval."""
        import numpy as np

        from ragexp.stats.intervals import joint_intervals

        out: dict[str, Any] = {s.key: None for s in self.specs if s.info.level == "dataset"}
        ratios = {key: (np.frombuffer(num, dtype=np.int64).astype(float), np.frombuffer(den, dtype=np.int64).astype(float))
                  for key, (num, den) in self.ratios.items()}
        columns = {s.key: np.frombuffer(self.values[s.key], dtype=np.float64)  # joint_intervals copies
                   for s in self.specs if s.info.level != "dataset" and s.key in self.values}
        for stage in sorted(self.timings):
            columns[f"latency/{stage}"] = np.frombuffer(self.timings[stage], dtype=np.float64)
        out.update(joint_intervals(columns, ratios, clusters=None, resamples=int(resamples),
                                   confidence=float(confidence), seed=int(seed), method=str(method)))
        return out
