"""The pictures a run and a sweep carry: which metrics lead them, and that each PNG is drawn.

Every picture made here was also looked at (docs/tracking.md, "Comparing runs in the UI", shows them);
these tests pin the choices and that a figure is a real, readable PNG whatever its input.
"""

from __future__ import annotations

import pytest

from ragexp.report.plots import HEADLINE_MAX, heatmap, headline_metrics, histograms, metric_bars, run_plots
from ragexp.results.columns import status_column


def _png_size(path) -> tuple[int, int]:
    import matplotlib.image as mpimg

    image = mpimg.imread(path)
    return image.shape[1], image.shape[0]


def test_headline_leads_with_the_primary_then_one_key_per_metric():
    keys = ["token_f1", "hit_rate/hit_rate_at_1", "hit_rate/hit_rate_at_3", "mrr/mrr_at_1", "avg_latency", "bleu"]
    assert headline_metrics(keys, primary="mrr/mrr_at_1") == ["mrr/mrr_at_1", "token_f1", "hit_rate/hit_rate_at_1", "bleu", "hit_rate/hit_rate_at_3"]
    assert headline_metrics(keys, primary="mrr/mrr_at_1", limit=3) == ["mrr/mrr_at_1", "token_f1", "hit_rate/hit_rate_at_1"]
    assert headline_metrics(keys, objective="bleu")[0] == "bleu"
    assert "avg_latency" not in headline_metrics(keys)  # a latency is not a score
    assert headline_metrics(keys, primary="not_run")[0] == "token_f1"  # a primary the run lacks is passed over


def test_headline_is_at_most_the_limit():
    keys = [f"metric{i}" for i in range(20)]  # unknown keys are taken as [0, 1] scores
    assert len(headline_metrics(keys)) == HEADLINE_MAX


def _run(n: int = 12):
    values = [i / (n - 1) for i in range(n)]
    columns = {"id": [f"q{i}" for i in range(n)], "token_f1": values[:-1] + [None],
               status_column("token_f1"): ["ok"] * (n - 1) + ["undefined"],
               "bleu": [100 * v for v in values], status_column("bleu"): ["ok"] * n}
    mean = sum(values[:-1]) / (n - 1)
    summary = {"dataset": "toy", "n_samples": n, "metrics": {"token_f1": mean, "bleu": 50.0},
               "intervals": {"token_f1": {"mean": mean, "ci_low": mean - 0.1, "ci_high": mean + 0.1, "n": n - 1},
                             "bleu": {"mean": 50.0, "ci_low": 40.0, "ci_high": 60.0, "n": n}},
               "stats": {"confidence": 0.95, "primary": None}}
    return columns, summary


def test_a_run_gets_its_bar_chart_and_histograms(tmp_path):
    frame, summary = _run()
    made = run_plots(tmp_path, frame, summary)
    assert [p.name for p in made] == ["metrics.png", "histograms.png"]
    for p in made:
        width, height = _png_size(p)
        assert width > 500 and height > 150, (p.name, width, height)


def test_nothing_to_draw_draws_nothing(tmp_path):
    assert metric_bars({}, [], [], "t", tmp_path / "m.png") is None
    assert histograms({"id": ["a"]}, ["token_f1"], "t", tmp_path / "h.png") is None
    assert heatmap([], ["token_f1"], "t", tmp_path / "x.png") is None
    assert not list(tmp_path.iterdir())


def test_heatmap_with_a_failed_child_and_unequal_counts(tmp_path):
    rows = [("retriever=bm25", {"mrr/mrr_at_1": {"mean": 0.8, "n": 50}, "avg_latency": {"mean": 0.01, "n": 50}}),
            ("retriever=dense", {"mrr/mrr_at_1": {"mean": 0.9, "n": 45}, "avg_latency": {"mean": 0.2, "n": 50}}),
            ("retriever=hybrid", None)]  # a child that failed before logging: a blank row, not a gap
    path = heatmap(rows, ["mrr/mrr_at_1", "avg_latency"], "Sweep of 3 runs", tmp_path / "heatmap.png")
    width, height = _png_size(path)
    assert width > 400 and height > 150


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_runs_still_draw(tmp_path, n):
    frame, summary = _run(n + 1)
    assert len(run_plots(tmp_path, frame, summary)) == 2


def test_the_sweep_heatmap_shades_only_what_the_test_found(tmp_path):
    """Issue 42: a child the paired test cannot tell from its column's best is drawn neutral (hatched, '≈ best'), not
    coloured as a difference; a column no test covered is not shaded at all; only 'differs' cells sit on the scale."""
    from ragexp.report.plots import cell_kinds, cell_shade, sweep_heatmap

    board = {"metric": "answer_token_f1", "headline": ["answer_token_f1", "context_recall"], "rows": [
        {"run_id": "a", "run_name": "a", "label": "k=10", "best": True, "mean": 0.50,
         "also": {"context_recall": {"mean": 0.9, "best": False, "differs": True}}},
        {"run_id": "b", "run_name": "b", "label": "k=5", "differs": False, "mean": 0.49,
         "also": {"context_recall": {"mean": 0.95, "best": True, "differs": None}}},
        {"run_id": "c", "run_name": "c", "label": "k=1", "differs": True, "mean": 0.30,
         "also": {"context_recall": {"mean": 0.6, "best": False, "differs": True}}}]}
    summaries = {r: {"metrics": {"answer_token_f1": m, "context_recall": c, "token_f1": t},
                     "intervals": {"answer_token_f1": {"mean": m, "n": 50}, "context_recall": {"mean": c, "n": 50},
                                   "token_f1": {"mean": t, "n": 50}}}
                 for r, m, c, t in (("a", 0.50, 0.9, 0.7), ("b", 0.49, 0.95, 0.6), ("c", 0.30, 0.6, 0.4))}
    path = sweep_heatmap(board, summaries, "answer_token_f1", tmp_path / "heatmap.png")
    assert path is not None and _png_size(path)[0] > 400
    marks = [{"answer_token_f1": "best", "context_recall": "differs"},
             {"answer_token_f1": "noise", "context_recall": "best"},
             {"answer_token_f1": "differs", "context_recall": "differs"}]
    assert cell_kinds(["answer_token_f1", "context_recall", "token_f1"], marks) == [
        ["best", "differs", "not tested"], ["noise", "best", "not tested"], ["differs", "differs", "not tested"]]
    lo, hi = 0.30, 0.50
    assert cell_shade(0.50, lo, hi, True, "best") == 0.9
    assert cell_shade(0.49, lo, hi, True, "noise") is None  # neutral: no colour for a gap within the noise
    assert cell_shade(0.7, 0.4, 0.7, True, "not tested") is None
    assert cell_shade(0.30, lo, hi, True, "differs") == 0.15
    assert cell_shade(0.9, 0.6, 0.95, True, "differs") == pytest.approx(0.15 + 0.5 * (0.9 - 0.6) / (0.95 - 0.6))
    assert cell_shade(0.2, 0.1, 0.3, False, "differs") == pytest.approx(0.15 + 0.5 * (0.3 - 0.2) / (0.3 - 0.1))