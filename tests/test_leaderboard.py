"""The sweep leaderboard: a real multirun of the demo, and the ranking arithmetic on named entries."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from cli import parent_and_children, run_cli
from ragexp.stats.paired import holm, paired_compare
from ragexp.core.leaderboard import Entry, choose_metric, higher_is_better, rank

#: the sweeps here are read for their leaderboard: no per-sample traces (tests/test_traces.py checks those; they
#: are about half of a demo sweep's CPU time), and no pictures where none is looked at
NO_TRACES = ("tracking.traces=0",)


@pytest.mark.integration
def test_demo_sweep_ranks_strong_first_and_weak_differs(tmp_path):
    proc = run_cli("-m", "dataset.system=strong,weak", "stats.primary=answer_token_f1", "stats.resamples=2000",
                   "progress=false", *NO_TRACES, cwd=tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client, parents, children = parent_and_children(uri)
    assert len(parents) == 1 and len(children) == 2
    parent = parents[0].info.run_id
    artifacts = {a.path for a in client.list_artifacts(parent)}
    assert {"leaderboard.json", "leaderboard.png"} <= artifacts
    board = json.loads(open(client.download_artifacts(parent, "leaderboard.json", str(tmp_path))).read())
    assert board["metric"] == "answer_token_f1" and board["higher_is_better"] is True
    best, weak = board["rows"]
    assert best["best"] and "strong" in best["run_name"] and "weak" in weak["run_name"]
    assert weak["differs"] is True and weak["p_holm"] < 0.05 and weak["diff_vs_best"] < 0
    # the means and intervals are the children's own, as each logged them
    by_name = {c.info.run_name: c.data.metrics for c in children}
    for row in board["rows"]:
        logged = by_name[row["run_name"]]
        assert row["mean"] == pytest.approx(logged["answer_token_f1"])
        assert (row["ci_low"], row["ci_high"]) == pytest.approx((logged["answer_token_f1/ci_low"],
                                                                logged["answer_token_f1/ci_high"]))
        assert row["n"] == logged["answer_token_f1/n"] == 50
    # the PNG is a real image
    png = client.download_artifacts(parent, "leaderboard.png", str(tmp_path))
    assert open(png, "rb").read(8) == b"\x89PNG\r\n\x1a\n"
    # printed at the end of the multirun too
    assert "sweep leaderboard · answer_token_f1" in proc.stdout and "differs" in proc.stdout
    assert "the suite's first metric" not in proc.stdout  # the metric was named: no hint


@pytest.mark.integration
def test_a_sweep_that_names_no_metric_says_which_one_ranks_it_and_how_to_choose(tmp_path):
    # also, a process run of a clustered board: the children's cluster column (the demo's 2 languages) is read back
    # from their per-sample tables and the paired test is over those 2 clusters, whose floor is p 0.5
    proc = run_cli("-m", "dataset.system=strong,weak", "metric=answer", "stats.resamples=1000", "progress=false",
                   "stats.cluster_by=lang", *NO_TRACES, "tracking.plots=false", cwd=tmp_path)
    out = " ".join(proc.stdout.split())
    assert "sweep leaderboard · answer_token_f1" in proc.stdout  # the suite's headline, not its first metric
    assert ("Ranked by answer_token_f1, the suite's first headline metric; to rank by another, add "
            "stats.primary=<metric key>.") in out
    assert ("The intervals and the paired tests are clustered by lang: each test is over its 2 clusters, resampled "
            "and sign-flipped whole, not over the questions; with 2 clusters no p-value can fall below 0.5") in out
    assert "tested over the clusters of lang" in out and "within noise │" in out and "differs │" not in out


@pytest.mark.integration
def test_a_board_ranked_where_two_systems_look_alike_says_the_headline_metrics_tell_them_apart(tmp_path):
    proc = run_cli("-m", "dataset.system=strong,weak", "stats.primary=token_precision", "stats.resamples=1000",
                   "progress=false", *NO_TRACES, "tracking.plots=false", cwd=tmp_path)
    out = " ".join(proc.stdout.split())
    assert "sweep leaderboard · token_precision" in out and "within noise" in out
    # the default suite's headline metrics stand beside the ranking one, and the note says where they differ
    assert "answer_token_f1" in out and "context_recall" in out
    assert ("dataset.system=weak is within noise of the best on token_precision, but differs from the best on "
            "answer_token_f1") in out


def _entry(name, values, higher=True):
    vals = {str(i): float(v) for i, v in enumerate(values)}
    mean = sum(values) / len(values)
    return Entry(run_id=name, name=name, status="FINISHED", values=vals,
                 interval={"mean": mean, "stderr": stats.sem(values), "ci_low": mean - 0.1, "ci_high": mean + 0.1,
                           "n": len(values), "method": "percentile"})


A = [0.9, 0.8, 0.7, 0.95, 0.85, 0.9, 0.75, 0.8, 0.9, 0.7]
B = [0.88, 0.82, 0.69, 0.93, 0.86, 0.9, 0.74, 0.81, 0.88, 0.7]  # a hair below A: not distinguishable
C = [0.2, 0.3, 0.1, 0.25, 0.4, 0.3, 0.2, 0.1, 0.3, 0.2]  # far below


def test_rank_orders_compares_pairs_and_holm_adjusts():
    board = rank([_entry("c", C), _entry("a", A), _entry("b", B)], metric="m", resamples=2000)
    assert [r["run_name"] for r in board["rows"]] == ["a", "b", "c"] and board["best"] == "a"
    raw = [paired_compare(A, B, resamples=2000).p_value, paired_compare(A, C, resamples=2000).p_value]
    assert [board["rows"][1]["p_value"], board["rows"][2]["p_value"]] == pytest.approx(raw)
    assert [board["rows"][1]["p_holm"], board["rows"][2]["p_holm"]] == pytest.approx(holm(raw))
    assert board["rows"][1]["differs"] is False and board["rows"][2]["differs"] is True
    assert board["rows"][2]["diff_vs_best"] == pytest.approx(sum(C) / 10 - sum(A) / 10)


def test_rank_pairs_on_shared_ids_only_and_lower_is_better():
    a, c = _entry("a", A), _entry("c", C)
    del c.values["0"]  # a sample missing (not ok) in one run is left out of the pairing, and counted
    board = rank([a, c], metric="avg_latency", higher=False, resamples=2000)
    assert board["best"] == "c"  # lower is better
    assert board["rows"][1]["n_paired"] == 9


def test_a_child_without_the_metric_is_listed_not_dropped():
    failed = Entry(run_id="x", name="x", status="FAILED", problem="no summary.json (the job failed before logging)")
    board = rank([_entry("a", A), failed], metric="m", resamples=2000)
    assert board["rows"][-1]["run_name"] == "x" and board["rows"][-1]["mean"] is None
    assert "failed" in board["rows"][-1]["note"]


def test_a_run_level_metric_is_said_to_have_one_value_per_run_not_too_few_shared_ids():
    # keyword_verdict_f1 is dataset level: each run has one value and no per-sample values, as compare says
    def run(name, mean):
        return Entry(run_id=name, name=name, status="FINISHED", interval={"mean": mean, "n": 46})

    board = rank([run("strong", 0.9048), run("weak", 0.1538)], metric="keyword_verdict_f1", resamples=500)
    assert board["rows"][1]["note"] == "not compared (one value per run, nothing to pair)"
    assert "p_holm" not in board["rows"][1] and "differs" not in board["rows"][1]
    one = rank([_entry("a", A), Entry(run_id="b", name="b", status="FINISHED", interval={"mean": 0.1, "n": 1},
                                      values={"0": 0.1})], metric="m", resamples=500)
    assert one["rows"][1]["note"] == "only 1 sample ids with an ok value in both runs: not compared"


def test_which_metric_and_direction():
    summaries = [{"metrics": {"token_precision": 0.1, "hit_rate/hit_rate_at_1": 0.9}}]
    assert choose_metric("ndcg/ndcg_at_10", "mrr/mrr_at_5", summaries) == "ndcg/ndcg_at_10"
    assert choose_metric(None, "mrr/mrr_at_5", summaries) == "mrr/mrr_at_5"
    assert choose_metric("f1", None, summaries) == "keyword_verdict_f1"  # an old name: the key actually ranked
    assert choose_metric(None, "mrr/k5", summaries) == "mrr/mrr_at_5"
    assert choose_metric(None, None, summaries) == "token_precision"
    headed = [{"metrics": {"token_precision": 0.1, "answer_token_f1": 0.5}, "headline": ["answer_token_f1"]}]
    assert choose_metric(None, None, headed) == "answer_token_f1"  # the suite's headline before its first metric
    assert higher_is_better("ndcg/ndcg_at_10") and not higher_is_better("avg_latency")
    assert not higher_is_better("latency/generate")


def test_a_key_in_a_run_name_never_reaches_the_board():
    from ragexp.common.secrets import redact

    leaked = _entry("dataset.system=weak,judge.api_key=sk-abcdefabcdef1234567890", C)
    board = redact(rank([_entry("dataset.system=strong,judge.api_key=sk-abcdefabcdef1234567890", A), leaked],
                        metric="m", resamples=500))
    assert "sk-abcdef" not in json.dumps(board) and board["rows"][0]["run_name"].endswith("api_key=***")


def test_jobs_with_results_but_no_mlflow_run_are_counted(tmp_path):
    from ragexp.tracking.leaderboard import unlogged_jobs

    for job in ("0", "1", "2"):
        (tmp_path / job).mkdir()
        (tmp_path / job / "summary.json").write_text("{}")
    assert unlogged_jobs(tmp_path, children=[object(), object(), object()]) == []
    assert len(unlogged_jobs(tmp_path, children=[object(), object()])) == 3
    assert unlogged_jobs(tmp_path / "absent", children=[]) == []


def test_recorded_answers_are_shared_only_when_the_jobs_answers_are_equal(tmp_path):
    """Issue 42 item 1: ``-m retriever=bm25 dataset.system=strong,weak`` keeps each system's recorded answers,
    which differ; the board must neither say the answer metrics cannot differ nor rank away from them. A
    top_k sweep of one system keeps one set of answers: that board ranks on what the retrieval can change."""
    import ragexp

    def summary(system, k):
        return ragexp.evaluate("demo", log=False, retriever="bm25", overrides=(
            f"dataset.system={system}", f"retriever.top_k={k}", "stats.resamples=200", "progress=false")).summary

    strong, weak, strong_k1 = summary("strong", 3), summary("weak", 3), summary("strong", 1)
    for s in (strong, weak, strong_k1):
        assert s["provenance"]["contexts"] == "pipeline" and s["provenance"]["answers"] == "dataset"
    assert strong["answers_digest"] == strong_k1["answers_digest"] != weak["answers_digest"]
    assert strong["headline"][0] == "answer_token_f1"
    from ragexp.core.leaderboard import answers_recorded

    assert not answers_recorded([strong, weak])
    assert choose_metric(None, None, [strong, weak]) == "answer_token_f1"  # the answers differ: rank on them
    assert answers_recorded([strong, strong_k1])
    assert choose_metric(None, None, [strong, strong_k1]) != "answer_token_f1"  # equal answers: the retrieval


def test_the_printed_board_wraps_labels_between_overrides_and_keeps_every_column(capsys):
    """Piped (120 columns): a long label wrapped inside a word ('dataset.syst' / 'em=strong') and the other headline
    metric's column was cut ('context_r'); now labels break after a comma between overrides, columns print whole."""
    from ragexp.report.console import print_leaderboard

    labels = [f"retriever=bm25,retriever.top_k={k},dataset.system={s},compressor=sentence" for k in (1, 3)
              for s in ("strong", "weak")]
    rows = [{"run_id": str(i), "run_name": lab, "label": lab, "mean": 0.5 - i / 10, "ci_low": 0.4 - i / 10,
             "ci_high": 0.6 - i / 10, "n": 50, "best": i == 0, "differs": None if i == 0 else True,
             "diff_vs_best": None if i == 0 else -i / 10, "p_holm": None if i == 0 else 0.001,
             "also": {"context_recall": {"mean": 0.84, "best": i == 0, "differs": None if i == 0 else False}}}
            for i, lab in enumerate(labels)]
    print_leaderboard({"metric": "answer_token_f1", "rows": rows, "headline": ["answer_token_f1", "context_recall"]})
    out = capsys.readouterr().out
    assert "context_recall" in out and "0.8400 within noise" in out, out
    words = {w.strip("│ ,") for line in out.splitlines() for w in line.split()}
    for label in labels:
        for override in label.split(","):
            assert override in words, (override, out)


def test_a_board_of_clustered_runs_tests_over_its_clusters_and_says_so(capsys):
    """LoCoMo's runs resample 10 conversations for their intervals; the board's paired tests are over the same
    clusters (G11's walkthrough: every gap showed p 0.0006 with the questions taken as independent), and the note
    says how many and the smallest p-value they allow."""
    from ragexp.core.leaderboard import clusters_note
    from ragexp.report.console import print_leaderboard

    ids = [f"q{i}" for i in range(30)]
    conv = {i: f"conv{k % 10}" for k, i in enumerate(ids)}  # 10 conversations of 3 questions
    best = Entry("a", "k=5", "FINISHED", {"mean": 0.6, "n": 30}, {i: 0.6 + 0.01 * (k % 7) for k, i in enumerate(ids)},
                 cluster_by="conversation_id", clusters=conv)
    other = Entry("b", "k=1", "FINISHED", {"mean": 0.4, "n": 30}, {i: 0.4 + 0.02 * (k % 5) for k, i in enumerate(ids)},
                  cluster_by="conversation_id", clusters=conv)
    board = rank([best, other], metric="locomo_evidence_recall")
    row = board["rows"][1]
    totals = [sum(other.values[i] - best.values[i] for i in ids if conv[i] == f"conv{g}") for g in range(10)]
    theirs = stats.permutation_test((np.array(totals),), np.mean, permutation_type="samples", n_resamples=10_000,
                                    vectorized=True).pvalue  # every flip of the 10 conversations' totals: exact
    assert (row["test"], row["clusters"]) == ("cluster permutation", 10)
    assert row["p_value"] == pytest.approx(theirs, abs=1e-12) and row["p_value"] >= 2 / 2 ** 10
    assert board["cluster_by"] == "conversation_id" and "10 clusters of conversation_id" in board["comparison"]
    note = clusters_note(board, [{"stats": {"cluster_by": "conversation_id"}}] * 2)
    assert note.startswith("The intervals and the paired tests are clustered by conversation_id: each test is over "
                           "its 10 clusters") and "no p-value can fall below 0.002" in note
    assert clusters_note(rank([best, other], metric="x"), [{"stats": {"cluster_by": None}}, {}]) is None
    # a PPI++ (judge-corrected) test is over the labelled questions: the note does not claim it for the clusters
    ppi = {"rows": [{"best": True}, {"p_value": 0.01, "test": "ppi++ (corrected difference)"}]}
    assert "the paired tests take the questions as independent" in clusters_note(ppi, [{"stats": {"cluster_by": "c"}}])
    mixed = {"cluster_by": "c", "rows": [{"best": True}, {"p_value": 0.01, "clusters": 30}, {"p_value": 0.2}]}
    assert "(but 1 judge-corrected comparison(s), PPI++, take the labelled questions as independent)" in \
        clusters_note(mixed, [{"stats": {"cluster_by": "c"}}])
    plain = rank([Entry("a", "k=5", "FINISHED", best.interval, best.values),
                  Entry("b", "k=1", "FINISHED", other.interval, other.values)], metric="x")
    assert plain["comparison"] == "paired over sample ids, Holm-adjusted" and "clusters" not in plain["rows"][1]
    assert plain["rows"][1]["p_value"] < row["p_value"]  # 30 independent questions claim more than 10 conversations
    print_leaderboard({"metric": "locomo_evidence_recall", "rows": board["rows"], "clusters": note})
    assert "each test is over its 10 clusters" in " ".join(capsys.readouterr().out.split())