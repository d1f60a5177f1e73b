"""People's labels against the run's own values (docs/judge-trust.md): for every judge metric that
has at least one human label (``record.human[<metric key>]``), and for a metric's verdict on each record
against ``label``, the agreement statistics with their intervals (:mod:`ragexp.stats.agreement`), the
judge-corrected mean (:mod:`ragexp.stats.ppi`), how many labels a target half-width needs, and the
items where the judge and people disagree.

Only samples the judge scored ``ok`` are paired; a labelled sample the judge failed on is counted in
``labelled_not_scored``. The corrected mean uses the labelled pairs and the judge's values on every
other ``ok`` sample. This module computes; the sentences that say it are :mod:`ragexp.report.agreement`'s.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any, Collection, Mapping, Sequence

from ragexp.common.records import FIELDS
from ragexp.metrics.base import label_scales
from ragexp.stats.intervals import CONFIDENCE, DEFAULTS, RESAMPLES, SEED

#: rows of the disagreements table kept per metric (the largest disagreements first)
MAX_DISAGREEMENTS = 1000
DISAGREEMENT_COLUMNS = ("metric", "id", "query", "answer", "judge", "human", "reason")


def label_pairs(specs: Sequence[Any], scores: Mapping[str, list], records: Sequence[Any],
                labelled: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
    """Per metric key: the indices of labelled ``ok`` samples, people's and the judge's values there, the
    judge's values on the unlabelled ``ok`` samples, and the scale's kind when known. ``labelled``: the label
    keys of the whole run, when ``records`` are a chunk of it (ragexp.core.tally): every judge metric's
    entry is then given, empty or not, with which fields its labelled and unlabelled records have."""
    out: dict[str, dict[str, Any]] = {}
    scales = label_scales()
    present = {k for r in records for k in (r.human or {})} if labelled is None else labelled
    for spec in specs:
        if not spec.info.judge or spec.key not in scores:
            continue
        name = spec.key if spec.key in present else spec.key.split("/")[0]
        if spec.info.agrees_with and name not in present:
            name = spec.info.agrees_with  # a metric measuring what another's labels measure
        idx, human, judge, rest, rest_idx, failed = [], [], [], [], [], 0
        for i, (r, s) in enumerate(zip(records, scores[spec.key])):
            label = (r.human or {}).get(name)
            ok = s.status == "ok" and s.value is not None and math.isfinite(s.value)
            if label is not None and ok:
                idx.append(i), human.append(float(label)), judge.append(float(s.value))
            elif label is not None:
                failed += 1
            elif ok:
                rest.append(float(s.value)), rest_idx.append(i)
        if idx or failed or labelled is not None:
            out[spec.key] = {"idx": idx, "human": human, "judge": judge, "unlabelled": rest, "rest_idx": rest_idx,
                             "failed": failed,
                             "kind": scales.get(name, (None,))[0], "scale": scales.get(name)}
            if labelled is not None:
                out[spec.key]["presence"] = (_presence(records, idx), _presence(records, rest_idx))
    if labelled is not None:
        return out
    verdicts = label_verdicts(specs, records)
    if verdicts is not None and verdicts[0]:
        out.update(verdict_pairs(specs, *verdicts))
    return out


def label_verdicts(specs: Sequence[Any], records: Sequence[Any]) -> tuple[list[int], list[float], list[float]] | None:
    """The records' ``label`` against the verdict a metric of the run gives on each (``MetricInfo.label_verdict``):
    the indices, labels and verdicts (1.0 judged correct) of the labelled records it judges; None without such a
    metric or a label. A streamed run (ragexp.core.tally) takes them chunk by chunk."""
    spec = next((s for s in specs if s.info.label_verdict), None)
    if spec is None or not any(r.label is not None for r in records):
        return None
    verdict, opts = spec.info.label_verdict[1], spec.call_options()
    idx, human, judge = [], [], []
    for i, r in enumerate(records):
        if (v := verdict(*[getattr(r, f) for f in spec.fields], **opts)) is not None:
            idx.append(i), human.append(float(r.label)), judge.append(v)
    return idx, human, judge


def verdict_pairs(specs: Sequence[Any], idx: list[int], human: list[float], judge: list[float]) -> dict[str, Any]:
    """The pairs :func:`judge_trust` measures that verdict's agreement with ``label`` on, under its agreement key."""
    key = next(s.info.label_verdict[0] for s in specs if s.info.label_verdict)
    return {key: {"idx": idx, "human": human, "judge": judge, "unlabelled": [], "rest_idx": [], "failed": 0,
                  "kind": "binary", "scale": ("binary", 0, 1), "against": "label"}}


def check_label_keys(specs: Sequence[Any], records: Sequence[Any], *, source: str,
                     known: Sequence[str] = (), rows: Mapping[str, int] | None = None) -> list[str]:
    """Before any work: every key of the records' ``human`` labels is a metric key of the run, a registered
    metric (``known``) or a labelled key ragexp knows (``label_scales``); a key a letter or two from one of those is a
    DataError naming the first record with it and the closest match (its labels would be silently unused).
    Returns a warning per other unknown key (labels for a metric this run does not compute). ``rows``: each label
    key's first row, taken beforehand (a streamed run keeps no record)."""
    import difflib

    from ragexp.errors import DataError

    names = {k for s in specs for k in (s.key, s.key.split("/")[0], s.info.name)} | set(label_scales()) | set(known)
    if rows is None:
        rows = {}
        for row, r in enumerate(records, start=1):
            for key in r.human or {}:
                rows.setdefault(key, row)
    first = {key: row for key, row in rows.items() if key not in names}
    out = []
    for key, row in first.items():
        close = difflib.get_close_matches(key, sorted(names), n=1, cutoff=0.8)
        if close:
            raise DataError(f"label key '{key}' matches no metric: did you mean '{close[0]}'? (its labels would be "
                            f"left unused)", path=source, row=row, field=f"human.{key}")
        out.append(f"label key '{key}' (first in row {row} of {source}) matches no metric of this run: its labels "
                   f"are not used")
    return out


def judge_trust(specs: Sequence[Any], scores: Mapping[str, list], records: Sequence[Any], *,
                clusters: Sequence[Any] | None = None, resamples: int = RESAMPLES, confidence: float = CONFIDENCE,
                seed: int = SEED, target_halfwidth: float | None = DEFAULTS["target_halfwidth"],
                pairs: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``{"agreement": {key: {...}}, "disagreements": {column: [...]}}``, empty when nothing is labelled.
    ``pairs``: what :func:`label_pairs` gives, taken beforehand (a streamed run: ``records`` then maps the index
    of each disagreement it may show to its id, query and answer)."""
    from ragexp.stats.agreement import judge_agreement, labels_for_halfwidth
    from ragexp.stats.ppi import ppi_mean

    section: dict[str, Any] = {}
    table: dict[str, list] = {c: [] for c in DISAGREEMENT_COLUMNS}
    for key, p in (label_pairs(specs, scores, records) if pairs is None else pairs).items():
        if not p["idx"]:
            section[key] = {"metric": key, "n": 0, "labelled_not_scored": p["failed"], "statistics": {}}
            continue
        a = judge_agreement(key, p["human"], p["judge"], kind=p["kind"],
                      clusters=None if clusters is None else [clusters[i] for i in p["idx"]],
                      resamples=resamples, confidence=confidence, seed=seed)
        entry = a.as_dict()
        entry["labelled_not_scored"] = p["failed"]
        _judge_warnings(entry, p, clusters, confidence)
        if p.get("against"):
            entry["against"] = p["against"]
        else:
            c = ppi_mean(p["human"], p["judge"], p["unlabelled"], confidence=confidence,
                         clusters=None if clusters is None else [clusters[i] for i in p["idx"] + p["rest_idx"]])
            entry["corrected"] = c.as_dict()
            selection = _selection(records, p) if min(len(p["idx"]), len(p["rest_idx"])) >= 5 else None
            if selection:
                entry["corrected"]["selection"] = selection
                entry.setdefault("warnings", []).append(
                    f"the labelled and unlabelled records differ by {selection}: the corrected mean assumes the "
                    f"labelled records are a random sample of all of them")
        head = a.statistics[a.headline]
        if target_halfwidth:
            need: dict[str, int | None] = {}
            if "corrected" in entry:  # no interval now (the labels in one cluster): no count can be given
                need["corrected_mean"] = c.labels_for(target_halfwidth) if c.ci_low is not None else "no interval"
            agreeing = None if clusters is None else _agreement_design(a.kind, p, clusters)
            if head.ci_low is not None and not entry.get("degenerate"):  # no labels make a one-verdict judge's κ
                hw = (head.ci_high - head.ci_low) / 2
                need[a.headline] = (labels_for_halfwidth(hw, a.n, target_halfwidth) if agreeing is None else
                                    agreeing.labels_for(hw, a.n, target_halfwidth))
            entry["labels_needed"] = {"target_halfwidth": target_halfwidth, **need,
                                      "records": len(p["idx"]) + len(p.get("rest_idx") or ())}
            design = c.design if "corrected" in entry and c.design is not None else agreeing
            if design is not None:  # the hint follows the clusters the labels fall in (docs/judge-trust.md)
                entry["labels_needed"]["clustered"] = design.as_dict()
        section[key] = entry
        _disagreements(table, key, a.kind, p, records, scores.get(key))
    return {"agreement": section, "disagreements": table} if section else {}


#: values that say "not there" in a record's fields (ExpertQA writes N/A for evidence it has none of)
_ABSENT = (None, "", "N/A", "n/a", "NA", [], ())


def _presence(records: Sequence[Any], indices: Sequence[int]) -> Counter:
    """How many of these records have each field, and each key of their ``extra``, with a value (not in _ABSENT)."""
    def there(value: Any) -> bool:
        return not any(value is a or (type(value) is type(a) and value == a) for a in _ABSENT)

    out: Counter = Counter()
    for i in indices:
        r = records[i]
        out.update([f for f in FIELDS if there(getattr(r, f, None))] +
                   [k for k, v in (r.extra or {}).items() if k not in FIELDS and there(v)])
    return out


def _selection(records: Sequence[Any], p: Mapping[str, Any]) -> str | None:
    """A field present in (nearly) every labelled record and (nearly) no unlabelled one, or the reverse: the
    labels were not drawn at random (said as 'field contexts (present in 100% of labelled, 0% of unlabelled)').
    ``p["presence"]``, when given, holds the two :func:`_presence` counts (a streamed run keeps no record)."""
    lab, rest = p.get("presence") or (_presence(records, p["idx"]), _presence(records, p["rest_idx"]))
    for name in [*FIELDS, *sorted((lab.keys() | rest.keys()) - set(FIELDS))]:
        if name in ("id", "human", "label"):
            continue
        a, b = lab[name] / len(p["idx"]), rest[name] / len(p["rest_idx"])
        if abs(a - b) >= 0.5:
            return f"field {name} (present in {a:.0%} of labelled, {b:.0%} of unlabelled)"
    return None


#: a judge whose most frequent value is at least this share of its values gives "(nearly) one verdict"
ONE_VERDICT = 0.95


def one_verdict(values: Sequence[float]) -> dict[str, Any] | None:
    """``{"value", "share", "n"}`` when one value is at least :data:`ONE_VERDICT` of ``values`` (a judge that
    barely tells samples apart: its agreement statistics say little, and κ of a constant one is 0 by
    construction); else None.

    >>> one_verdict([1.0] * 19 + [0.0]), one_verdict([1.0, 0.0])
    ({'value': 1, 'share': 0.95, 'n': 20}, None)
    """
    from collections import Counter

    from ragexp.stats.agreement import level

    if not values:
        return None
    value, count = Counter(values).most_common(1)[0]
    share = count / len(values)
    return {"value": level(value), "share": share, "n": len(values)} if share >= ONE_VERDICT else None


def _judge_warnings(entry: dict[str, Any], p: Mapping[str, Any], clusters: Sequence[Any] | None,
                    confidence: float) -> None:
    """Flag a judge that says (nearly) the same thing to everything, or whose verdicts do not follow people's,
    and for a 0/1 metric add the per-class agreement (the share of people's 0s, and of their 1s, the judge
    gives the same value, with intervals clustered like the run's). docs/judge-trust.md, "A useless judge"."""
    from ragexp.stats.intervals import mean_interval

    values = list(p["judge"]) + list(p["unlabelled"])
    warnings: list[str] = []
    who = f"the {entry['metric'].replace('_', ' ')}" if p.get("against") else "the judge"  # a verdict is no judge
    stats = entry["statistics"]
    if one := one_verdict(values):
        share = one["share"]
        warnings.append(f"{who} gave {one['value']} to {share:.0%} of the {one['n']:,} samples it scored: "
                        f"it barely tells them apart, so its agreement statistics say little")
        entry["degenerate"] = True
        for name in ("kappa", "kappa_quadratic", "ac1", "alpha_ordinal", "spearman", "kendall_tau_b"):
            iv = stats.get(name)
            if iv is None:
                continue
            iv["note"] = "; ".join(filter(None, [iv.get("note"), "degenerate judge (nearly one verdict): not a "
                                                 "measure of agreement"]))
            if share == 1.0:  # a constant rater: κ is 0 by construction, its interval [0, 0] says nothing
                iv["ci_low"] = iv["ci_high"] = iv["stderr"] = None
                iv["mean"] = None
    head = stats.get(entry["headline"]) or {}
    if not entry.get("degenerate") and head.get("ci_low") is not None and head["ci_low"] <= 0 <= head["ci_high"]:
        said = {"kappa": "κ", "kappa_quadratic": "quadratic κ", "alpha_ordinal": "α"}.get(entry["headline"],
                                                                                    entry["headline"])
        warnings.append(f"{who}'s values do not follow people's: {said} is not distinguishable "
                        f"from 0 (no better than chance) on these {entry['n']:,} labels")
    if entry["kind"] == "binary":
        per = {}
        for cls, name in ((0.0, "people_0"), (1.0, "people_1")):
            rows = [i for i, h in enumerate(p["human"]) if h == cls]
            if not rows:
                continue
            same = [float(p["judge"][i] == cls) for i in rows]
            alike = len(set(same)) == 1  # all caught or none: the cluster bootstrap would say [x, x]; Wilson does not
            iv = mean_interval(same, clusters=None if clusters is None or alike else
                               [clusters[p["idx"][i]] for i in rows], confidence=confidence, resamples=2000)
            per[name] = {**iv.as_dict(), "of": len(rows), "caught": int(sum(same))}
        entry["per_class"] = per
        misses = [f"{d['of'] - d['caught']:,} of people's {d['of']:,} {cls[-1]}s ({1 - d['mean']:.0%})"
                  for cls, d in per.items()]
        if misses:
            entry["misses"] = "the judge gives the other value to " + " and ".join(misses)
    if warnings:
        entry["warnings"] = warnings


def _agreement_design(kind: str, p: Mapping[str, Any], clusters: Sequence[Any]):
    """The clusters of the labelled pairs and the design effect of agreeing (equal values; for shares the
    difference of the two), against the clusters of every record the judge scored."""
    from ragexp.stats.design import design_effect, design_of

    h, j = p["human"], p["judge"]
    values = [hv - jv for hv, jv in zip(h, j)] if kind == "continuous" else [float(hv == jv) for hv, jv in zip(h, j)]
    labelled = [clusters[i] for i in p["idx"]]
    deff = design_effect(values, labelled)
    return design_of(labelled, [clusters[i] for i in p["idx"] + p["rest_idx"]], deff=1.0 if deff is None else deff)


def _disagreements(table: dict[str, list], key: str, kind: str, p: dict[str, Any], records, scores) -> None:
    from ragexp.stats.agreement import level

    lo, hi = (p["scale"] or (None, min(p["human"] + p["judge"]), max(p["human"] + p["judge"])))[1:]
    far = 0.5 * (hi - lo) if kind == "continuous" else 0.0
    rows = [(abs(h - j), i, h, j) for i, h, j in zip(p["idx"], p["human"], p["judge"]) if abs(h - j) > far or
            (kind == "continuous" and far == 0 and h != j)]
    rows.sort(key=lambda t: -t[0])
    for _, i, h, j in rows[:MAX_DISAGREEMENTS]:
        r = records[i]
        detail = scores[i].detail if scores is not None else None
        for column, value in zip(DISAGREEMENT_COLUMNS, (key, r.id, r.query, r.answer, level(j), level(h),
                                                       None if detail is None else str(detail)[:500])):
            table[column].append(value)


def trust_metrics(trust: Mapping[str, Any]) -> dict[str, float]:
    """MLflow keys: ``agreement/<metric>/n``, ``agreement/<metric>/<statistic>`` with ``/ci_low``,
    ``/ci_high``, ``/stderr``; ``corrected/<metric>`` with ``/ci_low``, ``/ci_high``, ``/n`` (labels),
    ``/bias``, ``/lam``."""
    out: dict[str, float] = {}
    for key, entry in (trust.get("agreement") or {}).items():
        out[f"agreement/{key}/n"] = float(entry["n"])
        if entry.get("n"):
            out[f"agreement/{key}/degenerate_judge"] = 1.0 if entry.get("degenerate") else 0.0
        for cls, d in (entry.get("per_class") or {}).items():
            if d.get("mean") is not None:
                out[f"agreement/{key}/same_as_{cls}"] = float(d["mean"])
        for name, iv in entry["statistics"].items():
            for part, suffix in (("mean", ""), ("ci_low", "/ci_low"), ("ci_high", "/ci_high"), ("stderr", "/stderr")):
                if iv.get(part) is not None:
                    out[f"agreement/{key}/{name}{suffix}"] = float(iv[part])
        c = entry.get("corrected") or {}
        if c.get("mean") is not None:
            out[f"corrected/{key}"] = float(c["mean"])
            for part in ("ci_low", "ci_high", "bias", "lam"):
                if c.get(part) is not None:
                    out[f"corrected/{key}/{part}"] = float(c[part])
            out[f"corrected/{key}/n"] = float(c["n_labelled"])
    return out


def _floats(values: Sequence[Any]) -> list[float]:
    return [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) else math.nan
            for v in values]


def corrected_difference(human_b: Sequence[float], judge_b: Sequence[float], human_c: Sequence[float],
                         judge_c: Sequence[float], *, confidence: float = CONFIDENCE) -> dict[str, Any] | None:
    """The corrected mean of candidate − baseline over the same items (NaN: no label, or the judge had no
    ``ok`` value): PPI++ on the per-item differences — labelled where people labelled the item in both
    runs, the judge's difference elsewhere — with a normal two-sided p-value. None when fewer than two
    items are labelled in both."""
    from statistics import NormalDist

    from ragexp.stats.ppi import ppi_mean

    lab_y, lab_j, rest = [], [], []
    for hb, jb, hc, jc in zip(_floats(human_b), _floats(judge_b), _floats(human_c), _floats(judge_c)):
        if math.isnan(jb) or math.isnan(jc):
            continue
        if math.isnan(hb) or math.isnan(hc):
            rest.append(jc - jb)
        else:
            lab_y.append(hc - hb), lab_j.append(jc - jb)
    if len(lab_y) < 2:
        return None
    c = ppi_mean(lab_y, lab_j, rest, confidence=confidence)
    p = None
    if c.stderr:
        p = 2 * (1 - NormalDist().cdf(abs(c.mean) / c.stderr))
    elif c.mean is not None:
        p = 1.0 if c.mean == 0 else 0.0
    return {"diff": c.mean, "ci_low": c.ci_low, "ci_high": c.ci_high, "stderr": c.stderr, "p_value": p,
            "n_labelled": c.n_labelled, "n": c.n_total, "judge_diff": c.judge_mean, "lam": c.lam}


def _share(flags: Sequence[bool]) -> float | None:
    return sum(flags) / len(flags) if flags else None


def judges_only(rows: dict[str, dict[str, Any]], agreement: Mapping[str, Any], cols_b: Mapping[str, Sequence[Any]],
                cols_c: Mapping[str, Sequence[Any]]) -> bool:
    """Two runs of the same answers (every shared sample's answer alike) with people's agreement compared:
    a comparison of judges. Then each judge metric with agreement compared is not "better" or "worse" for
    its mean: its verdict becomes ``judge mean higher`` / ``judge mean lower`` (a higher judge mean is not
    a better judge; agreement with people says which judge is better). True when that is the case."""
    answers_b, answers_c = cols_b.get("answer"), cols_c.get("answer")
    compared = [k for k, e in agreement.items() if e.get("agreement")]
    if not compared or answers_b is None or answers_c is None or list(answers_b) != list(answers_c):
        return False
    for key in compared:
        row = rows.get(key)
        if row and row.get("verdict") in ("better", "worse"):
            row["verdict"] = "judge mean higher" if row["diff"] > 0 else "judge mean lower"
            row["note"] = "a higher judge mean is not a better judge: see agreement with people"
    return True


def compare_agreement(cols_b: Mapping[str, Sequence[Any]], cols_c: Mapping[str, Sequence[Any]], keys: Sequence[str],
                      *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE, seed: int = SEED,
                      correct: bool = False) -> dict[str, Any]:
    """For two runs' paired per-sample columns (same items, same order): per metric key with people's
    labels in both tables, the paired difference of the judges' agreement with them (over the items
    labelled alike in both, ``ok`` in both: a different judge or prompt on the same answers), and with
    ``correct`` the difference of the judge-corrected means (:func:`corrected_difference`)."""
    from ragexp.stats.agreement import paired_agreement

    out: dict[str, Any] = {}
    for key in keys:
        name = key if f"human/{key}" in cols_b else key.split("/")[0]  # people's labels: the key's, or its metric's
        col = f"human/{name}"
        if col not in cols_b or col not in cols_c:
            continue
        hb, hc = _floats(cols_b[col]), _floats(cols_c[col])
        jb, jc = _floats(cols_b[key]), _floats(cols_c[key])
        sb, sc = cols_b.get(f"{key}/status"), cols_c.get(f"{key}/status")
        jb = [v if sb is None or s == "ok" else math.nan for v, s in zip(jb, sb or jb)]
        jc = [v if sc is None or s == "ok" else math.nan for v, s in zip(jc, sc or jc)]
        rows = [i for i in range(len(hb)) if not any(math.isnan(x[i]) for x in (hb, hc, jb, jc)) and hb[i] == hc[i]]
        entry: dict[str, Any] = {"n_labelled": len(rows)}
        if len(rows) >= 2:
            kind = label_scales().get(name, (None,))[0]
            d = paired_agreement(key, [hb[i] for i in rows], [jb[i] for i in rows], [jc[i] for i in rows],
                                 kind=kind, resamples=resamples, confidence=confidence, seed=seed)
            entry["agreement"] = d.as_dict()
            said = {side: one for side, col in (("baseline", jb), ("candidate", jc))
                    if (one := one_verdict([v for v in col if not math.isnan(v)]))}
            if said:  # as a run flags it: a judge of (nearly) one verdict has no agreement to compare
                entry["one_verdict"] = said
            if (kind or d.statistic) in ("binary", "kappa"):  # per class: the share of people's 0s (1s) matched
                entry["per_class"] = {f"people_{int(v)}": {
                    "n": sum(1 for i in rows if hb[i] == v),
                    "baseline": _share([jb[i] == v for i in rows if hb[i] == v]),
                    "candidate": _share([jc[i] == v for i in rows if hb[i] == v])} for v in (0.0, 1.0)}
        if correct:
            entry["corrected"] = corrected_difference(hb, jb, hc, jc, confidence=confidence)
        out[key] = entry
    return out
