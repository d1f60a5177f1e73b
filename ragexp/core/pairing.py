"""The pure part of ``python -m ragexp.compare``: two runs' per-sample tables in, the comparison out —
pairing by sample id (refusals), per-metric :func:`ragexp.stats.paired.paired_compare` with Holm (over the
clusters of ``stats.cluster_by`` when declared), two-stage rows for judge metrics with k > 1 verdicts. Definitions: docs/uncertainty.md, "Comparing
two runs"; docs/judge-trust.md, "Judge noise". Finding and reading the runs is
:mod:`ragexp.tracking.runs`; printing, :mod:`ragexp.report.comparison`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ragexp.common.paths import conf_file
from ragexp.results.columns import TABLE_FILE, metric_keys, samples_column, status_column, trim
from ragexp.errors import DataError
from ragexp.metrics.base import direction, load_all
from ragexp.stats.intervals import CONFIDENCE, RESAMPLES, SEED

#: ``python -m ragexp.compare``'s own settings (min_match_fraction, regressions): conf/compare.yaml, their one place
COMPARE = conf_file("compare")


@dataclass
class RunTable:
    """What a comparison reads of one run: its per-sample table and a few facts."""

    name: str
    columns: list[str]
    rows: list[list[Any]]
    run_id: str | None = None
    experiment_id: str | None = None
    questions_digest: str | None = None
    dataset: str | None = None
    #: the run's own aggregates (over every sample it scored), for the gate's floors
    metrics: dict[str, float] = field(default_factory=dict)
    #: the metrics the run leads with (its summary.json ``headline``; ragexp.core.headline)
    headline: list[str] = field(default_factory=list)
    #: the run's ``stats.cluster_by`` (its per-sample table holds that column)
    cluster_by: str | None = None


def _index(table: RunTable, role: str) -> dict[str, int]:
    if "id" not in table.columns:
        raise DataError(f"{role} run '{table.name}': {TABLE_FILE} has no 'id' column")
    col = table.columns.index("id")
    index: dict[str, int] = {}
    for i, row in enumerate(table.rows):
        sid = str(row[col])
        if sid in index:
            raise DataError(f"{role} run '{table.name}': {TABLE_FILE} row {i + 1}: sample id '{sid}' appears twice")
        index[sid] = i
    return index


def _columns(table: RunTable, rows: list[int]) -> dict[str, tuple]:
    """The table's columns (name → values), for these rows, in this order."""
    picked = [table.rows[i] for i in rows]
    if not picked:
        return {c: () for c in table.columns}
    return dict(zip(table.columns, zip(*picked)))


def _numbers(values: tuple) -> Any:
    """Metric values as floats; None (a sample that did not score) and anything not a number → NaN."""
    import numpy as np

    if set(map(type, values)) <= {float, int, bool, type(None)}:  # what JSON gives: NaN for None
        return np.asarray(values, dtype=np.float64)
    return np.array([float(v) if isinstance(v, (int, float)) else math.nan for v in values], dtype=np.float64)


def compare_tables(baseline: RunTable, candidate: RunTable, *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                   seed: int = SEED, min_match_fraction: float = COMPARE["min_match_fraction"],
                   regressions: int = COMPARE["regressions"], correct_with_labels: bool = False,
                   cluster_by: str | None = None) -> dict[str, Any]:
    """Pair two runs' per-sample tables by id and compare every shared metric (module docstring).

    Returns the comparison as plain data (``comparison.json``): ``samples`` (the pairing),
    ``metrics`` (one row per metric key, in the baseline's column order, then the candidate's
    extra keys), ``regressions`` (per metric, the samples that got most worse), ``not_compared``
    (dataset-level metrics) and ``method``; with people's labels in both tables (``human/<key>``),
    ``agreement``: :func:`ragexp.core.labels.compare_agreement` (corrected means with ``correct_with_labels``).
    ``cluster_by`` (else the baseline's, else the candidate's ``stats.cluster_by``): the column of each sample's
    cluster; the intervals, p-values and MDEs are then over clusters (:mod:`ragexp.stats.paired`).
    """
    shared, cols_b, cols_c = _pair(baseline, candidate, min_match_fraction)
    rows, both = _metric_rows(baseline, candidate)
    values_b, values_c, ok = _usable_values(cols_b, cols_c, both, rows)
    by, clusters = _clusters(cluster_by, baseline, candidate, cols_b, cols_c)
    _test(values_b, values_c, ok, both, rows, resamples=resamples, confidence=confidence, seed=seed, clusters=clusters)
    if clusters is None:  # the two-stage bootstrap resamples samples: with clusters, the cluster test stands
        _two_stage(cols_b, cols_c, values_b, values_c, ok, both, rows, resamples=resamples, confidence=confidence,
                   seed=seed)
    compared = _verdicts(rows, 1 - confidence)
    n = len(shared)
    from ragexp.core.labels import compare_agreement, judges_only

    agreement = compare_agreement(cols_b, cols_c, both, resamples=resamples, confidence=confidence, seed=seed,
                                  correct=correct_with_labels)
    judged = bool(agreement) and judges_only(rows, agreement, cols_b, cols_c)  # the same answers: judges compared
    queries = cols_b.get("query") or [None] * n
    return {
        **({"agreement": agreement} if agreement else {}),
        **({"judges_only": True} if judged else {}),
        "not_compared": _dataset_level(baseline, candidate),
        "baseline": {"run_id": baseline.run_id, "name": baseline.name, "samples": len(baseline.rows)},
        "candidate": {"run_id": candidate.run_id, "name": candidate.name, "samples": len(candidate.rows)},
        "samples": {"matched": n, "only_in_baseline": len(baseline.rows) - n,
                    "only_in_candidate": len(candidate.rows) - n,
                    "questions_digest": baseline.questions_digest or candidate.questions_digest},
        "method": {"diff": "candidate − baseline", "confidence": confidence, "resamples": resamples, "seed": seed,
                   "ci": "paired bootstrap, percentile", "p_value": "two-sided: sign-flip permutation of the mean "
                   "difference; exact McNemar (binomial on discordant pairs) for 0/1 metrics",
                   "adjustment": f"Holm across the {len(compared)} metrics compared",
                   "significant": f"Holm-adjusted p < {1 - confidence:g}", "mde": "80% power, two-sided",
                   **(_clustered_method(by, rows) if clusters is not None else {})},
        "metrics": rows,
        "regressions": _regressions(values_b, values_c, ok, both, rows, shared, queries, regressions),
    }


def _pair(baseline: RunTable, candidate: RunTable, min_match_fraction: float
          ) -> tuple[list[str], dict[str, tuple], dict[str, tuple]]:
    """The shared sample ids (baseline order) and each table's columns over them, in that order; refuses
    runs of other questions or with too few shared ids."""
    if baseline.questions_digest and candidate.questions_digest \
            and baseline.questions_digest != candidate.questions_digest:
        raise DataError(
            f"the runs were evaluated on different questions: baseline '{baseline.name}' "
            f"(dataset {baseline.dataset or '?'}, questions digest {baseline.questions_digest}) vs candidate "
            f"'{candidate.name}' (dataset {candidate.dataset or '?'}, questions digest {candidate.questions_digest})")
    b_index, c_index = _index(baseline, "baseline"), _index(candidate, "candidate")
    shared = [sid for sid in b_index if sid in c_index]
    needed = max(2, math.ceil(min_match_fraction * max(len(b_index), len(c_index))))
    if len(shared) < needed:
        raise DataError(
            f"only {len(shared)} sample ids are in both runs (baseline '{baseline.name}' has {len(b_index)}, "
            f"candidate '{candidate.name}' has {len(c_index)}); at least {needed} are needed "
            f"(min_match_fraction={min_match_fraction:g}): are they runs of the same dataset?")
    cols_b = _columns(baseline, [b_index[s] for s in shared])
    cols_c = _columns(candidate, [c_index[s] for s in shared])
    for sid, qb, qc in zip(shared, cols_b.get("query", ()), cols_c.get("query", ())):
        if qb != qc and trim(qb) != trim(qc):  # a logged table holds the query trimmed, a result's whole
            raise DataError(f"sample id '{sid}' has another query in each run ({qb!r} vs {qc!r}): "
                            f"the runs were evaluated on different questions")
    return shared, cols_b, cols_c


def _metric_rows(baseline: RunTable, candidate: RunTable) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """One row per metric key of either run (its direction; where it is missing), and the shared keys."""
    b_keys, c_keys = metric_keys(baseline.columns), metric_keys(candidate.columns)
    both = [k for k in b_keys if k in set(c_keys)]
    rows: dict[str, dict[str, Any]] = {}
    for key in b_keys + [k for k in c_keys if k not in set(b_keys)]:
        hib, known = direction(key)
        rows[key] = {"key": key, "higher_is_better": hib, "direction_known": known}
        if key not in both:
            only = "baseline" if key in b_keys else "candidate"
            rows[key].update(only_in=only, note=f"computed in the {only} run only")
    return rows, both


def _usable_values(cols_b: dict[str, tuple], cols_c: dict[str, tuple], both: list[str],
                   rows: dict[str, dict[str, Any]]) -> tuple[Any, Any, Any]:
    """``(n, metrics)`` arrays of both runs' values and of "ok in both"; the others counted per row."""
    import numpy as np

    n = len(cols_b["id"])
    values_b = np.full((n, len(both)), np.nan)
    values_c = np.full((n, len(both)), np.nan)
    ok = np.zeros((n, len(both)), dtype=bool)
    for j, key in enumerate(both):
        values_b[:, j] = _numbers(cols_b[key])
        values_c[:, j] = _numbers(cols_c[key])
        sb = np.asarray(cols_b[status_column(key)], dtype=object)
        sc = np.asarray(cols_c[status_column(key)], dtype=object)
        ok_b = (sb == "ok") & np.isfinite(values_b[:, j])
        ok_c = (sc == "ok") & np.isfinite(values_c[:, j])
        ok[:, j] = ok_b & ok_c
        excluded: dict[str, int] = {}
        for role, statuses, good in (("baseline", sb, ok_b), ("candidate", sc, ok_c)):
            for i in np.flatnonzero(~good):
                label = f"{role} {statuses[i] if statuses[i] != 'ok' else 'no value'}"
                excluded[label] = excluded.get(label, 0) + 1
        rows[key].update(n=int(ok[:, j].sum()), excluded=int(n - ok[:, j].sum()), excluded_by=excluded)
    return values_b, values_c, ok


def _clusters(cluster_by: str | None, baseline: RunTable, candidate: RunTable, cols_b: dict[str, tuple],
              cols_c: dict[str, tuple]) -> tuple[str | None, Any]:
    """The cluster column and each shared sample's label in it (None when no cluster is declared); a declared
    column neither table holds is refused."""
    import numpy as np

    by = cluster_by or baseline.cluster_by or candidate.cluster_by
    if not by:
        return None, None
    labels = cols_b.get(by) or cols_c.get(by)
    if labels is None:
        raise DataError(f"stats.cluster_by='{by}': neither run's per-sample table has a '{by}' column "
                        f"(baseline '{baseline.name}', candidate '{candidate.name}'); "
                        "name a column they hold or set stats.cluster_by=null")
    return by, np.array([str(v) for v in labels], dtype=object)


def _clustered_method(by: str, rows: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The method's words for a comparison over clusters: which column, how many clusters."""
    counts = sorted({r["clusters"] for r in rows.values() if r.get("clusters") is not None})
    many = "/".join(map(str, counts)) or "0"
    return {"cluster_by": by, "clusters": counts[-1] if counts else 0,
            "ci": f"cluster bootstrap over the {many} clusters of {by}, percentile",
            "p_value": f"two-sided: sign-flip permutation of the {many} clusters' total differences ({by}); "
                       "no McNemar (it takes the pairs as independent)",
            "mde": f"80% power, two-sided, clustered standard error ({many} clusters)"}


def _test(values_b: Any, values_c: Any, ok: Any, both: list[str], rows: dict[str, dict[str, Any]], *,
          resamples: int, confidence: float, seed: int, clusters: Any = None) -> None:
    """The paired statistics of every shared metric, into its row. Metrics with the same usable
    samples share one set of resamples (one matrix product for all of them); ``clusters``: each sample's."""
    import numpy as np

    from ragexp.stats.paired import paired_compare_columns

    groups: dict[bytes, list[int]] = {}
    for j in range(len(both)):
        groups.setdefault(np.packbits(ok[:, j]).tobytes(), []).append(j)
    for cols in groups.values():
        mask = ok[:, cols[0]]
        if not mask.any():
            for j in cols:
                rows[both[j]].update(note="no sample is ok in both runs")
            continue
        results = paired_compare_columns(values_b[mask][:, cols], values_c[mask][:, cols], resamples=resamples,
                                         confidence=confidence, seed=seed,
                                         clusters=None if clusters is None else clusters[mask])
        for j, r in zip(cols, results):
            row = rows[both[j]]
            row.update({k: v for k, v in asdict(r).items() if k != "n" and not (k == "clusters" and v is None)})
            row["mde"] = None if math.isnan(r.mde) else r.mde
            row["better"], row["worse"] = (r.wins, r.losses) if row["higher_is_better"] else (r.losses, r.wins)


def _two_stage(cols_b: dict[str, tuple], cols_c: dict[str, tuple], values_b: Any, values_c: Any, ok: Any,
               both: list[str], rows: dict[str, dict[str, Any]], *, resamples: int, confidence: float, seed: int
               ) -> None:
    """Metrics with k > 1 verdicts per sample in either run: the two-stage paired interval and p-value
    replace the one-stage ones (module docstring, 3)."""
    import numpy as np

    from ragexp.stats.twostage import two_stage_paired

    registry = load_all()
    for j, key in enumerate(both):
        col = samples_column(key)
        info = registry.get(key.split("/", 1)[0])
        if "p_value" not in rows[key] or (info is not None and info.binary) or (col not in cols_b and col not in cols_c):
            continue
        verdicts = []
        for cols, values in ((cols_b, values_b), (cols_c, values_c)):
            k = cols.get(col)
            verdicts.append([list(k[i]) if k is not None and isinstance(k[i], (list, tuple)) and len(k[i])
                             else [values[i, j]] for i in np.flatnonzero(ok[:, j])])
        r = two_stage_paired(*verdicts, resamples=resamples, confidence=confidence, seed=seed)
        if r["p_value"] is None:
            continue
        row = rows[key]
        row["one_stage"] = {"ci_low": row["ci_low"], "ci_high": row["ci_high"], "p_value": row["p_value"],
                            "test": row["test"]}
        row.update(ci_low=r["ci_low"], ci_high=r["ci_high"], p_value=r["p_value"], method="two_stage",
                   test="two-stage bootstrap")


def _verdicts(rows: dict[str, dict[str, Any]], alpha: float) -> list[str]:
    """Holm across the metrics compared, and each one's verdict (direction-aware); their keys."""
    from ragexp.stats.paired import holm

    compared = [k for k, r in rows.items() if "p_value" in r]
    for key, p in zip(compared, holm([rows[k]["p_value"] for k in compared])):
        row = rows[key]
        row["p_holm"] = p
        if p < alpha and row["diff"] != 0:
            row["verdict"] = "better" if (row["diff"] > 0) == row["higher_is_better"] else "worse"
        else:
            row["verdict"] = "no significant difference"
    return compared


def _regressions(values_b: Any, values_c: Any, ok: Any, both: list[str], rows: dict[str, dict[str, Any]],
                 shared: list[str], queries: list[Any], limit: int) -> dict[str, list[dict[str, Any]]]:
    """Per compared metric, up to ``limit`` samples that got most worse (direction-aware)."""
    import numpy as np

    out: dict[str, list[dict[str, Any]]] = {}
    for j, key in enumerate(both):
        if "p_value" not in rows[key]:
            continue
        sign = 1.0 if rows[key]["higher_is_better"] else -1.0
        change = np.where(ok[:, j], sign * (values_c[:, j] - values_b[:, j]), np.nan)
        worst = [i for i in np.argsort(np.nan_to_num(change, nan=np.inf), kind="stable")[:limit] if change[i] < 0]
        out[key] = [{"id": shared[i], "query": queries[i], "baseline": float(values_b[i, j]),
                     "candidate": float(values_c[i, j])} for i in worst]
    return out


_INTERVAL_SUFFIXES = ("/n", "/stderr", "/ci_low", "/ci_high")


#: why a dataset-level metric is not compared (``ragexp.compare``'s line under the table, the sweep board's note)
RUN_LEVEL = "one value per run, nothing to pair"


def run_level(key: str) -> bool:
    """Whether ``key`` is a dataset-level metric's value: one per run, no per-sample values to pair.

    >>> run_level("keyword_verdict_f1"), run_level("answer_token_f1"), run_level("keyword_verdict_f1/n")
    (True, False, False)
    """
    info = load_all().get(key.split("/", 1)[0])
    return info is not None and info.level == "dataset" and not key.endswith(_INTERVAL_SUFFIXES)


def multiplicity_note(comparison: dict[str, Any]) -> str:
    """The line under a comparison's table and in its picture's caption: the p-values are Holm-adjusted over every
    metric compared, the intervals are not, so an interval that excludes 0 beside a p above the threshold is no
    contradiction (docs/uncertainty.md, "Comparing two runs").

    >>> multiplicity_note({"method": {"confidence": 0.95}, "metrics": {f"m{i}": {"p_value": 0.1} for i in range(39)}})
    "p: Holm-adjusted over the 39 metrics compared; intervals are each metric's own 95%, not adjusted"
    """
    compared = sum(1 for r in comparison["metrics"].values() if "p_value" in r)
    level = round(100 * comparison["method"]["confidence"], 2)
    return (f"p: Holm-adjusted over the {compared} metric{'s' if compared != 1 else ''} compared; "
            f"intervals are each metric's own {level:g}%, not adjusted")


def _dataset_level(baseline: RunTable, candidate: RunTable) -> dict[str, dict[str, float]]:
    """Dataset-level metrics both runs logged (one value per run, no per-sample values to pair)."""
    return {key: {"baseline": baseline.metrics[key], "candidate": candidate.metrics[key]}
            for key in baseline.metrics if key in candidate.metrics and run_level(key)}
