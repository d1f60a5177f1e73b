"""The sentences of people's labels against the run's own values (docs/judge-trust.md): the lines
under the run's table, the comparison's lines, and the agreement rows of the table. The numbers are
computed by :mod:`ragexp.core.labels`; this module only says them.
"""

from __future__ import annotations

from typing import Any, Mapping

#: how each agreement statistic is written
SYMBOLS = {"kappa": "κ", "kappa_quadratic": "quadratic κ", "alpha_ordinal": "α", "ac1": "AC1",
           "percent_agreement": "agreement", "spearman": "Spearman ρ", "kendall_tau_b": "Kendall τ-b"}


def _num(v: float | None) -> str:
    return "—" if v is None else f"{v:.2f}"


def _who(key: str, e: Mapping[str, Any]) -> str:
    return "the keyword verdict" if e.get("against") else f"the judge's {key}"


def trust_lines(trust: Mapping[str, Any]) -> list[str]:
    """Sentences under the run's table: for each metric, the headline agreement, the corrected mean and
    how many labels a target precision needs.

    >>> iv = {"mean": 0.62, "ci_low": 0.48, "ci_high": 0.74}
    >>> lines = trust_lines({"agreement": {"answer_consistency_binary": {"n": 120, "headline": "kappa",
    ...     "statistics": {"kappa": iv}, "corrected": {"mean": 0.72, "ci_low": 0.66, "ci_high": 0.78,
    ...     "judge_mean": 0.81, "n_labelled": 120, "n_total": 2000},
    ...     "labels_needed": {"target_halfwidth": 0.05, "corrected_mean": 430, "kappa": 700}}}})
    >>> print("\\n".join(lines))
    judge agrees with people on answer_consistency_binary: κ 0.62 [0.48, 0.74] over 120 labels (κ: 1 = always agree, 0 = no better than chance)
    answer_consistency_binary corrected with people's labels: 0.72 [0.66, 0.78] (the judge alone: 0.81; 120 labelled of 2,000 samples)
    To know the corrected mean of the judge's answer_consistency_binary within ±0.05, about 430 labelled samples are needed, and about 700 for κ; 120 are labelled now.
    """
    lines = []
    for key, e in (trust.get("agreement") or {}).items():
        if not e.get("n"):
            lines.append(f"{key}: {e.get('labelled_not_scored', 0)} samples carry people's labels, but the judge scored "
                         f"none of them: no agreement to report")
            continue
        iv = e["statistics"][e["headline"]]
        who = "the keyword verdict agrees with `label`" if e.get("against") else f"judge agrees with people on {key}"
        scale = " (κ: 1 = always agree, 0 = no better than chance)" if e["headline"] == "kappa" else ""
        if iv.get("mean") is None and e.get("degenerate"):
            lines.append(f"{who}: {SYMBOLS[e['headline']]} undefined (the judge gave one verdict to everything) "
                         f"over {e['n']} labels")
        else:
            flag = " — flagged: degenerate judge" if e.get("degenerate") else ""
            lines.append(f"{who}: {SYMBOLS[e['headline']]} {_num(iv.get('mean'))} "
                         f"[{_num(iv.get('ci_low'))}, {_num(iv.get('ci_high'))}] over {e['n']} labels{scale}{flag}")
        lines += [f"WARNING {key}: {w}" for w in e.get("warnings") or []]
        per = e.get("per_class") or {}
        subject = "the keyword verdict" if e.get("against") else "the judge"  # seed 004's verdict is no judge
        lead = "" if e.get("against") else f"{key}: "  # the keyword verdict's lines name it already
        if per:  # "where people said 0, the judge agrees on 4 of 5 (0.80 [0.38, 0.96]); where they said 1, …"
            said = "; ".join(f"where {'people' if i == 0 else 'they'} said {cls[-1]}, {subject if i == 0 else 'on'} "
                             f"{'agrees on ' if i == 0 else ''}{d['caught']:,} of {d['of']:,} ({_num(d.get('mean'))} "
                             f"[{_num(d.get('ci_low'))}, {_num(d.get('ci_high'))}])"
                             for i, (cls, d) in enumerate(per.items()))
            lines.append(f"{lead}{said}")
        if e.get("misses"):
            lines.append(f"{lead}{subject}{e['misses'].removeprefix('the judge')}")
    for key, e in (trust.get("agreement") or {}).items():
        c = e.get("corrected") or {}
        if c.get("mean") is not None:
            lines.append(f"{key} corrected with people's labels: {_num(c['mean'])} [{_num(c['ci_low'])}, "
                         f"{_num(c['ci_high'])}] (the judge alone: {_num(c['judge_mean'])}; {c['n_labelled']:,} "
                         f"labelled of {c['n_total']:,} samples)")
        need = e.get("labels_needed") or {}
        if need:
            lines.append(labels_hint(key, e, need))
    return [line for line in lines if line]


def _opening(said: str) -> str:
    """``said`` to open a sentence: a word capitalised, a symbol after "The" (an upper-case κ reads as K).

    >>> _opening("the corrected mean"), _opening("κ and AC1")
    ('The corrected mean', 'The κ and AC1')
    """
    return said[0].upper() + said[1:] if said[0].isascii() else f"The {said}"


def labels_hint(key: str, e: Mapping[str, Any], need: Mapping[str, Any]) -> str:
    """One sentence: how many labelled samples bring each statistic within ``±target_halfwidth``."""
    hw, n, records = need["target_halfwidth"], e["n"], need.get("records")
    wants, met, beyond, unknown = [], [], [], []
    for k, v in need.items():
        if k in ("target_halfwidth", "clustered", "records"):
            continue
        what = "the corrected mean" if k == "corrected_mean" else SYMBOLS.get(k, k)
        if v == "no interval":
            unknown.append(what)
        elif v is None:
            beyond.append(what)
        elif v <= n:
            met.append(what)
        else:
            wants.append((what, v))
    parts = []
    if wants:  # one sentence: the first statistic in full, the others after it
        (what, v), rest = wants[0], wants[1:]
        said = "".join(f", and about {v2:,} for {w2}" for w2, v2 in rest)
        parts.append(f"To know {what} of {_who(key, e)} within ±{hw:g}, about {v:,} labelled samples are "
                     f"needed{said}; {n:,} are labelled now.")
        if records and max(v2 for _, v2 in wants) > records:
            parts.append(f"That is more than the {records:,} samples this run scored: labels of these samples alone "
                         f"cannot get there (label more data, or accept a wider interval).")
    if met:
        said = " and ".join(met)
        parts.append(f"{_opening(said)} of {_who(key, e)} {'are' if len(met) > 1 else 'is'} already "
                     f"known within ±{hw:g} with {n:,} labels.")
    if beyond:
        said = " and ".join(beyond)
        parts.append(f"{_opening(said)} of {_who(key, e)} cannot be brought within ±{hw:g} by more "
                     f"labels alone.")
    if unknown:
        why = ((e.get("corrected") or {}).get("note") or "").split(":")[0]
        parts.append(f"{_opening(' and '.join(unknown))} of {_who(key, e)} has no interval with these {n:,} labels"
                     f"{f' ({why})' if why else ''}, so no count of labels can be given yet.")
    cl = need.get("clustered")
    if cl and parts:
        parts.append(f"(Clustered: the labels fall in {cl['clusters']:,} clusters, design effect "
                     f"{cl['design_effect']:.2f}; the counts assume new labels drawn at random among the records.)")
    return " ".join(parts)


def judges_lines(section: Mapping[str, Any], confidence: float) -> list[str]:
    """What leads a comparison of two judges on the same answers: which agrees better with people, per metric,
    and that the judge's own mean does not say it."""
    lines = ["These runs score the same answers: they compare judges. Which judge is better is how well it agrees "
             "with people, not its mean — a higher judge mean is not a better judge."]
    for key, e in section.items():
        d = e.get("agreement")
        if not d:
            continue
        sym = SYMBOLS[d["statistic"]]
        if len(e.get("one_verdict") or ()) == 2:  # neither judge tells the samples apart: nothing to compare
            lines.append(one_verdict_line(key, e["one_verdict"], sym))
            continue
        p = d.get("p_value")
        if p is not None and p < 1 - confidence:
            who = "the candidate" if d["diff"] > 0 else "the baseline"
            lines.append(f"{key}: {who} judge agrees better with people ({sym} {_num(d['baseline'])} → "
                         f"{_num(d['candidate'])}, p = {p:.3g})")
        else:
            lines.append(f"{key}: no detectable difference in agreement with people ({sym} {_num(d['baseline'])} → "
                         f"{_num(d['candidate'])}" + ("" if p is None else f", p = {p:.3g}") + ")")
        if e.get("one_verdict"):  # one judge of (nearly) one verdict: its statistic is not a measure of agreement
            lines[-1] += "; " + one_verdict_line(key, e["one_verdict"], sym, compared=True).split(": ", 1)[1]
    return lines


def one_verdict_line(key: str, said: Mapping[str, Mapping[str, Any]], sym: str, compared: bool = False) -> str:
    """A compared judge of (nearly) one verdict: its agreement is not a measure (the run flags it the same way).

    >>> one_verdict_line("x", {"baseline": {"value": 1, "share": 1.0, "n": 40}}, "κ")
    "x: the baseline judge gave 1 to 100% of the 40 samples it scored: its κ is 0 by construction, not a measure of agreement, so the two judges' agreement is not compared"
    """
    parts = [f"the {side} judge gave {o['value']} to {o['share']:.0%} of the {o['n']:,} samples it scored"
             for side, o in said.items()]
    constant = all(o["share"] == 1.0 for o in said.values())
    what = f"its {sym} is 0 by construction" if constant and len(said) == 1 else \
        f"their {sym} is 0 by construction" if constant else f"its {sym} says little"
    if compared:  # one judge of one verdict against one that tells samples apart: the other agrees better by far
        return f"{key}: {' and '.join(parts)}: {what}, not a measure of agreement"
    return (f"{key}: {' and '.join(parts)}: {what}, not a measure of agreement, so the two judges' agreement is "
            f"not compared")


def comparison_lines(section: Mapping[str, Any]) -> list[str]:
    """The comparison report's lines on agreement and corrected means (one per metric and kind)."""
    lines = []
    for key, e in section.items():
        d = e.get("agreement")
        if d and len(e.get("one_verdict") or ()) == 2:
            lines.append(one_verdict_line(key, e["one_verdict"], SYMBOLS[d["statistic"]]))
        elif d:
            ci = "" if d["ci_low"] is None else f" [{_num(d['ci_low'])}, {_num(d['ci_high'])}]"
            p = "" if d["p_value"] is None else f", p = {d['p_value']:.3g}"
            lines.append(f"{key}: agreement with people ({SYMBOLS[d['statistic']]}) {_num(d['baseline'])} → "
                         f"{_num(d['candidate'])}, difference {d['diff']:+.2f}{ci}{p} over {d['n']} labels")
            if e.get("one_verdict"):
                lines.append(one_verdict_line(key, e["one_verdict"], SYMBOLS[d["statistic"]], compared=True))
            per = e.get("per_class") or {}
            if per:
                lines.append(f"{key}: the judge matches " + "; ".join(
                    f"people's {cls[-1]}s {_num(v['baseline'])} → {_num(v['candidate'])} (of {v['n']:,})"
                    for cls, v in per.items()))
        elif "agreement" not in e:
            lines.append(f"{key}: {e['n_labelled']} items labelled alike and ok in both runs: agreement not compared")
        c = e.get("corrected")
        if c:
            lines.append(f"{key}: corrected difference {c['diff']:+.3f} [{_num(c['ci_low'])}, {_num(c['ci_high'])}], "
                         f"p = {c['p_value']:.3g} (judge's own {c['judge_diff']:+.3f}; {c['n_labelled']} labels of "
                         f"{c['n']})")
    return lines


def trust_rows(trust: Mapping[str, Any]) -> tuple[dict[str, float | None], dict[str, Any]]:
    """Rows for the run's console table: each metric's headline agreement statistic
    (``<metric>: agreement (κ)``, over its labels) and corrected mean (``<metric>: corrected mean``,
    over its labels), with their intervals."""
    from ragexp.stats.intervals import Interval

    values: dict[str, float | None] = {}
    intervals: dict[str, Any] = {}
    for key, e in (trust.get("agreement") or {}).items():
        if not e.get("n"):
            continue
        iv, name = e["statistics"][e["headline"]], f"{key}: agreement ({SYMBOLS[e['headline']]})"
        values[name] = iv.get("mean")
        intervals[name] = Interval(iv.get("mean"), iv.get("stderr"), iv.get("ci_low"), iv.get("ci_high"), e["n"],
                                   iv.get("method"))
        c = e.get("corrected") or {}
        if c.get("mean") is not None:
            values[f"{key}: corrected mean"] = c["mean"]
            intervals[f"{key}: corrected mean"] = Interval(c["mean"], c.get("stderr"), c.get("ci_low"), c.get("ci_high"),
                                                     c["n_labelled"], "ppi++")
    return values, intervals
