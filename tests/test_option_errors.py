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
    (["metric=memory", "metric.keyword_verdict_accuracy.threshold=abc"], "keyword_verdict_accuracy", "threshold",
     "'abc' (str)"),
    (["metric=memory", "metric.keyword_verdict_accuracy.threshold=5"], "keyword_verdict_accuracy", "threshold",
     "5 (int)"),
    (["metric=map", "metric.map.denominator=xyz"], "map", "denominator", "'xyz' (str)"),
    (["metric=keyword_overlap", "metric.keyword_overlap.stopwords=xyz"], "keyword_overlap", "stopwords", "'xyz' (str)"),
    (["metric=bleu", "metric.bleu.tokenize=xyz"], "bleu", "tokenize", "'xyz' (str)"),
    (["metric=bleu", "metric.bleu.smooth_value=abc"], "bleu", "smooth_value", "'abc' (str)"),
    (["metric=rouge1", "metric.rouge1.use_stemmer=abc"], "rouge1", "use_stemmer", "'abc' (str)"),
]


@pytest.mark.parametrize("overrides,metric,option,got", CASES, ids=[" ".join(c[0][1:]) for c in CASES])
def test_bad_metric_option_is_one_line(overrides, metric, option, got, compose):
    """The run's own check, in-process; the line the CLI prints for it is ``ragexp: error: <message>``
    (test_the_command_line_prints_a_bad_option_as_one_line_and_exits_2)."""
    from ragexp.errors import ConfigError
    from ragexp.workflow.runner import execute

    with pytest.raises(ConfigError) as e:  # not a ValueError from inside the scoring loop
        execute(compose(*overrides, "tracking.enabled=false"), save=False, show=False)
    line = f"ragexp: error: {e.value}"
    assert len(line.splitlines()) == 1, line
    assert line.startswith(f"ragexp: error: metric '{metric}': option '{option}' expected "), line
    assert f"got {got}" in line
    assert f"set metric.{metric}.{option}=" in line


@pytest.mark.integration
def test_the_command_line_prints_a_bad_option_as_one_line_and_exits_2(tmp_path, data_dir):
    overrides, metric, option, got = CASES[0]
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


def test_a_list_of_good_values_still_makes_one_variant_each(compose, capsys):
    """The checks look at each value of a variant list: a good list is not refused."""
    from ragexp.workflow.runner import execute

    execute(compose("metric=hit_rate", "metric.hit_rate.k=[1,3]", "tracking.enabled=false"), save=False)
    out = capsys.readouterr().out
    assert "hit_rate/hit_rate_at_1" in out and "hit_rate/hit_rate_at_3" in out


HYDRA_CASES = [
    # (overrides, the line, or how it starts)
    (["metric=nosuch"], "ragexp: error: no option 'nosuch' in group 'metric'; the options are: answer, answer_consistency, "),
    (["metric.ndcg.k={a: 1}"],
     "ragexp: error: Error merging override metric.ndcg.k={a: 1} (Cannot merge DictConfig with ListConfig)"),
    (["foo=1"], "ragexp: error: Could not override 'foo'. To append to your config use +foo=1 (Key 'foo' is not in struct)"),
    (["-m", "metric=bleu,nosuch"], "ragexp: error: no option 'nosuch' in group 'metric'; the options are: "),
    # the keyword verdict's confusion metrics before their rename (ragexp.common.renamed): the new name
    (["metric=precision"], "ragexp: error: metric=precision is now called keyword_verdict_precision: write "
                           "metric=keyword_verdict_precision"),
    (["metric.accuracy.threshold=0.5"], "ragexp: error: metric.accuracy.threshold: 'accuracy' is now called "
                                        "keyword_verdict_accuracy: write metric.keyword_verdict_accuracy.threshold="),
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


# --- stats and comparison settings: one check (ragexp/stats/settings.py) for the run and the compare --

BAD_SETTINGS = [
    (["stats.confidence=1.5"], "stats.confidence must be a number between 0 and 1 (e.g. 0.95), got 1.5"),
    (["stats.confidence=abc"], "stats.confidence must be a number between 0 and 1 (e.g. 0.95), got 'abc'"),
    (["stats.resamples=0"], "stats.resamples must be a whole number from 100 to 1,000,000, got 0"),
    (["stats.resamples=100000000"], "stats.resamples must be a whole number from 100 to 1,000,000, got 100000000"),
    (["stats.resamples=2.5"], "stats.resamples must be a whole number from 100 to 1,000,000, got 2.5"),
    (["stats.seed=abc"], "stats.seed must be a whole number of at least 0, got 'abc'"),
    (["stats.seed=-3"], "stats.seed must be a whole number of at least 0, got -3"),
    (["stats.method=student"], "stats.method must be one of percentile, bca, got 'student'"),
    (["stats.correct_with_labels=maybe"], "stats.correct_with_labels must be true or false, got 'maybe'"),
]
COMPARE_ONLY = [
    (["regressions=-1"], "regressions must be a whole number of at least 0, got -1"),
    (["regressions=abc"], "regressions must be a whole number of at least 0, got 'abc'"),
    (["min_match_fraction=0"], "min_match_fraction must be a number above 0 and at most 1, got 0"),
]


def _compose(config: str, *overrides: str):
    from hydra import compose, initialize_config_dir

    from ragexp.common.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        return compose(config_name=config, overrides=list(overrides))


@pytest.mark.parametrize("overrides,line", BAD_SETTINGS, ids=[c[0][0] for c in BAD_SETTINGS])
def test_a_run_refuses_bad_stats_settings_before_any_work(overrides, line, compose, tmp_path):
    from ragexp.errors import ConfigError
    from ragexp.workflow.runner import run

    with pytest.raises(ConfigError) as e:
        run(compose(*overrides, "tracking.enabled=false"))
    assert str(e.value) == line
    assert not (tmp_path / "mlflow.db").exists()


@pytest.mark.parametrize("overrides,line", BAD_SETTINGS + COMPARE_ONLY, ids=[c[0][0] for c in BAD_SETTINGS + COMPARE_ONLY])
def test_the_compare_refuses_the_same_settings_before_reading_the_store(overrides, line, tmp_path):
    from ragexp.cli.compare import compare_runs
    from ragexp.errors import ConfigError

    store = tmp_path / "none.db"
    cfg = _compose("compare", "baseline=a", "candidate=b", f"tracking.uri=sqlite:///{store}", *overrides)
    with pytest.raises(ConfigError) as e:
        compare_runs(cfg)
    assert str(e.value) == line
    assert not store.exists()


@pytest.mark.parametrize("options,line", [
    (dict(resamples=0), "stats.resamples must be a whole number from 100 to 1,000,000, got 0"),
    (dict(confidence=1.5), "stats.confidence must be a number between 0 and 1 (e.g. 0.95), got 1.5"),
    (dict(seed="abc"), "stats.seed must be a whole number of at least 0, got 'abc'"),
    (dict(regressions=-1), "regressions must be a whole number of at least 0, got -1"),
])
def test_compare_results_refuses_the_same_settings(options, line):
    import ragexp

    with pytest.raises(ragexp.ConfigError) as e:
        ragexp.compare_results("a", "b", tracking_uri="sqlite:////nonexistent/x.db", **options)
    assert str(e.value) == line


@pytest.mark.integration
@pytest.mark.parametrize("module", ["ragexp", "ragexp.compare"])
def test_bad_stats_seed_is_one_line_from_both_commands(module, tmp_path, data_dir):
    import os
    import subprocess
    import sys

    args = ["baseline=a", "candidate=b"] if module == "ragexp.compare" else [f"data_dir={data_dir}",
                                                                             "tracking.enabled=false"]
    env = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    proc = subprocess.run([sys.executable, "-m", module, *args, "stats.seed=abc"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == ["ragexp: error: stats.seed must be a whole number of at least 0, got 'abc'"]


@pytest.mark.integration
@pytest.mark.parametrize("override,line", [
    ("foo=1", "ragexp: error: Could not override 'foo'. To append to your config use +foo=1 (Key 'foo' is not in struct)"),
    ("stats=nosuch", "ragexp: error: no option 'nosuch' in group 'stats'; the options are: default"),
])
def test_the_compare_command_says_a_config_hydra_cannot_compose_in_one_line(override, line, tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "HYDRA_FULL_ERROR")}
    proc = subprocess.run([sys.executable, "-m", "ragexp.compare", "baseline=a", "candidate=b", override],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [line], proc.stderr


@pytest.mark.parametrize("value", ["sqlite", "${oc.env:RAGEXP_SECRET_OVERRIDE_1}"])
def test_a_judge_setting_without_a_judge_says_to_choose_one(value):
    """``judge.cache_backend=…`` with no ``judge=``: Hydra's 'Could not override … use +judge.cache_backend=…'
    quoted the stand-in of a redacted secret; the line now says to choose a judge, naming the options."""
    from ragexp.errors import config_error_line

    with pytest.raises(Exception) as caught:
        _compose("config", f"judge.cache_backend={value}")
    line = config_error_line(caught.value)
    assert line.startswith("judge.cache_backend sets an option of the judge, but no judge is chosen: add judge=<name>")
    assert "openai_compatible" in line and "RAGEXP_SECRET" not in line and "+judge" not in line


@pytest.mark.parametrize("override, line", [
    ("metric=answer_tokn_f1", "no option 'answer_tokn_f1' in group 'metric'; did you mean 'answer_token_f1'? ("),
    # inside a list Hydra names no options: ragexp reads the group's files
    ("metric=[answer_token_f1,contxt_recall]", "no option 'contxt_recall' in group 'metric'; did you mean "
                                               "'context_recall'? ("),
    ("metric=faithfulness", "no option 'faithfulness' in group 'metric'; did you mean 'claim_faithfulness'? ("),
    ("retriever=bm26", "no option 'bm26' in group 'retriever'; did you mean 'bm25'? The options are: bm25, dense, "),
])
def test_a_mistyped_option_names_the_closest_one(override, line):
    from ragexp.errors import config_error_line

    with pytest.raises(Exception) as caught:
        _compose("config", override)
    said = config_error_line(caught.value)
    assert said.startswith(line), said
    assert len(said) < 200 or override.startswith("retriever"), said  # not the ~700 characters of every metric


@pytest.mark.parametrize("override, line", [
    # Hydra's line advised appending the typo as a new key (+dataset.sytem=weak), which runs and changes nothing
    ("dataset.sytem=weak", "dataset.sytem: no such key; did you mean dataset.system? (the keys of dataset: "),
    ("tracking.trace=0", "tracking.trace: no such key; did you mean tracking.traces? (the keys of tracking: "),
    ("foo=1", "Could not override 'foo'. To append to your config use +foo=1 (Key 'foo' is not in struct)"),
])
def test_a_mistyped_key_names_the_closest_key_of_its_node(override, line):
    from ragexp.errors import config_error_line

    with pytest.raises(Exception) as caught:
        _compose("config", override)
    said = config_error_line(caught.value)
    assert said.startswith(line) and "+" + override.split("=")[0] not in said.replace("+foo", ""), said
    if override.startswith("dataset"):
        assert "system" in said.split("(the keys of dataset: ")[1]
