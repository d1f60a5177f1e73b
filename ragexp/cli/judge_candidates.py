"""``python -m ragexp.judge_candidates SWEEP_DIR``: the leaderboard of judge candidates of a dev/test sweep
(docs/judge-trust.md, "Improving the judge with your labels").

A sweep such as ``python -m ragexp -m dataset.split=dev,test judge.examples=0,4 ...`` leaves one job folder
per (candidate, split). A candidate is a setting of the judge (every ``judge.*`` value and each metric's
``prompt_version``; the split aside). The table shows each candidate's agreement with people (the headline
statistic, κ for a 0/1 metric) on dev and on test side by side; the candidate to choose is the one with the
best agreement on **dev**, and each other candidate is compared with it on dev (the paired difference of
their agreement over the same labelled items, its interval and p). Test agreement is the number to report
for the chosen one — and it is refused ("refused: examples overlap test") for a candidate whose worked
examples (``judge.examples``) are records of its test run.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ragexp.stats.intervals import CONFIDENCE, RESAMPLES
from ragexp.errors import ConfigError, RagexpError

_IDENTITY = ("cache", "cache_backend", "cache_path", "api_key_env", "api_base", "timeout_s", "deadline_s",
             "max_concurrency", "requests_per_minute", "max_retries", "backoff_s", "max_backoff_s", "max_cost_usd",
             "cost_per_million_in", "cost_per_million_out", "name")


def _job(folder: Path) -> dict[str, Any] | None:
    import yaml

    try:
        summary = json.loads((folder / "summary.json").read_text(encoding="utf-8"))
        config = yaml.safe_load((folder / "config.yaml").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    judge = {k: v for k, v in (config.get("judge") or {}).items() if k not in _IDENTITY and not str(k).startswith("_")}
    prompts = {f"{m}.prompt_version": node.get("prompt_version") for m, node in (config.get("metric") or {}).items()
               if isinstance(node, dict) and node.get("prompt_version") is not None}
    return {"folder": folder, "summary": summary, "split": (config.get("dataset") or {}).get("split", "all"),
            "settings": {**{f"judge.{k}": v for k, v in judge.items()}, **prompts}}


def _columns(folder: Path) -> dict[str, list[Any]]:
    import pandas as pd

    frame = pd.read_parquet(folder / "per_sample.parquet")
    return {c: frame[c].tolist() for c in frame.columns}


def candidates(sweep_dir: str | Path, *, resamples: int = RESAMPLES, confidence: float = CONFIDENCE) -> dict[str, Any]:
    """The candidates table of a sweep folder (module docstring), as plain data."""
    from ragexp.core.labels import compare_agreement

    jobs = [j for f in sorted(Path(sweep_dir).glob("**/summary.json")) if (j := _job(f.parent))]
    if not jobs:
        raise ConfigError(f"{sweep_dir}: no job folder with a summary.json (run the sweep with saving on)")
    varying = sorted({k for j in jobs for k in j["settings"]
                      if len({json.dumps(x["settings"].get(k)) for x in jobs}) > 1})
    rows: dict[str, dict[str, Any]] = {}
    for j in jobs:
        name = ", ".join(f"{k}={j['settings'].get(k)}" for k in varying) or "the judge"
        row = rows.setdefault(name, {"candidate": name, "settings": {k: j["settings"].get(k) for k in varying}})
        row[j["split"]] = j
    metric = None
    for row in rows.values():
        for split in ("dev", "test"):
            j = row.get(split)
            if j is None:
                continue
            agreement = j["summary"].get("agreement") or {}
            key = metric or next((k for k, e in agreement.items() if e.get("n")), None)
            metric = metric or key
            e = agreement.get(key) or {}
            head = (e.get("statistics") or {}).get(e.get("headline") or "", {})
            cell = {"statistic": e.get("headline"), "value": head.get("mean"), "ci_low": head.get("ci_low"),
                    "ci_high": head.get("ci_high"), "n": e.get("n"), "folder": str(j["folder"])}
            examples = (j["summary"].get("judge_examples") or {}).get("ids") or []
            if split == "test" and examples:
                ids = {str(i) for i in _columns(j["folder"]).get("id", [])}
                overlap = sorted(set(map(str, examples)) & ids)
                if overlap:
                    cell = {"refused": f"examples overlap test: {len(overlap)} of the {len(examples)} example "
                                       f"records are test records ({', '.join(overlap[:3])})"}
            row[f"{split}_agreement"] = cell
            row[f"{split}_examples"] = examples
    board = [r for r in rows.values() if "dev_agreement" in r]
    board.sort(key=lambda r: -(r["dev_agreement"].get("value") if r["dev_agreement"].get("value") is not None
                               else -2.0))
    if board:
        best = board[0]
        best["chosen"] = True
        cols_best = _columns(best["dev"]["folder"])
        for r in board[1:]:
            d = compare_agreement(cols_best, _columns(r["dev"]["folder"]), [metric], resamples=resamples,
                                  confidence=confidence).get(metric, {}).get("agreement")
            r["dev_vs_chosen"] = d
    return {"metric": metric, "varying": varying, "candidates": [
        {k: v for k, v in r.items() if k not in ("dev", "test")} for r in board]}


def lines(table: dict[str, Any]) -> list[str]:
    """The table as text: one row per candidate, dev and test side by side."""
    from ragexp.report.agreement import SYMBOLS

    def cell(c: dict[str, Any] | None) -> str:
        if not c:
            return "—"
        if c.get("refused"):
            return "refused (examples overlap test)"
        if c.get("value") is None:
            return "undefined"
        ci = "" if c.get("ci_low") is None else f" [{c['ci_low']:.2f}, {c['ci_high']:.2f}]"
        return f"{c['value']:.2f}{ci} (n {c['n']})"

    rows = table["candidates"]
    stat = next((c["dev_agreement"].get("statistic") for c in rows if c["dev_agreement"].get("statistic")), "kappa")
    sym = SYMBOLS.get(stat, stat)
    width = max([len("candidate")] + [len(r["candidate"]) for r in rows])
    out = [f"Judge candidates on {table['metric']}: agreement with people ({sym}); chosen on dev, reported on test",
           f"{'candidate':<{width}}  {'dev ' + sym:<28}  {'test ' + sym:<34}  vs chosen on dev"]
    for r in rows:
        d = r.get("dev_vs_chosen")
        vs = ("← chosen (best on dev)" if r.get("chosen") else
              "—" if not d else f"{d['diff']:+.2f}" + ("" if d.get("ci_low") is None else
                                                       f" [{d['ci_low']:.2f}, {d['ci_high']:.2f}]")
              + ("" if d.get("p_value") is None else f", p = {d['p_value']:.3g}"))
        out.append(f"{r['candidate']:<{width}}  {cell(r.get('dev_agreement')):<28}  "
                   f"{cell(r.get('test_agreement')):<34}  {vs}")
    refused = [r["candidate"] for r in rows if (r.get("test_agreement") or {}).get("refused")]
    for name in refused:
        out.append(f"{name}: {next(r for r in rows if r['candidate'] == name)['test_agreement']['refused']}")
    out.append("Report the chosen candidate's test agreement only; the dev numbers were used to choose it.")
    return out


def main(argv: list[str] | None = None) -> None:
    import argparse

    ap = argparse.ArgumentParser(prog="python -m ragexp.judge_candidates", description=__doc__.splitlines()[0])
    ap.add_argument("sweep_dir", help="the sweep's folder (multirun/<date>/<time>_<id>)")
    ap.add_argument("--resamples", type=int, default=RESAMPLES)
    ap.add_argument("--json", action="store_true", help="print the table as JSON")
    args = ap.parse_args(argv)
    try:
        table = candidates(args.sweep_dir, resamples=args.resamples)
    except RagexpError as exc:
        print(f"ragexp: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    if args.json:
        print(json.dumps(table, indent=2, default=str))
    else:
        print("\n".join(lines(table)))
