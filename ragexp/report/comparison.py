"""The terminal report of a comparison of two runs (:mod:`ragexp.core.pairing`): a table with the
significant changes marked ▲ better / ▼ worse, the notes under it, and the samples that regressed most."""

from __future__ import annotations

import sys
from typing import Any, Mapping

from ragexp.core.pairing import RUN_LEVEL, multiplicity_note
from ragexp.errors import printable
from ragexp.report.console import number


def _p(value: float) -> str:
    return "—" if value is None else ("< 0.001" if value < 0.001 else f"{value:.3f}")


def focus_metrics(result: Mapping[str, Any], primary: str | None = None) -> list[str]:
    """The metrics whose regressed samples are printed: ``stats.primary`` and the run's other headline
    metrics (``result["headline"]``) that have samples gone worse, else :func:`focus_metric`'s one."""
    lead = [k for k in dict.fromkeys([*([primary] if primary else []), *(result.get("headline") or ())])
            if result["regressions"].get(k)]
    if lead:
        return lead
    key = focus_metric(result, primary)
    return [key] if key else []


def focus_metric(result: Mapping[str, Any], primary: str | None = None) -> str | None:
    """The metric whose regressed samples are printed: ``stats.primary`` when compared, else the
    most significant regression, else the metric with the most samples gone worse."""
    rows = result["metrics"]
    if primary and primary in result["regressions"]:
        return primary
    worse = [r for r in rows.values() if r.get("verdict") == "worse"]
    if worse:
        return min(worse, key=lambda r: (r["p_holm"], -abs(r["diff"])))["key"]
    compared = [r for r in rows.values() if "p_value" in r and result["regressions"].get(r["key"])]
    return max(compared, key=lambda r: r["worse"])["key"] if compared else None


def print_comparison(result: Mapping[str, Any], focus: str | None = None) -> None:
    """The comparison table, the notes under it, and the samples that regressed most."""
    from rich.console import Console

    table, notes = _table(result)
    console = Console(file=sys.stdout, width=max(120, Console().width))
    natural = console.measure(table, options=console.options.update_width(1000)).maximum
    console.width = max(console.width, natural)  # a long key (precision_at_k/precision_at_10) cuts no value to '…'
    if result.get("judges_only"):  # the same answers, two judges: agreement with people leads (docs/judge-trust.md)
        from ragexp.report.agreement import judges_lines

        for line in judges_lines(result["agreement"], result["method"]["confidence"]):
            console.print(f"[bold]{line}[/bold]", highlight=False, soft_wrap=True)
    console.print(table)
    for line in _lines_below(result) + notes:
        console.print(f"[dim]{line}[/dim]", highlight=False, soft_wrap=True)
    if result.get("agreement"):  # the judges against people's labels (docs/judge-trust.md)
        from ragexp.report.agreement import comparison_lines

        console.print("[bold]Agreement with people[/bold]", highlight=False)
        for line in comparison_lines(result["agreement"]):
            console.print(line, highlight=False, soft_wrap=True)
    _print_regressions(console, result, focus)


def _table(result: Mapping[str, Any]) -> tuple[Any, list[str]]:
    """The comparison table (headline metrics first), and a note per metric that left samples out."""
    from rich.table import Table

    method, s = result["method"], result["samples"]
    level = round(100 * method["confidence"], 2)
    b, c = result["baseline"], result["candidate"]
    headline = [k for k in result.get("headline") or () if k in result["metrics"]]
    rows = {k: result["metrics"][k] for k in [*headline, *(k for k in result["metrics"] if k not in headline)]}
    partial = any(r.get("n", s["matched"]) != s["matched"] for r in rows.values())  # else 'over' says nothing
    table = Table(title=f"ragexp.compare · baseline {b['name']} → candidate {c['name']} · {s['matched']} paired samples",
                  title_justify="left", caption_justify="left",
                  caption=(f"Headline metrics first{' (' + ', '.join(headline) + ')' if headline else ''}. "
                           f"diff = candidate − baseline with its {level:g}% {_resampled(method)} "
                           f"({method['resamples']:,} resamples, seed {method['seed']}); p: {_flipped(method)}, "
                           f"{method['adjustment']}; "
                           f"▲/▼ = significantly better/worse ({method['significant']}), direction-aware; "
                           f"+/=/− = samples better, tied, worse; MDE = smallest difference these samples detect "
                           f"with 80% power" + ("; over = samples ok in both runs" if partial else
                                                f"; every metric is over all {s['matched']} samples")))
    table.add_column("metric", no_wrap=True)
    for name in ("baseline", "candidate", "diff", f"{level:g}% CI", "p (Holm)", "+/=/−", "MDE",
                 *(("over",) if partial else ())):
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("", no_wrap=True)
    notes = []
    for key, r in rows.items():
        over = (f"{r.get('n', 0)} / {s['matched']}",) if partial else ()
        arrow = "" if r.get("higher_is_better", True) else " ↓"
        label = f"{key}{arrow}" + ("" if r.get("direction_known", True) else " ?")
        if "p_value" not in r:
            table.add_row(label, "", "", "", "", "", "", "", *over, f"[dim]{r.get('note', '')}[/dim]")
            continue
        style = {"better": "green", "worse": "red"}.get(r["verdict"], "")
        mark = {"better": "▲ better", "worse": "▼ worse"}.get(r["verdict"], "")
        diff = f"{r['diff']:+.4f}"
        p = _p(r["p_holm"]) + ("†" if r["test"] == "mcnemar" else " ")
        table.add_row(label, number(r["mean_baseline"]), number(r["mean_candidate"]),
                      f"[{style}]{diff}[/{style}]" if style else diff,
                      f"[{number(r['ci_low'])}, {number(r['ci_high'])}]", p,
                      f"{r['better']}/{r['ties']}/{r['worse']}", number(r["mde"]), *over,
                      f"[{style}]{mark}[/{style}]" if style else "")
        if key in headline and key == headline[-1] and len(rows) > len(headline):
            table.add_section()
        if r["excluded_by"]:
            notes.append(f"{key}: left out " + ", ".join(f"{v} ({k})" for k, v in r["excluded_by"].items()))
    return table, notes


def _lines_below(result: Mapping[str, Any]) -> list[str]:
    """The lines under the table: the samples paired, the marks used, a resampling too small, the metrics with
    one value per run."""
    method, s = result["method"], result["samples"]
    lines = [f"samples: {s['matched']} in both runs, {s['only_in_baseline']} only in the baseline, "
             f"{s['only_in_candidate']} only in the candidate (left out)", multiplicity_note(result)]
    if any(not r.get("higher_is_better", True) for r in result["metrics"].values()):
        lines.append("↓ = lower is better")
    if any(not r.get("direction_known", True) for r in result["metrics"].values()):
        lines.append("? = not a registered metric: higher is taken as better")
    permuted = sum(1 for r in result["metrics"].values() if r.get("test") in ("permutation", "cluster permutation"))
    compared = sum(1 for r in result["metrics"].values() if "p_value" in r)
    floor = 2 / (method["resamples"] + 1)  # the smallest p-value a random-pattern permutation test gives
    enumerated = method.get("cluster_by") and 2 ** method["clusters"] <= method["resamples"]
    if method.get("cluster_by"):
        lines.append(_clusters_line(method))
    if enumerated and compared * 2 / 2 ** method["clusters"] >= 1 - method["confidence"]:
        lines.append(f"with {method['clusters']} clusters and Holm over {compared} metrics no difference can reach "
                     f"p < {1 - method['confidence']:g}, however large: more resamples do not help, more clusters do")
    elif permuted and compared * floor >= 1 - method["confidence"]:
        lines.append(f"with {method['resamples']:,} resamples no permutation p-value is below {floor:.2g}, and "
                     f"Holm over {compared} metrics cannot bring it under {1 - method['confidence']:g}: "
                     f"raise stats.resamples (e.g. stats.resamples={round(20 * compared / (1 - method['confidence'])):,})")
    whole = result.get("not_compared") or {}
    if whole:
        lines.append(f"not compared ({RUN_LEVEL}): " + ", ".join(
            f"{k} {number(v['baseline'])} → {number(v['candidate'])}" for k, v in whole.items()))
    return lines


def _resampled(method: Mapping[str, Any]) -> str:
    return "cluster bootstrap CI" if method.get("cluster_by") else "paired bootstrap CI"


def _flipped(method: Mapping[str, Any]) -> str:
    if method.get("cluster_by"):
        return f"sign-flip permutation of the {method['clusters']} clusters of {method['cluster_by']}"
    return "sign-flip permutation, † exact McNemar for 0/1 metrics"


def _clusters_line(method: Mapping[str, Any]) -> str:
    """The line saying that the comparison is over clusters, how many, and the smallest p-value they allow.

    >>> print(_clusters_line({"cluster_by": "conversation_id", "clusters": 10, "resamples": 10_000})[89:])
    10 clusters, each cluster's differences resampled and sign-flipped together; with 10 clusters no p-value is below 0.002 before Holm
    """
    g, b = method["clusters"], method["resamples"]
    floor = 2 / 2 ** g if 2 ** g <= b else 2 / (b + 1)
    return (f"clustered by {method['cluster_by']} (stats.cluster_by): the CIs, p-values and MDEs are over its {g} "
            f"clusters, each cluster's differences resampled and sign-flipped together; with {g} clusters no p-value "
            f"is below {floor:.2g} before Holm")


def shown(value: Any) -> Any:
    r"""A value from the runs (an id, a query) as a table cell: control characters and line breaks written as
    escapes (:func:`ragexp.errors.printable`, as every error line quotes them), no rich markup read in it.

    >>> print(shown("q\x1b]0;owned\x07 [bold]x[/]\nragexp: ok").plain)
    q\x1b]0;owned\x07 [bold]x[/]\nragexp: ok
    """
    from rich.text import Text

    return Text(printable(str(value)))


def _print_regressions(console: Any, result: Mapping[str, Any], focus: str | None) -> None:
    """The samples that regressed most on the focus metrics (:func:`focus_metrics`: at most two)."""
    from rich.table import Table

    s = result["samples"]
    keys = focus_metrics(result, focus)[:2]
    for key in keys:
        regs = result["regressions"][key][:10 if len(keys) == 1 else 5]
        gone = (result["metrics"].get(key) or {}).get("worse")
        worst = Table(title=f"Samples that regressed most on {key}" + (f" ({gone} of {s['matched']} got worse)"
                                                                      if gone is not None else ""), title_justify="left")
        for name in ("id", "query", "baseline", "candidate"):
            worst.add_column(name, justify="right" if name in ("baseline", "candidate") else "left",
                             overflow="ellipsis", max_width=60 if name == "query" else None, no_wrap=name == "query")
        for r in regs:
            worst.add_row(shown(r["id"]), shown(r["query"] or ""), number(r["baseline"]), number(r["candidate"]))
        console.print(worst)
