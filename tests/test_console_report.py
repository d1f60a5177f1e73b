"""The run's console table reads in ten seconds: the headline metrics first, a few rows per family, at most
25 rows, each row's scale where it is not 0–1, no cut-off beyond the passages a question got — and
nothing lost: every value not shown is named under the table and kept in the summary."""

from __future__ import annotations

import pytest

import ragexp
from ragexp.report.console import MAX_ROWS, family, layout, print_summary, scale


@pytest.fixture(scope="module")
def demo():
    return ragexp.evaluate("demo", log=False)


def test_the_demo_table_leads_with_the_headline_and_fits_one_screen(demo):
    summary = demo.summary
    assert summary["headline"] == ["answer_token_f1", "context_recall"]
    depth = summary["provenance"]["max_passages"]
    assert depth == 4  # the strong system's four passages
    keys = list(summary["metrics"])
    rows, hidden = layout(keys, summary["headline"], depth)
    shown = [k for _, k in rows]
    assert shown[:2] == ["answer_token_f1", "context_recall"] and rows[0][0] == "headline"
    assert len(rows) <= MAX_ROWS < len(keys)
    assert sorted(shown + hidden) == sorted(keys)  # every value is either shown or named under the table
    assert not any(k.endswith(("_at_5", "_at_10")) for k in shown)  # beyond the 4 passages: the k3 value repeated
    every, _ = layout(keys, summary["headline"], depth, show_all=True)  # report.all=true
    assert {k for _, k in every} == {k for k in keys if not k.endswith(("_at_5", "_at_10"))}


def test_scales_and_families_are_said():
    assert scale("bleu") == "0–100" and scale("answer_similarity") == "0–5" and scale("answer_token_f1") == ""
    assert scale("avg_latency") == scale("latency/generate") == "s"
    assert family("ndcg/ndcg_at_3") == "ranked" and family("answer_similarity") == "judge" and family("bleu") == "answer"


def test_the_printed_table_names_what_it_leaves_out(demo, capsys):
    s = demo.summary
    print_summary("t", s["metrics"], s["status_counts"], s["n_samples"], [], headline=s["headline"],
                  depth=s["provenance"]["max_passages"])
    out = capsys.readouterr().out
    assert "bleu (0–100)" in out and "report.all=true prints them" in out
    body = [line for line in out.splitlines() if line.startswith("│")]
    assert len(body) <= MAX_ROWS


def test_the_cut_off_line_is_said_only_when_deeper_cut_offs_were_left_out(demo, capsys):
    s = demo.summary
    print_summary("t", s["metrics"], s["status_counts"], s["n_samples"], [], headline=s["headline"],
                  depth=s["provenance"]["max_passages"])
    assert ("cut-offs beyond the 4 passages a question got at most add no passage: recall and hit rate repeat the "
            "last one, precision falls with k") in capsys.readouterr().out
    answers = {k: v for k, v in s["metrics"].items() if "/" not in k and k != "context_recall"}  # no cut-offs at all
    print_summary("t", answers, s["status_counts"], s["n_samples"], [], headline=["answer_token_f1"], depth=1)
    out = capsys.readouterr().out
    assert "more values in summary.json" in out and "cut-offs beyond" not in out and "1 passages" not in out


def test_the_recorded_answers_line_is_said_only_over_recorded_answers(compose):
    from ragexp.report.describe import provenance_lines
    from ragexp.workflow.runner import execute

    demo = execute(compose("retriever=bm25", "tracking.enabled=false"), save=False, show=False).summary
    assert demo["provenance"]["answers"] == "dataset"
    assert provenance_lines(demo["provenance"])[0].startswith("The answers are the ones recorded in the dataset")
    # SQuAD's questions with a retriever alone: no answers anywhere, so none were recorded either
    squad = execute(compose("dataset=squad2", "dataset.limit=20", "metric=retrieval", "retriever=bm25",
                            "tracking.enabled=false"), save=False, show=False).summary
    assert squad["provenance"]["answers"] is None
    assert not [line for line in provenance_lines(squad["provenance"]) if "answers" in line]


def test_a_wide_table_is_printed_whole_never_cut_to_an_ellipsis(capsys):
    # ExpertQA's judge run: a long people's-labels key beside a negative interval and 3-digit counts
    # made the table wider than 100 columns, and rich cut '465 / 489' to '465 / 4…' when not on a terminal
    from ragexp.stats.intervals import Interval

    key = "answer_consistency_binary_with_a_long_name/kappa"
    iv = Interval(mean=0.0199, stderr=0.04, ci_low=-0.0645, ci_high=0.1075, n=465, method="percentile")
    print_summary("t", {key: 0.0199, "judge/tokens_in": 229584.0}, {}, 489, [], intervals={key: iv})
    out = capsys.readouterr().out
    assert "…" not in out
    assert key in out and "[-0.0645, 0.1075]" in out and "465 / 489" in out and "229,584" in out


def test_a_pipeline_runs_table_shows_what_it_measured_not_its_batch_size(compose, capsys):
    """pipeline/batch_size is a setting the run used: in summary.json, not a row of the table (issue 42)."""
    from ragexp.workflow.runner import execute

    out = execute(compose("retriever=bm25", "tracking.enabled=false"), save=False, show=True)
    assert out.summary["latency_batch"] is not None  # the run did record it
    printed = capsys.readouterr().out
    assert "latency/retrieve" in printed and "pipeline/batch_size" not in printed, printed
