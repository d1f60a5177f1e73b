"""A bad metric option is one line naming the metric, the option, what was expected and what was got.

Each case runs ``python -m ragexp`` as a user would; on the code before the option checks most of
them ended in a traceback from inside the scoring loop (``ValueError: k must be ...``), one
(``threshold=5``) was accepted and scored every answer as wrong.
"""

from __future__ import annotations

import pytest

from cli import run_cli

CASES = [
    # (overrides, metric, option, what was got)
    (["metric=hit_rate", "metric.hit_rate.k=abc"], "hit_rate", "k", "'abc' (str)"),
    (["metric=context_recall", "metric.context_recall.k=[-1,0]"], "context_recall", "k", "-1 (int)"),
    (["metric=hit_rate", "metric.hit_rate.k=1.5"], "hit_rate", "k", "1.5 (float)"),
    (["metric=hit_rate", "metric.hit_rate.k=[]"], "hit_rate", "k", "[]"),
    (["metric=memory", "metric.accuracy.threshold=abc"], "accuracy", "threshold", "'abc' (str)"),
    (["metric=memory", "metric.accuracy.threshold=5"], "accuracy", "threshold", "5 (int)"),
    (["metric=map", "metric.map.denominator=xyz"], "map", "denominator", "'xyz' (str)"),
    (["metric=keyword_overlap", "metric.keyword_overlap.stopwords=xyz"], "keyword_overlap", "stopwords", "'xyz' (str)"),
    (["metric=bleu", "metric.bleu.tokenize=xyz"], "bleu", "tokenize", "'xyz' (str)"),
    (["metric=bleu", "metric.bleu.smooth_value=abc"], "bleu", "smooth_value", "'abc' (str)"),
    (["metric=rouge1", "metric.rouge1.use_stemmer=abc"], "rouge1", "use_stemmer", "'abc' (str)"),
]


@pytest.mark.integration
@pytest.mark.parametrize("overrides,metric,option,got", CASES, ids=[" ".join(c[0][1:]) for c in CASES])
def test_bad_metric_option_is_one_line(overrides, metric, option, got, tmp_path, data_dir):
    proc = run_cli(*overrides, f"data_dir={data_dir}", "tracking.enabled=false", "progress=false",
                   cwd=tmp_path, check=False, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith(f"ragexp: error: metric '{metric}': option '{option}' expected "), line
    assert f"got {got}" in line
    assert f"set metric.{metric}.{option}=" in line


@pytest.mark.integration
def test_a_list_of_good_values_still_makes_one_variant_each(tmp_path, data_dir):
    """The checks look at each value of a variant list: a good list is not refused."""
    proc = run_cli("metric=hit_rate", "metric.hit_rate.k=[1,3]", f"data_dir={data_dir}", "tracking.enabled=false",
                   "progress=false", cwd=tmp_path, timeout=300)
    assert "hit_rate/k1" in proc.stdout and "hit_rate/k3" in proc.stdout


HYDRA_CASES = [
    # (overrides, the line, or how it starts)
    (["metric=nosuch"], "ragexp: error: no option 'nosuch' in group 'metric'; the options are: accuracy, answer, "),
    (["metric.ndcg.k={a: 1}"],
     "ragexp: error: Error merging override metric.ndcg.k={a: 1} (Cannot merge DictConfig with ListConfig)"),
    (["foo=1"], "ragexp: error: Could not override 'foo'. To append to your config use +foo=1 (Key 'foo' is not in struct)"),
    (["-m", "metric=bleu,nosuch"], "ragexp: error: no option 'nosuch' in group 'metric'; the options are: "),
]


@pytest.mark.integration
@pytest.mark.parametrize("overrides,line", HYDRA_CASES, ids=[" ".join(c[0]) for c in HYDRA_CASES])
def test_a_config_hydra_cannot_compose_is_one_line(overrides, line, tmp_path, data_dir):
    # Hydra printed these over 3 to 51 lines (an unknown option listed every option on its own line)
    proc = run_cli(*overrides, f"data_dir={data_dir}", "tracking.enabled=false", cwd=tmp_path, check=False, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith(line), proc.stderr
    assert not (tmp_path / "outputs").exists() and not (tmp_path / "mlflow.db").exists()


@pytest.mark.integration
def test_hydra_full_error_set_by_the_user_still_shows_hydras_traceback(tmp_path, data_dir):
    proc = run_cli("foo=1", f"data_dir={data_dir}", cwd=tmp_path, env={"HYDRA_FULL_ERROR": "1"}, check=False,
                   timeout=300)
    assert proc.returncode != 0 and "Traceback" in proc.stderr and "ConfigCompositionException" in proc.stderr
