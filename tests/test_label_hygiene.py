"""Labels are never lost silently (docs/judge-trust.md, "Label hygiene"): a JSON NaN label and a label key a
letter or two from a metric's stop the run in one line naming the file, row and field (exit 2 from the CLI);
a key for a metric the run does not compute is one warning line and the run goes on; labelled and
unlabelled records that differ by a field say the corrected mean assumes a random labelled sample."""

from __future__ import annotations

import json

import pytest

from ragexp.errors import DataError


def _write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows).replace('"__nan__"', "NaN"))
    return path


def _row(i, human=None, contexts=True):
    r = {"id": f"r{i}", "query": f"What about topic {i}?", "answer": f"Topic {i} is described here.",
         "contexts": [f"Topic {i} is described here at length."] if contexts else []}
    if human is not None:
        r["human"] = human
    return r


def _run(compose, server, path, **kw):
    from ragexp.workflow.runner import execute

    return execute(compose("dataset=records", f"dataset.path={path}", "metric=answer_consistency_binary",
                           "judge=openai_compatible", f"judge.api_base={server.url}", "judge.cache=false",
                           "stats.resamples=500"), save=False, show=False, **kw)


def test_a_json_nan_label_is_one_line_naming_row_and_field(compose, server, tmp_path):
    path = _write(tmp_path / "r.jsonl", [_row(0, {"answer_consistency_binary": 1}),
                                         _row(1, {"answer_consistency_binary": "__nan__"})])
    with pytest.raises(DataError) as err:
        _run(compose, server, path)
    assert str(err.value) == (f"{path}, row 2, field 'human.answer_consistency_binary': expected a number, or null "
                              f"for no label, got NaN (JSON has no NaN; a NaN label would be silently dropped)")
    assert server.calls == 0


def test_a_misspelled_label_key_names_the_closest_metric_before_any_judging(compose, server, tmp_path):
    path = _write(tmp_path / "r.jsonl", [_row(0, {"answer_consistency_binary": 1}),
                                         _row(1, {"answer_consistency_bianry": 0})])
    with pytest.raises(DataError) as err:
        _run(compose, server, path)
    assert str(err.value) == (f"{path}, row 2, field 'human.answer_consistency_bianry': label key "
                              f"'answer_consistency_bianry' matches no metric: did you mean 'answer_consistency_binary'? "
                              f"(its labels would be left unused)")
    assert server.calls == 0


def test_labels_of_another_metric_are_a_warning_and_the_run_goes_on(compose, server, tmp_path, capsys):
    path = _write(tmp_path / "r.jsonl", [_row(i, {"answer_consistency_binary": i % 2, "my_team_score": 3})
                                         for i in range(6)])
    outcome = _run(compose, server, path)
    assert outcome.summary["agreement"]["answer_consistency_binary"]["n"] == 6
    assert (f"ragexp: warning: label key 'my_team_score' (first in row 1 of {path}) matches no metric of this run: "
            f"its labels are not used") in capsys.readouterr().err


def test_labelled_records_selected_by_a_field_are_said_to_be_assumed_random(compose, server, tmp_path):
    rows = [_row(i, {"answer_consistency_binary": i % 2}) for i in range(10)] + \
           [_row(i, contexts=False) for i in range(10, 20)]
    entry = _run(compose, server, _write(tmp_path / "r.jsonl", rows)).summary["agreement"]["answer_consistency_binary"]
    assert entry["corrected"]["selection"] == "field contexts (present in 100% of labelled, 0% of unlabelled)"
    assert any("the corrected mean assumes the labelled records are a random sample" in w for w in entry["warnings"])


@pytest.mark.integration
@pytest.mark.parametrize("bad", [{"answer_consistency_binary": "__nan__"}, {"answer_consistency_bianry": 0}])
def test_the_cli_exits_2_with_one_line(tmp_path, bad):
    from cli import run_cli

    path = _write(tmp_path / "r.jsonl", [_row(0, {"answer_consistency_binary": 1}), _row(1, bad)])
    proc = run_cli("dataset=records", f"dataset.path={path}", "metric=answer_consistency_binary",
                   "judge=openai_compatible", "judge.api_base=http://127.0.0.1:9/v1", "tracking.enabled=false",
                   cwd=tmp_path, check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"ragexp: error: {path}, row 2, field 'human.")
