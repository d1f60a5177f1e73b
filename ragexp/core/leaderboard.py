"""A sweep's leaderboard, the arithmetic (no I/O): which metric ranks the children, their order on it, and which
differ from the best.

The metric is ``stats.primary``, else the sweep's ``objective``, else the first metric of the
suite (the first key of the children's ``summary.json`` metrics). Each child's mean and
interval are the ones the child computed (its ``summary.json`` ``intervals``). The best child
is the one with the highest mean (the lowest for a lower-is-better metric such as
``avg_latency``). Every other child is compared with the best one **paired over sample ids**
(the ids where both have an ``ok`` value) with :func:`ragexp.stats.paired.paired_compare`, and
the p-values are Holm-adjusted across the comparisons (over clusters when the best run declared
``stats.cluster_by``: its clusters are resampled and sign-flipped whole); a child ``differs`` from the best when
its adjusted p-value is below ``1 − stats.confidence``. With ``stats.correct_with_labels=true`` and
people's labels on the metric, each child's judge-corrected mean (PPI++) is ranked instead, and the
paired test is the corrected difference over the same items (docs/judge-trust.md).

:mod:`ragexp.tracking.leaderboard` reads the children from MLflow and their job folders, and logs the board.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from ragexp.common.renamed import current_key
from ragexp.core.pairing import RUN_LEVEL, run_level
from ragexp.metrics.base import direction, load_all
from ragexp.stats.intervals import CONFIDENCE, RESAMPLES, SEED


@dataclass
class Entry:
    """One child run as the leaderboard sees it."""

    run_id: str
    name: str
    status: str
    interval: dict[str, Any] | None = None  # the child's summary.json interval of the metric
    values: dict[str, float] = field(default_factory=dict)  # sample id → ok value of the metric
    problem: str | None = None  # why the child has no value (failed run, metric absent)
    human: dict[str, float] = field(default_factory=dict)  # sample id → people's label of the metric
    cluster_by: str | None = None  # the run's stats.cluster_by
    clusters: dict[str, Any] = field(default_factory=dict)  # sample id → its cluster (the run's cluster_by column)


def choose_metric(primary: str | None, objective: str | None, summaries: list[Mapping[str, Any]]) -> str | None:
    """``stats.primary``, else the objective, else the first headline metric of the children's summaries
    (the suite's ``_headline_``, :mod:`ragexp.core.headline`), else the first metric of the first child's summary.
    A key written under an old name is today's (``f1`` → ``keyword_verdict_f1``, the key the children's values
    are read under, and the one the board is headed with)."""
    if primary:
        return current_key(str(primary))
    if objective:
        return current_key(str(objective))
    recorded = answers_recorded(summaries)
    for s in summaries:
        if s.get("headline"):  # over recorded answers, a metric of the answer cannot tell the jobs apart
            movable = [k for k in s["headline"] if not (recorded and reads_answer(k))]
            return str((movable or s["headline"])[0])
    for s in summaries:
        if s.get("metrics"):
            return next(iter(s["metrics"]))
    return None


def answers_recorded(summaries: list[Mapping[str, Any]]) -> bool:
    """Every child retrieved with its own pipeline, kept the dataset's recorded answers (``generator=precomputed``
    with a retriever) and those answers are the same in every job (one ``answers_digest``): only then can no
    answer metric differ between them. A sweep over ``dataset.system=strong,weak`` keeps two systems' recorded
    answers, which differ; a summary without the digest (an older run) is not taken to share its answers.

    >>> kept = {"provenance": {"contexts": "pipeline", "answers": "dataset"}}
    >>> answers_recorded([{**kept, "answers_digest": "a1"}, {**kept, "answers_digest": "a1"}])
    True
    >>> answers_recorded([{**kept, "answers_digest": "a1"}, {**kept, "answers_digest": "b2"}])
    False
    """
    said = [s.get("provenance") or {} for s in summaries]
    kept = bool(said) and all(p.get("contexts") == "pipeline" and p.get("answers") == "dataset" for p in said)
    digests = {s.get("answers_digest") for s in summaries}
    return kept and len(digests) == 1 and None not in digests


#: how a child's provenance names a memory layer that retrieves sessions (ids ``S<n>``): ``<retriever> over memory_layer=<kind>``
_SESSION_MEMORIES = ("memory_layer=sessions", "memory_layer=summaries")


def mixed_granularity(summaries: list[Mapping[str, Any]]) -> bool:
    """Some children's memory layer retrieved sessions (``S<n>`` ids) and others turns: LoCoMo's evidence recall
    reads the first at session level and an id metric matches no turn id with a session id (docs/memory-layers.md).

    >>> def job(kind): return {"provenance": {"stages": {"retriever": f"bm25 over memory_layer={kind}"}}}
    >>> mixed_granularity([job("turns"), job("summaries")]), mixed_granularity([job("sessions"), job("summaries")])
    (True, False)
    """
    said = [str(((s.get("provenance") or {}).get("stages") or {}).get("retriever", "")) for s in summaries]
    sessions = [name.endswith(_SESSION_MEMORIES) for name in said]
    return any(sessions) and not all(sessions)


def reads_answer(key: str) -> bool:
    """Whether the metric of ``key`` reads the record's answer (``answer_token_f1``: yes; ``context_recall``: no)."""
    info = load_all().get(key.split("/", 1)[0])
    try:
        return info is not None and "answer" in info.required_fields()
    except ValueError:
        return False


def other_headlines(metric: str, summaries: list[Mapping[str, Any]]) -> list[str]:
    """The children's headline metrics other than the board's ``metric``, in their order."""
    keys: list[str] = []
    for s in summaries:
        keys += [str(k) for k in s.get("headline") or () if k != metric and str(k) not in keys]
    return keys


def headline_columns(board: dict[str, Any], others: dict[str, dict[str, Any]]) -> None:
    """Each row of ``board`` gets ``also``: for every other headline metric, its mean and whether it
    differs from that metric's best (``others``: that metric's own board); ``board["mixed"]`` says in
    sentences where the ranking metric sees noise but another headline metric a real difference."""
    mixed = []
    for key, other in others.items():
        by_run = {r["run_id"]: r for r in other["rows"]}
        for row in board["rows"]:
            o = by_run.get(row["run_id"]) or {}
            row.setdefault("also", {})[key] = {
                "mean": o.get("mean"), "ci_low": o.get("ci_low"), "ci_high": o.get("ci_high"), "n": o.get("n"),
                "best": bool(o.get("best")), "differs": o.get("differs"), "p_holm": o.get("p_holm")}
            if row.get("differs") is False and o.get("differs"):
                mixed.append(f"{row.get('label') or row['run_name']} is within noise of the best on {board['metric']}, "
                             f"but differs from the best on {key} ({o['mean']:.4f} against {other['rows'][0]['mean']:.4f}, "
                             f"p {o['p_holm']:.3g}): look at both before choosing")
    board["headline"] = [board["metric"], *others]
    if mixed:
        board["mixed"] = mixed


def higher_is_better(key: str) -> bool:
    """From the metric registry (``ndcg/ndcg_at_10`` → ``ndcg``); ``latency/<stage>`` is lower-is-better."""
    return direction(key)[0]


def rank(entries: list[Entry], *, metric: str, higher: bool = True, resamples: int = RESAMPLES,
         confidence: float = CONFIDENCE, seed: int = SEED, corrected: bool = False) -> dict[str, Any]:
    """The leaderboard as a dict (the content of ``leaderboard.json``), rows best first."""
    import numpy as np

    from ragexp.stats.paired import holm, paired_compare_columns

    scored = [e for e in entries if e.interval and e.interval.get("mean") is not None]
    scored.sort(key=lambda e: e.interval["mean"], reverse=higher)
    best = scored[0] if scored else None
    rows: list[dict[str, Any]] = []
    tests: list[tuple[int, float]] = []
    paired: dict[tuple[str, ...], list[tuple[int, Entry]]] = {}  # the rows to test, by the ids they pair on
    for e in scored:
        iv = e.interval
        row = {"run_id": e.run_id, "run_name": e.name, "status": e.status, "mean": iv.get("mean"),
               "stderr": iv.get("stderr"), "ci_low": iv.get("ci_low"), "ci_high": iv.get("ci_high"),
               "n": iv.get("n"), "method": iv.get("method"), "best": e is best}
        if e is not best:
            ids = [i for i in best.values if i in e.values]
            row["n_paired"] = len(ids)
            d = None
            if corrected:
                from ragexp.core.labels import corrected_difference

                nan = math.nan
                d = corrected_difference([best.human.get(i, nan) for i in ids], [best.values[i] for i in ids],
                                         [e.human.get(i, nan) for i in ids], [e.values[i] for i in ids],
                                         confidence=confidence)
            if d is not None:
                row.update(diff_vs_best=d["diff"], diff_ci_low=d["ci_low"], diff_ci_high=d["ci_high"],
                           p_value=d["p_value"], test="ppi++ (corrected difference)")
                tests.append((len(rows), d["p_value"]))
            elif len(ids) >= 2:
                paired.setdefault(tuple(ids), []).append((len(rows), e))
            else:
                row["note"] = (f"not compared ({RUN_LEVEL})" if run_level(metric) else
                               f"only {len(ids)} sample ids with an ok value in both runs: not compared")
        rows.append(row)
    by = best.cluster_by if best is not None and best.clusters else None
    for ids, group in paired.items():  # the children paired on the same ids share one resampling
        b = np.array([[best.values[i]] * len(group) for i in ids])
        c = np.array([[e.values[i] for _, e in group] for i in ids])
        labels = [best.clusters.get(i) for i in ids] if by else None
        for (k, _), r in zip(group, paired_compare_columns(b, c, clusters=labels, resamples=resamples,
                                                           confidence=confidence, seed=seed)):
            rows[k].update(diff_vs_best=r.diff, diff_ci_low=r.ci_low, diff_ci_high=r.ci_high, p_value=r.p_value,
                           test=r.test, wins=r.wins, ties=r.ties, losses=r.losses,
                           **({"clusters": r.clusters} if r.clusters is not None else {}))
            tests.append((k, r.p_value))
    tests.sort()
    for (i, _), adjusted in zip(tests, holm([p for _, p in tests]) if tests else []):
        rows[i]["p_holm"] = adjusted
        rows[i]["differs"] = bool(adjusted < 1 - confidence)
    for e in entries:
        if e not in scored:
            rows.append({"run_id": e.run_id, "run_name": e.name, "status": e.status, "mean": None,
                         "note": e.problem or f"no value of {metric}"})
    return {"metric": metric, "higher_is_better": higher, "confidence": confidence,
            "best": best.name if best else None, "comparison": comparison_method(by, rows),
            **({"cluster_by": by} if by else {}),
            **({"corrected_with_labels": True} if corrected else {}),
            "rows": rows}


def comparison_method(cluster_by: str | None, rows: Sequence[Mapping[str, Any]]) -> str:
    """How the board's paired tests were made, in words (``leaderboard.json``'s ``comparison``).

    >>> comparison_method(None, [])
    'paired over sample ids, Holm-adjusted'
    >>> comparison_method("conversation_id", [{"clusters": 10}, {"clusters": 10}])
    'paired over sample ids, over the 10 clusters of conversation_id (each resampled and sign-flipped whole), Holm-adjusted'
    """
    counts = sorted({int(r["clusters"]) for r in rows if r.get("clusters") is not None})
    if not cluster_by or not counts:
        return "paired over sample ids, Holm-adjusted"
    return (f"paired over sample ids, over the {'/'.join(map(str, counts))} clusters of {cluster_by} "
            "(each resampled and sign-flipped whole), Holm-adjusted")


def clusters_note(board: Mapping[str, Any], summaries: Sequence[Mapping[str, Any]], resamples: int = RESAMPLES
                  ) -> str | None:
    """The board's note when its runs are clustered (``stats.cluster_by``): its paired tests are over clusters,
    how many, and the smallest p-value so few clusters allow (docs/uncertainty.md); None when no run is clustered.

    >>> board = {"cluster_by": "conversation_id", "rows": [{"best": True}, {"clusters": 10}]}
    >>> clusters_note(board, [{"stats": {"cluster_by": "conversation_id"}}])[:102]
    'The intervals and the paired tests are clustered by conversation_id: each test is over its 10 clusters'
    >>> clusters_note({"rows": []}, [{"stats": {}}]) is None
    True
    """
    from ragexp.stats.intervals import FEW_CLUSTERS

    clustered = sorted({str((s.get("stats") or {}).get("cluster_by")) for s in summaries
                        if (s.get("stats") or {}).get("cluster_by")})
    if not clustered:
        return None
    by = board.get("cluster_by")
    counts = sorted({int(r["clusters"]) for r in board.get("rows") or () if r.get("clusters") is not None})
    if not by or not counts:  # clustered runs, but nothing was tested over clusters (one run, no shared ids, PPI++)
        tested = any(r.get("p_value") is not None for r in board.get("rows") or ())
        return (f"The intervals are clustered by {', '.join(clustered)}" + (
            ", but the paired tests take the questions as independent (judge-corrected, PPI++, or no cluster column "
            "in the best run's table): with few clusters their p-values are optimistic" if tested else "")
            + " (docs/uncertainty.md).")
    note = (f"The intervals and the paired tests are clustered by {by}: each test is over its "
            f"{'/'.join(map(str, counts))} clusters, resampled and sign-flipped whole, not over the questions")
    plain = sum(1 for r in board.get("rows") or () if r.get("p_value") is not None and r.get("clusters") is None)
    if plain:  # stats.correct_with_labels: the PPI++ corrected difference is over the labelled items, not clusters
        note += f" (but {plain} judge-corrected comparison(s), PPI++, take the labelled questions as independent)"
    few = counts[0]
    if few < FEW_CLUSTERS:
        floor = 2 / 2 ** few if 2 ** few <= resamples else 2 / (resamples + 1)
        note += (f"; with {few} clusters no p-value can fall below {floor:.2g} before Holm, "
                 "and a real difference may not reach significance")
    return note + " (docs/uncertainty.md)."
