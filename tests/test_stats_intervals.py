"""ragexp.stats.intervals against scipy on the same numbers, and the clustered SE by hand."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from cli import run_cli
from ragexp.results.columns import status_column
from ragexp.stats.intervals import mean_interval, mean_intervals, ratio_interval, ratio_intervals

# a skewed, continuous sample (token-F1-like values) and a 0/1 sample (hit-rate-like)
SKEWED = [round(v, 4) for v in np.random.default_rng(7).beta(0.6, 1.8, size=60)]
HITS = [1] * 23 + [0] * 17
B = 20_000


def _mc_tolerance(values, level: float) -> float:
    """Six times the Monte-Carlo error of the difference of two independent bootstrap quantiles.

    A bootstrap quantile at level p from B resamples has standard error sqrt(p(1-p)/B) / f,
    f the density of the bootstrap distribution there; with a normal approximation of sd s,
    f = phi(z_p) / s. Two independent runs differ by sqrt(2) times that.
    """
    s = stats.sem(values)
    z = stats.norm.ppf(level)
    one = math.sqrt(level * (1 - level) / B) * s / stats.norm.pdf(z)
    return 6 * math.sqrt(2) * one


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_bootstrap_interval_agrees_with_scipy(method):
    ours = mean_interval(SKEWED, resamples=B, method=method, seed=1)
    ref = stats.bootstrap((np.array(SKEWED),), np.mean, n_resamples=B, method="BCa" if method == "bca" else method,
                          confidence_level=0.95, random_state=np.random.default_rng(2)).confidence_interval
    tol = _mc_tolerance(SKEWED, 0.025)
    assert ours.method == method and ours.n == len(SKEWED)
    assert ours.mean == pytest.approx(math.fsum(SKEWED) / len(SKEWED))
    assert abs(ours.ci_low - ref.low) < tol
    assert abs(ours.ci_high - ref.high) < tol
    # the interval is about as wide as 2 × 1.96 standard errors, not a different quantity
    assert 0.5 < (ours.ci_high - ours.ci_low) / (2 * 1.96 * ours.stderr) < 1.5


def test_bca_differs_from_percentile_on_skewed_data():
    # the BCa correction moves the interval the way scipy's does (towards the long tail)
    pct = mean_interval(SKEWED, resamples=B, method="percentile")
    bca = mean_interval(SKEWED, resamples=B, method="bca")
    ref_p = stats.bootstrap((np.array(SKEWED),), np.mean, n_resamples=B, method="percentile",
                            random_state=np.random.default_rng(3)).confidence_interval
    ref_b = stats.bootstrap((np.array(SKEWED),), np.mean, n_resamples=B, method="BCa",
                            random_state=np.random.default_rng(3)).confidence_interval
    assert np.sign(bca.ci_high - pct.ci_high) == np.sign(ref_b.high - ref_p.high)


def test_stderr_is_scipy_sem():
    assert mean_interval(SKEWED).stderr == pytest.approx(stats.sem(SKEWED), rel=1e-12)


def test_proportion_uses_wilson_like_scipy():
    iv = mean_interval(HITS)
    ref = stats.binomtest(23, 40).proportion_ci(confidence_level=0.95, method="wilson")
    assert iv.method == "wilson"
    assert iv.mean == 23 / 40
    assert iv.ci_low == pytest.approx(ref.low, abs=1e-12)
    assert iv.ci_high == pytest.approx(ref.high, abs=1e-12)
    assert iv.stderr == pytest.approx(math.sqrt((23 / 40) * (17 / 40) / 40), rel=1e-12)
    # other levels too
    iv90 = mean_interval(HITS, confidence=0.9)
    ref90 = stats.binomtest(23, 40).proportion_ci(confidence_level=0.9, method="wilson")
    assert (iv90.ci_low, iv90.ci_high) == pytest.approx((ref90.low, ref90.high), abs=1e-12)


def test_clustered_stderr_by_hand():
    # three clusters: a = {0.2, 0.4}, b = {0.9}, c = {0.1, 0.3, 0.5}; mean = 2.4 / 6 = 0.4
    values = [0.2, 0.4, 0.9, 0.1, 0.3, 0.5]
    clusters = ["a", "a", "b", "c", "c", "c"]
    # within-cluster sums of residuals: a: -0.2 + 0 = -0.2; b: 0.5; c: -0.3 - 0.1 + 0.1 = -0.3
    expected = math.sqrt(3 / (3 - 1) * ((-0.2) ** 2 + 0.5 ** 2 + (-0.3) ** 2)) / 6
    iv = mean_interval(values, clusters=clusters)
    assert iv.mean == pytest.approx(2.4 / 6)
    assert iv.stderr == pytest.approx(expected, rel=1e-12)
    assert iv.n == 6 and iv.n_clusters == 3 and iv.method == "cluster-percentile"


def test_clustered_stderr_with_singleton_clusters_is_sem():
    iv = mean_interval(SKEWED, clusters=list(range(len(SKEWED))))
    assert iv.stderr == pytest.approx(stats.sem(SKEWED), rel=1e-12)


def test_correlated_clusters_widen_the_interval():
    # 20 documents, 5 questions each, answers alike within a document: the clustered SE is larger
    rng = np.random.default_rng(11)
    doc_effect = np.repeat(rng.normal(0.5, 0.2, size=20), 5)
    values = list(np.clip(doc_effect + rng.normal(0, 0.05, size=100), 0, 1))
    groups = list(np.repeat(np.arange(20), 5))
    plain = mean_interval(values)
    clustered = mean_interval(values, clusters=groups)
    assert clustered.stderr > 2 * plain.stderr
    assert clustered.ci_high - clustered.ci_low > 2 * (plain.ci_high - plain.ci_low)


@pytest.mark.parametrize("method", ["percentile", "bca"])
def test_cluster_bootstrap_agrees_with_scipy_on_cluster_means(method):
    # equal cluster sizes: resampling clusters is resampling the cluster means
    rng = np.random.default_rng(5)
    values = rng.beta(0.8, 1.5, size=(30, 4))
    clusters = np.repeat(np.arange(30), 4)
    ours = mean_interval(list(values.ravel()), clusters=list(clusters), resamples=B, method=method)
    cluster_means = values.mean(axis=1)
    ref = stats.bootstrap((cluster_means,), np.mean, n_resamples=B, method="BCa" if method == "bca" else method,
                          random_state=np.random.default_rng(9)).confidence_interval
    tol = _mc_tolerance(cluster_means, 0.025)
    assert abs(ours.ci_low - ref.low) < tol and abs(ours.ci_high - ref.high) < tol


def test_small_and_empty():
    empty = mean_interval([])
    assert (empty.mean, empty.stderr, empty.ci_low, empty.ci_high, empty.n) == (None, None, None, None, 0)
    one = mean_interval([None, 0.3, float("nan")])
    assert one.mean == 0.3 and one.n == 1 and one.ci_low is None and one.stderr is None and "one sample" in one.note
    flat = mean_interval([0.4, 0.4, 0.4])
    assert (flat.ci_low, flat.ci_high, flat.stderr) == (pytest.approx(0.4), pytest.approx(0.4), pytest.approx(0.0, abs=1e-12))


def test_missing_values_are_left_out_not_zero():
    iv = mean_interval([0.2, None, 0.6, float("nan"), 0.7])
    assert iv.n == 3 and iv.mean == pytest.approx((0.2 + 0.6 + 0.7) / 3)
    assert iv.stderr == pytest.approx(stats.sem([0.2, 0.6, 0.7]))


def test_seeded_and_shared_draw_gives_the_same_interval_per_column():
    a = mean_interval(SKEWED, seed=3)
    assert a == mean_interval(SKEWED, seed=3)
    assert a != mean_interval(SKEWED, seed=4)
    other = [v * 0.5 for v in SKEWED]
    both = mean_intervals({"a": SKEWED, "b": other, "hits": HITS + [None] * 20}, seed=3)
    # the same numbers up to the float32 rounding of the resampled sums
    for key, alone in (("a", a), ("b", mean_interval(other, seed=3))):
        got = both[key]
        assert (got.mean, got.stderr, got.ci_low, got.ci_high) == pytest.approx(
            (alone.mean, alone.stderr, alone.ci_low, alone.ci_high), rel=1e-6)
        assert (got.n, got.method) == (alone.n, alone.method)
    assert both["hits"].method == "wilson" and both["hits"].n == 40


def test_ratio_interval_against_a_loop_over_the_same_resamples():
    # precision over records: TP → 1/1, FP → 0/1, FN/TN → 0/0
    rng = np.random.default_rng(2)
    kind = rng.choice(["tp", "fp", "fn", "tn"], size=80, p=[0.4, 0.2, 0.2, 0.2])
    num = (kind == "tp").astype(float)
    den = np.isin(kind, ["tp", "fp"]).astype(float)
    iv = ratio_interval(num, den, resamples=B)
    assert iv.mean == num.sum() / den.sum() and iv.n == int(den.sum())
    # scipy's bootstrap of the same statistic over records
    ref = stats.bootstrap((num, den), lambda a, b, axis=-1: a.sum(axis=axis) / b.sum(axis=axis), paired=True,
                          vectorized=True, n_resamples=B, method="percentile",
                          random_state=np.random.default_rng(4)).confidence_interval
    p = num.sum() / den.sum()
    tol = 6 * math.sqrt(2) * math.sqrt(0.025 * 0.975 / B) * math.sqrt(p * (1 - p) / den.sum()) / stats.norm.pdf(1.96)
    assert abs(iv.ci_low - ref.low) < tol and abs(iv.ci_high - ref.high) < tol


def test_ratio_intervals_of_the_four_confusion_metrics_equal_each_alone(data_dir):
    # HaluEval's answers, each judged by keyword overlap against the right answer, against its label
    from ragexp.datasets.halueval import load_halueval
    from ragexp.metrics.keyword import confusion

    records = load_halueval(str(data_dir / "halueval" / "qa_one-turn_data.json")).records[:400]
    parts = [confusion([r.label], [r.answer], [r.reference_answers]) for r in records]
    tp, fn, fp, tn = (np.array([c[k] for c in parts], dtype=float) for k in ("tp", "fn", "fp", "tn"))
    ratios = {"accuracy": (tp + tn, tp + fn + fp + tn), "precision": (tp, tp + fp), "recall": (tp, tp + fn),
              "f1": (2 * tp, 2 * tp + fp + fn), "none": (tp * 0, tp * 0)}
    clusters = [r.id.rsplit("-", 1)[0][-1] for r in records]  # ten clusters: few, noted
    for cl in (None, clusters):
        both = ratio_intervals(ratios, clusters=cl, resamples=2000, seed=5)
        assert list(both) == list(ratios)
        for key, (num, den) in ratios.items():
            assert both[key] == ratio_interval(num, den, clusters=cl, resamples=2000, seed=5)
        assert both["precision"].mean == tp.sum() / (tp.sum() + fp.sum())
        assert both["none"].mean is None and both["none"].n == 0
    with pytest.raises(ValueError, match="one part per record"):
        ratio_intervals({"a": ([1, 0], [1, 1]), "b": ([1], [1])})


def test_the_counts_are_those_of_numpys_default_integer_draw():
    # count_matrix draws int32 indices: the same stream as rng.integers' default int64 for a range below 2**32
    from ragexp.stats.resampling import count_matrix, generator

    for groups, size in ((40, 300), (1000, 4000)):
        idx = generator(3).integers(0, groups, size=(size, groups))
        expected = np.stack([np.bincount(row, minlength=groups) for row in idx])
        assert np.array_equal(count_matrix(generator(3), groups, size), expected)


def test_draws_are_the_chunks_of_one_draw_at_a_time():
    # 7,000 samples x 10,000 resamples: 18 chunks of 571 rows, the float32 matrices count_matrix makes one
    # chunk at a time from the same generator, so every matrix product made of them (and every interval) is
    # the same to the bit whatever the chunking
    from ragexp.stats.resampling import CHUNK_CELLS, count_matrix, draws, generator

    groups, resamples = 7000, 10_000
    rng = generator(9)
    starts = []
    for start, size, c in draws(9, groups, resamples):
        assert c.dtype == np.float32 and c.flags.c_contiguous and c.shape == (size, groups)
        assert np.array_equal(c, count_matrix(rng, groups, size))
        starts.append((start, size))
    chunk = CHUNK_CELLS // groups
    assert starts == [(s, min(chunk, resamples - s)) for s in range(0, resamples, chunk)]


def test_bad_settings_say_what_was_expected():
    with pytest.raises(ValueError, match="method must be one of percentile, bca"):
        mean_interval(SKEWED, method="student")
    with pytest.raises(ValueError, match="confidence must be a number between 0 and 1"):
        mean_interval(SKEWED, confidence=95)
    with pytest.raises(ValueError, match="resamples must be a whole number of at least 100, got 'abc'"):
        mean_interval(SKEWED, resamples="abc")


# ---- a real run: summary.json, MLflow keys, the printed table -------------------------------------------------


def _per_sample(folder):
    import json

    import pandas as pd

    table = json.loads((folder / "per_sample.json").read_text())
    return pd.DataFrame(table["data"], columns=table["columns"])


def test_a_run_reports_every_aggregate_with_its_interval(compose, tmp_path):
    import json

    from mlflow.tracking import MlflowClient

    from ragexp.workflow.runner import run

    summary = run(compose("dataset.system=weak", "stats.resamples=2000"))
    folder = Path(summary["results_folder"])
    on_disk = json.loads((folder / "summary.json").read_text())
    frame = _per_sample(folder)
    intervals = on_disk["intervals"]
    # every aggregate has an interval, with how many samples it is over
    assert set(summary["metrics"]) <= set(intervals)
    assert all("n" in iv for iv in intervals.values())

    f1 = intervals["answer_token_f1"]
    values = [v for v, s in zip(frame["answer_token_f1"], frame[status_column("answer_token_f1")]) if s == "ok"]
    assert f1["n"] == len(values) == 50
    assert f1["mean"] == pytest.approx(summary["metrics"]["answer_token_f1"])
    assert f1["stderr"] == pytest.approx(stats.sem(values), rel=1e-9)
    assert f1["method"] == "percentile" and f1["ci_low"] < f1["mean"] < f1["ci_high"]

    hits = [int(v) for v in frame["hit_rate/hit_rate_at_1"]]
    ref = stats.binomtest(sum(hits), len(hits)).proportion_ci(method="wilson")
    assert intervals["hit_rate/hit_rate_at_1"]["method"] == "wilson"
    assert (intervals["hit_rate/hit_rate_at_1"]["ci_low"], intervals["hit_rate/hit_rate_at_1"]["ci_high"]) == pytest.approx((ref.low, ref.high))

    # the dataset-level confusion metrics: resampled records, n = the samples in the denominator
    acc = intervals["keyword_verdict_accuracy"]
    assert acc["mean"] == pytest.approx(summary["metrics"]["keyword_verdict_accuracy"]) and acc["ci_low"] <= acc["mean"] <= acc["ci_high"]
    assert intervals["keyword_verdict_precision"]["n"] <= acc["n"] <= 50

    # MLflow: K/n, K/stderr, K/ci_low, K/ci_high for every aggregate key K
    logged = MlflowClient(tracking_uri=summary["tracking_uri"]).get_run(summary["run_id"]).data.metrics
    for key in ("answer_token_f1", "hit_rate/hit_rate_at_1", "ndcg/ndcg_at_10", "keyword_verdict_accuracy", "latency/generate"):
        assert logged[f"{key}/n"] == intervals[key]["n"]
        for part in ("stderr", "ci_low", "ci_high"):
            assert logged[f"{key}/{part}"] == pytest.approx(intervals[key][part])


def test_clustered_run_uses_the_column_and_carries_it(compose):

    from ragexp.workflow.runner import run

    summary = run(compose("dataset.system=strong", "stats.cluster_by=lang", "stats.resamples=2000"))
    frame = _per_sample(Path(summary["results_folder"]))
    assert "lang" in frame.columns  # the per-sample table carries the cluster column
    iv = summary["intervals"]["answer_token_f1"]
    assert iv["n_clusters"] == frame["lang"].nunique() == 2 and iv["method"] == "cluster-percentile"
    x = frame["answer_token_f1"].to_numpy(dtype=float)
    mean = x.mean()
    resid = [float((x[frame["lang"] == g] - mean).sum()) for g in sorted(frame["lang"].unique())]
    assert iv["stderr"] == pytest.approx(math.sqrt(2 / (2 - 1) * (resid[0] ** 2 + resid[1] ** 2)) / len(x))


@pytest.mark.integration
def test_cluster_column_absent_is_one_line(tmp_path):
    proc = run_cli("stats.cluster_by=document", "tracking.enabled=false", cwd=tmp_path, check=False)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [proc.stderr.strip()]
    assert "stats.cluster_by='document'" in proc.stderr and "lang" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_table_shows_interval_and_what_the_mean_is_over(compose, capsys):
    from ragexp.workflow.runner import execute

    execute(compose("dataset.system=strong", "tracking.enabled=false"), save=False)  # the CLI's table, in-process
    out = capsys.readouterr().out
    assert "95% CI" in out and "over" in out and "Wilson" in out
    row = next(line for line in out.splitlines() if "│ answer_token_f1 " in line)
    assert "[0." in row and "50 / 50" in row


def test_few_clusters_are_flagged():
    values = [0.2, 0.4, 0.9, 0.1, 0.3, 0.5]
    iv = mean_interval(values, clusters=["a", "a", "b", "c", "c", "c"])
    assert iv.ci_low is not None and "only 3 clusters" in iv.note
    one = mean_interval(values, clusters=["a"] * 6)
    assert one.ci_low is None and one.stderr is None and "one cluster" in one.note
    many = mean_interval(SKEWED, clusters=[i // 2 for i in range(len(SKEWED))])
    assert many.n_clusters == 30 and many.note is None


@pytest.mark.integration
def test_bad_stats_settings_stop_the_run_in_one_line(tmp_path):
    proc = run_cli("stats.method=student", "tracking.enabled=false", cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "ragexp: error: stats.method must be one of percentile, bca, got 'student'"


def test_clustered_stderr_matches_statsmodels_cluster_robust_mean():
    sm = pytest.importorskip("statsmodels.api")
    rng = np.random.default_rng(3)
    groups = np.repeat(np.arange(25), rng.integers(1, 6, size=25))
    values = np.clip(rng.normal(0.5, 0.2, size=len(groups)) + 0.1 * (groups % 3), 0, 1)
    fit = sm.OLS(values, np.ones((len(values), 1))).fit(cov_type="cluster", cov_kwds={"groups": groups})
    # statsmodels' CR1 correction for one regressor is G/(G-1) * (N-1)/(N-1): the same as ours
    assert mean_interval(list(values), clusters=list(groups)).stderr == pytest.approx(float(fit.bse[0]), rel=1e-9)


def test_a_record_without_its_cluster_label_is_named():
    from ragexp.errors import DataError
    from ragexp.common.records import cluster_labels
    from ragexp.common.records import to_record

    rows = [{"query": "q1", "group": "doc-a"}, {"query": "q2", "group": 7}, {"query": "q3"}]
    records = [to_record(r, path="mine.jsonl", row=i) for i, r in enumerate(rows, start=1)]
    assert cluster_labels(records[:2], "group", dataset="records", source="mine.jsonl") == ["doc-a", 7]
    with pytest.raises(DataError) as e:
        cluster_labels(records, "group", dataset="records", source="mine.jsonl")
    assert str(e.value) == ("mine.jsonl, row 3, field 'group': expected a cluster label (stats.cluster_by='group') "
                            "in record '3', got none")


def _coverage(draw, clustered: bool, trials: int = 300) -> float:
    """Share of intervals (1,000 resamples each) that contain the true mean 0.5 over ``trials`` datasets."""
    rng = np.random.default_rng(21)
    hits = 0
    for t in range(trials):
        values, groups = draw(rng)
        iv = mean_interval(list(values), clusters=list(groups) if clustered else None, resamples=1000, seed=t)
        hits += iv.ci_low <= 0.5 <= iv.ci_high
    return hits / trials


def _independent(rng):
    return rng.beta(2, 2, size=60), np.arange(60)  # mean 0.5


def _in_clusters(rng):
    effect = np.repeat(rng.normal(0, 0.15, size=30), 4)  # 30 documents, 4 questions each, alike within one
    return 0.5 + effect + rng.normal(0, 0.05, size=120), np.repeat(np.arange(30), 4)


def test_intervals_cover_the_true_mean_about_as_often_as_they_claim():
    # 300 trials: a 95% interval's coverage estimate has a standard error of about 1.3 points
    assert 0.90 <= _coverage(_independent, clustered=False) <= 0.99
    # with clustered samples the plain bootstrap is far too narrow, the cluster bootstrap is not
    assert _coverage(_in_clusters, clustered=False) < 0.75
    assert 0.88 <= _coverage(_in_clusters, clustered=True) <= 0.99
