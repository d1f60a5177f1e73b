"""A judge that says the same thing to everything is flagged, never shown as a confident κ: the warning
reaches the console lines, agreement.json's entry, MLflow's metrics and the run's description; κ and AC1
of a constant judge are undefined; per-class agreement on 0/1 metrics is the share of people's 0s (and
1s) the judge matches, with Wilson intervals equal to statsmodels' (docs/judge-trust.md, "A useless judge")."""

from __future__ import annotations

import json

import pytest

from judge_server import Reply
from test_judge_agreement import CONFUSION, _overrides, _records, _script


def _always_yes(request):
    return Reply(text=json.dumps({"fully_supported": True, "reason": "always yes"}))


def test_an_always_yes_judge_is_flagged_and_its_kappa_undefined(compose, server, tmp_path):
    from ragexp.core.labels import trust_metrics
    from ragexp.report.agreement import trust_lines
    from ragexp.report.describe import run_description
    from ragexp.workflow.runner import execute

    _records(tmp_path / "labelled.jsonl")
    server.script = _always_yes
    summary = execute(compose(*_overrides(server, tmp_path / "labelled.jsonl")), save=False, show=False).summary
    entry = summary["agreement"]["answer_consistency_binary"]
    assert entry["degenerate"] is True
    assert entry["statistics"]["kappa"]["mean"] is None and entry["statistics"]["kappa"]["ci_low"] is None
    assert entry["statistics"]["ac1"]["mean"] is None and "degenerate" in entry["statistics"]["ac1"]["note"]
    assert entry["warnings"] == ["the judge gave 1 to 100% of the 40 samples it scored: it barely tells them apart, "
                                 "so its agreement statistics say little"]
    assert "kappa" not in entry["labels_needed"]  # no number of labels makes a one-verdict judge's κ
    lines = trust_lines(summary)
    assert lines[0].endswith("κ undefined (the judge gave one verdict to everything) over 40 labels")
    assert f"WARNING answer_consistency_binary: {entry['warnings'][0]}" in lines
    assert "the judge gives the other value to 16 of people's 16 0s (100%) and 0 of people's 24 1s (0%)" in \
        "\n".join(lines)
    assert trust_metrics(summary)["agreement/answer_consistency_binary/degenerate_judge"] == 1.0
    assert "WARNING answer_consistency_binary" in run_description(summary)


def test_per_class_agreement_of_a_fair_judge_is_wilson_like_statsmodels(compose, server, tmp_path):
    from statsmodels.stats.proportion import proportion_confint

    from ragexp.workflow.runner import execute

    server.script = _script(_records(tmp_path / "labelled.jsonl"))
    entry = execute(compose(*_overrides(server, tmp_path / "labelled.jsonl")), save=False,
                    show=False).summary["agreement"]["answer_consistency_binary"]
    assert "degenerate" not in entry and not entry.get("warnings")
    for cls, (caught, of) in {"people_0": (CONFUSION[0, 0], 16), "people_1": (CONFUSION[1, 1], 24)}.items():
        d = entry["per_class"][cls]
        lo, hi = proportion_confint(caught, of, alpha=0.05, method="wilson")
        assert (d["caught"], d["of"], d["mean"]) == (caught, of, caught / of)
        assert (d["ci_low"], d["ci_high"]) == (pytest.approx(lo, abs=1e-12), pytest.approx(hi, abs=1e-12))


@pytest.mark.slow
def test_compare_of_an_always_yes_judge_leads_with_agreement_and_does_not_call_it_better(compose, server, tmp_path,
                                                                                         capsys):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ragexp.cli.compare import compare_runs
    from ragexp.common.paths import conf_dir
    from ragexp.report.comparison import print_comparison
    from ragexp.workflow.runner import execute

    path = tmp_path / "labelled.jsonl"
    server.script = _script(_records(path))
    a = execute(compose(*_overrides(server, path), "run_name=scripted"), show=False).summary
    server.script = _always_yes
    b = execute(compose(*_overrides(server, path), "run_name=always-yes"), show=False).summary
    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = hydra_compose("compare", overrides=[f"baseline={a['run_id']}", f"candidate={b['run_id']}",
                                                  f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "log=false",
                                                  "stats.resamples=2000"])
    result = compare_runs(cfg)
    row = result["metrics"]["answer_consistency_binary"]
    assert row["diff"] > 0 and row["verdict"] == "judge mean higher"  # its mean rose; not 'better'
    assert result["judges_only"] is True
    d = result["agreement"]["answer_consistency_binary"]
    assert d["agreement"]["diff"] < 0 and d["agreement"]["p_value"] < 0.05
    assert d["per_class"]["people_0"] == {"n": 16, "baseline": 12 / 16, "candidate": 0.0}
    capsys.readouterr()
    print_comparison(result)
    out = capsys.readouterr().out
    first = out.splitlines()[:2]
    assert first[0].startswith("These runs score the same answers: they compare judges.")
    assert "a higher judge mean is not a better judge" in first[0]
    assert first[1].startswith("answer_consistency_binary: the baseline judge agrees better with people (κ ")
    assert "▲ better" not in out
