"""A run's description in MLflow (the ``mlflow.note.content`` tag, shown above its params): a short
Markdown summary written from ``summary.json`` — the dataset and its source, how many samples,
the headline metrics with their intervals and the samples each is over, what was skipped, what
the judge cost, and what did not score ``ok``.

    >>> print(run_description({"dataset": "demo", "dataset_source": "ragexp:demo/questions.jsonl",
    ...     "n_samples": 50, "metrics": {"hit_rate/hit_rate_at_1": 0.98, "hit_rate/hit_rate_at_3": 1.0, "bleu": 21.53},
    ...     "intervals": {"hit_rate/hit_rate_at_1": {"mean": 0.98, "ci_low": 0.895, "ci_high": 0.996, "n": 50},
    ...                   "bleu": {"mean": 21.53, "ci_low": 15.2, "ci_high": 28.0, "n": 48}},
    ...     "stats": {"confidence": 0.95}, "status_counts": {"bleu": {"ok": 48, "undefined": 2}}}))
    **demo** · 50 samples · source `ragexp:demo/questions.jsonl`
    <BLANKLINE>
    | metric | mean | 95% CI | n |
    |---|---|---|---|
    | hit_rate/hit_rate_at_1 | 0.980 | 0.895 – 0.996 | 50 |
    | bleu | 21.5 | 15.2 – 28.0 | 48 |
    <BLANKLINE>
    All 3 aggregates: the metrics tab (`K`, `K/n`, `K/ci_low`, `K/ci_high`) and `summary.json`.
    <BLANKLINE>
    Not `ok`: bleu 2 undefined
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from ragexp.stats.intervals import CONFIDENCE

#: How many metrics the description's table shows (one per metric family, the rest are one line).
MAX_ROWS = 12
_PACKAGE = Path(__file__).resolve().parents[1]


def dataset_source(source: str | None) -> str | None:
    """Where the evaluation set came from: a file's absolute path, or ``ragexp:<path>`` for data
    bundled inside the package (the demo: ``ragexp:demo/questions.jsonl``), the same on every machine."""
    if not source:
        return None
    path = Path(source)
    try:
        resolved = path.resolve()
    except OSError:
        return str(source)
    bundled = _PACKAGE / "datasets"
    if resolved.is_relative_to(bundled):
        return f"ragexp:{resolved.relative_to(bundled).as_posix()}"
    return str(resolved) if path.exists() else str(source)


def headline(metrics: Mapping[str, Any], primary: str | None = None, lead: list[str] | None = None) -> list[str]:
    """The keys the description shows: ``stats.primary`` first, the run's headline metrics (``lead``:
    ``summary.json``'s ``headline``), then the first key of each metric family (``ndcg/ndcg_at_1`` for
    ``ndcg/ndcg_at_1`` … ``ndcg/ndcg_at_10``), at most :data:`MAX_ROWS`."""
    keys = list(dict.fromkeys(k for k in (primary, *(lead or ())) if k in metrics))
    families = {k.split("/")[0] for k in keys}
    for key in metrics:
        family = key.split("/")[0]
        if family not in families:
            families.add(family)
            keys.append(key)
    return keys[:MAX_ROWS]


def provenance_lines(provenance: Mapping[str, Any], latency: bool = True) -> list[str]:
    """Sentences on what a run measured: answers recorded in the dataset while the pipeline retrieved
    (a retriever sweep over recorded answers), and which stages ``avg_latency`` covers (``latency``:
    the run has ``avg_latency``).

    >>> print("\\n".join(provenance_lines({"contexts": "pipeline", "answers": "dataset", "latency": "pipeline",
    ...     "latency_stages": ["retrieve"], "stages": {"retriever": "bm25", "generator": "precomputed"}})))
    The answers are the ones recorded in the dataset, not produced by this run's pipeline (generator=precomputed): answer metrics cannot change with the retriever (bm25).
    avg_latency: seconds per question over the stages this run timed (retrieve), not the recorded system's end-to-end latency.
    """
    lines = []
    stages = provenance.get("stages") or {}
    if provenance.get("contexts") == "pipeline" and provenance.get("answers") == "dataset":
        lines.append(f"The answers are the ones recorded in the dataset, not produced by this run's pipeline "
                     f"(generator={stages.get('generator', 'precomputed')}): answer metrics cannot change with the "
                     f"retriever ({stages.get('retriever', '?')}).")
    if latency and provenance.get("latency") == "pipeline":
        lines.append(f"avg_latency: seconds per question over the stages this run timed "
                     f"({', '.join(provenance.get('latency_stages') or []) or 'none'}), not the recorded system's "
                     f"end-to-end latency.")
    elif latency and provenance.get("latency") == "dataset":
        lines.append("avg_latency: seconds per question as recorded in the dataset (latency_s, the system's own "
                     "end-to-end timing); ragexp did not time it.")
    return lines


def run_description(summary: Mapping[str, Any]) -> str:
    """The Markdown description of a run, from its ``summary.json`` (module docstring)."""
    metrics = summary.get("metrics") or {}
    intervals = summary.get("intervals") or {}
    stats = summary.get("stats") or {}
    level = f"{round(100 * float(stats.get('confidence') or CONFIDENCE), 1):g}% CI"
    head = f"**{summary.get('dataset', '?')}** · {summary.get('n_samples', '?')} samples"
    if summary.get("dataset_source"):
        head += f" · source `{summary['dataset_source']}`"
    lines = [head, ""]
    if summary.get("agreement"):  # what a judged run is worth comes first (docs/judge-trust.md)
        from ragexp.report.agreement import trust_lines

        trust = trust_lines({"agreement": summary["agreement"]})
        lines = [f"**{trust[0]}**", "", *(f"- {line}" for line in trust[1:]), "", *lines]
    shown = headline(metrics, stats.get("primary"), summary.get("headline"))
    if shown:
        lines += [f"| metric | mean | {level} | n |", "|---|---|---|---|"]
        for key in shown:
            iv = intervals.get(key) or {}
            ci = (f"{_num(iv['ci_low'])} – {_num(iv['ci_high'])}"
                  if iv.get("ci_low") is not None and iv.get("ci_high") is not None else "—")
            n = iv.get("n", (summary.get("status_counts") or {}).get(key, {}).get("ok", "?"))
            lines.append(f"| {key} | {_num(metrics[key])} | {ci} | {n} |")
        lines += ["", f"All {len(metrics)} aggregates: the metrics tab (`K`, `K/n`, `K/ci_low`, `K/ci_high`) "
                      "and `summary.json`."]
        said = provenance_lines(summary.get("provenance") or {}, "avg_latency" in metrics)
        if said:
            lines += ["", *said]
    else:
        lines.append("No metric was computed.")
    batch = summary.get("latency_batch")
    if batch and batch > 1 and summary.get("latency"):
        lines += ["", f"Latencies: the retriever searched up to {int(batch)} queries at a time; a query's "
                      "`latency/retrieve` (and `latency/embed`) is its equal share of its batch. "
                      "`pipeline.batch_size=1` times each query alone."]
    skipped = summary.get("skipped_metrics") or []
    if skipped:
        lines += ["", "Skipped:", *[f"- {s}" for s in skipped]]
    judge = summary.get("judge") or {}
    if judge.get("judge/calls") is not None:
        lines += ["", _judge_line(judge)]
    failed = _not_ok(summary.get("status_counts") or {})
    if failed:
        lines += ["", f"Not `ok`: {failed}"]
    warnings = summary.get("warnings") or []
    if warnings:
        lines += ["", "Warnings:", *[f"- {w}" for w in warnings[:3]]]
        if len(warnings) > 3:
            lines.append(f"- … {len(warnings) - 3} more in `summary.json`")
    return "\n".join(lines)


def _judge_line(judge: Mapping[str, Any]) -> str:
    def count(key: str) -> int:
        return int(judge.get(f"judge/{key}") or 0)

    cost = judge.get("judge/cost_usd")
    money = f"${float(cost):.4f}" if cost is not None else "cost unknown"
    return (f"Judge: {count('calls')} calls, {count('cache_hits')} answered from the cache, "
            f"{count('tokens_in'):,} tokens in / {count('tokens_out'):,} out, {money}, {count('failures')} failed")


def _not_ok(counts: Mapping[str, Mapping[str, int]], limit: int = 8) -> str:
    parts = []
    for key, by_status in counts.items():
        bad = ", ".join(f"{n} {status}" for status, n in by_status.items() if status != "ok" and n)
        if bad:
            parts.append(f"{key} {bad}")
    more = f"; … {len(parts) - limit} more metrics" if len(parts) > limit else ""
    return "; ".join(parts[:limit]) + more


def _num(value: Any) -> str:
    if value is None:
        return "—"
    v = float(value)
    return f"{v:.1f}" if abs(v) >= 10 else f"{v:.3f}"
