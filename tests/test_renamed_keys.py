"""The keyword verdict's confusion metrics are ``keyword_verdict_accuracy`` … ``keyword_verdict_f1`` (they were
``accuracy``, ``precision``, ``recall``, ``f1``: names every reader takes for something else). A run logs
the new keys only; the old ones are still read where a user types a key (``stats.primary``, gate floors
and allowances) with one warning line, and as a run's keys from before the rename (docs/metrics.md,
"Renamed keys"). ``metric=precision`` and ``metric.accuracy.threshold=`` are tests/test_option_errors.py's."""

from __future__ import annotations

import re

import pytest

from cli import ROOT
from ragexp.common.renamed import RENAMED_METRICS, current_keys
from ragexp.core.gate import read_gate
from ragexp.metrics.base import load_all
from ragexp.stats.settings import stats_settings


def test_the_registry_and_the_suites_carry_the_new_names_only():
    registry = load_all()
    assert set(RENAMED_METRICS.values()) <= set(registry) and not set(RENAMED_METRICS) & set(registry)
    for old, new in RENAMED_METRICS.items():
        assert not (ROOT / "conf" / "metric" / f"{old}.yaml").exists() and (ROOT / "conf" / "metric" / f"{new}.yaml").exists()


def test_an_old_key_in_stats_primary_or_the_gate_is_read_as_the_new_one_with_one_warning():
    with pytest.warns(FutureWarning, match=r"^stats\.primary=precision uses the old name 'precision'; .* now called "
                                           r"keyword_verdict_precision\. It is read as keyword_verdict_precision"):
        assert stats_settings({"primary": "precision"})["primary"] == "keyword_verdict_precision"
    with pytest.warns(FutureWarning) as caught:
        drops, floors = read_gate({"max_drop": {"accuracy": 0.1}, "min": {"f1": 0.5, "hit_rate": {"k5": 0.6}}})
    assert drops == {"keyword_verdict_accuracy": 0.1}
    assert floors == {"keyword_verdict_f1": 0.5, "hit_rate/hit_rate_at_5": 0.6}
    assert [str(w.message).split(" uses")[0] for w in caught] == ["gate.max_drop.accuracy", "gate.min.f1",
                                                                  "gate.min.hit_rate.k5"]
    assert "a cut-off's key now names its metric: hit_rate/hit_rate_at_5" in str(caught[2].message)
    with pytest.warns(FutureWarning, match=r"^stats\.primary=recall_at_k/k5 uses the old name 'recall_at_k/k5'; a "
                                           r"cut-off's key now names its metric: recall_at_k/recall_at_5\."):
        assert stats_settings({"primary": "recall_at_k/k5"})["primary"] == "recall_at_k/recall_at_5"


def test_a_run_logs_the_new_keys_and_leads_with_an_old_primary_under_its_new_name(compose):
    from ragexp.workflow.runner import execute

    with pytest.warns(FutureWarning):
        summary = execute(compose("stats.primary=recall", "tracking.enabled=false"), save=False, show=False).summary
    assert summary["headline"][0] == "keyword_verdict_recall"
    assert set(RENAMED_METRICS.values()) <= set(summary["metrics"]) and not set(RENAMED_METRICS) & set(summary["metrics"])
    # a run logged before the rename reads as today's (what ragexp.compare does with an older MLflow run)
    old = {{v: k for k, v in RENAMED_METRICS.items()}.get(k, k): v for k, v in summary["metrics"].items()}
    assert current_keys(old) == summary["metrics"]


def test_the_metrics_page_documents_each_rename():
    text = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
    section = text[text.index("## Renamed keys"):]
    section = section[:section.index("\n## ", 4)] if "\n## " in section[4:] else section
    for old, new in RENAMED_METRICS.items():
        assert re.search(rf"`{old}`.*`{new}`", section), (old, new)


@pytest.mark.integration
def test_the_command_says_an_old_key_in_one_warning_line(tmp_path, data_dir):
    from cli import run_cli

    proc = run_cli("stats.primary=precision", "metric=memory", "dataset=memory_eval_true", f"data_dir={data_dir}",
                   "tracking.enabled=false", cwd=tmp_path)
    said = [line for line in proc.stderr.splitlines() if "precision" in line]
    assert len(said) == 1 and said[0].startswith("ragexp: warning: stats.primary=precision uses the old name"), \
        proc.stderr
    assert "FutureWarning" not in proc.stderr and "keyword_verdict_precision" in proc.stdout
