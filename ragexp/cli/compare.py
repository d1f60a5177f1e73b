"""``python -m ragexp.compare baseline=<run> candidate=<run>``: is the candidate really different?

A paired comparison of two evaluation runs of the same questions, metric by metric: the runs are
found and read by :mod:`ragexp.tracking.runs`, paired and compared by :mod:`ragexp.core.pairing`,
printed by :mod:`ragexp.report.comparison`; with ``log=true`` the comparison is logged as a run
(:func:`ragexp.tracking.runs.log_comparison`). The gate (:mod:`ragexp.core.gate`) then gives exit
status 1 with one line per failed condition.
"""

from __future__ import annotations

import sys
from typing import Any

import hydra
from omegaconf import DictConfig, OmegaConf

from ragexp.common.paths import conf_dir, plain
from ragexp.errors import ConfigError, GateFailed, RagexpError, TrackingError


def compare_runs(cfg: DictConfig) -> dict[str, Any]:
    """Find both runs, compare them, print the report, log the comparison run; return the comparison
    (its ``gate`` ``failures``: the lines of the failed gate conditions, empty when it passes)."""
    from ragexp.common.secrets import redact_url
    from ragexp.core.gate import drop_failures, floor_failures, read_gate
    from ragexp.core.pairing import COMPARE, compare_tables
    from ragexp.results.columns import metric_keys
    from ragexp.report.comparison import print_comparison
    from ragexp.stats.settings import count_setting, fraction_setting, stats_settings
    from ragexp.tracking.runs import log_comparison, read_runs
    from ragexp.tracking.store import bounded_http, first_line, resolve_uri

    for role in ("baseline", "candidate"):
        if OmegaConf.is_missing(cfg, role) or cfg.get(role) in (None, ""):
            raise ConfigError(f"say which run is the {role}: {role}=<run id | run name>")
    allowances, floors = read_gate(cfg.get("gate"))  # a malformed gate fails before any work
    stats = stats_settings(plain(cfg.get("stats")))
    confidence = stats["confidence"]
    regressions = count_setting(cfg.get("regressions", COMPARE["regressions"]), "regressions")  # before the store is read
    min_match = fraction_setting(cfg.get("min_match_fraction", COMPARE["min_match_fraction"]), "min_match_fraction")
    tracking = plain(cfg.get("tracking")) or {}
    uri = resolve_uri(tracking.get("uri"))
    client, runs = read_runs(uri, {"baseline": cfg.baseline, "candidate": cfg.candidate})
    baseline, candidate = runs["baseline"], runs["candidate"]
    result = compare_tables(baseline, candidate, resamples=stats["resamples"],
                            confidence=confidence, seed=stats["seed"],
                            min_match_fraction=min_match, regressions=regressions,
                            correct_with_labels=stats["correct_with_labels"], cluster_by=stats.get("cluster_by"))
    result["tracking_uri"] = redact_url(uri)  # the store's address without credentials
    from ragexp.core.headline import headline_keys

    result["headline"] = headline_keys(candidate.headline or baseline.headline, list(result["metrics"]),
                                       stats.get("primary"))
    failures = drop_failures(result["metrics"], allowances, 1 - confidence)
    candidate_values = dict(candidate.metrics)
    for key, row in result["metrics"].items():  # a metric the run did not log (no sample ok) is undefined
        if key in metric_keys(candidate.columns) and key not in candidate_values:
            candidate_values[key] = row.get("mean_candidate")
    failures += floor_failures(candidate_values, floors, " in the candidate")
    result["gate"] = {"max_drop": allowances, "min": floors, "failures": failures}
    print_comparison(result, focus=(stats.get("primary") or None))
    for line in failures:  # before logging: a store failure must not hide them
        print(line, file=sys.stderr)
    if cfg.get("log", True):
        try:
            with bounded_http():
                result["comparison_run_id"] = log_comparison(client, result, candidate)
        except Exception as exc:  # noqa: BLE001 - the comparison was printed; say what was not logged
            raise TrackingError(f"the comparison above could not be logged to {redact_url(uri)}: {first_line(exc)} "
                                f"(log=false skips logging)") from None
        print(f"Comparison logged as MLflow run {result['comparison_run_id']} in {redact_url(uri)}")
    return result


@hydra.main(version_base="1.3", config_path=str(conf_dir()), config_name="compare")
def _app(cfg: DictConfig) -> None:
    try:
        result = compare_runs(cfg)
    except RagexpError as exc:
        print(f"ragexp: error: {exc}", file=sys.stderr)
        sys.exit(2)
    if result["gate"]["failures"]:  # printed, one line each, by compare_runs
        raise GateFailed()


def main() -> None:
    from ragexp.cli import run_app

    run_app(_app)

if __name__ == "__main__":
    main()
