"""scoring.score's fast paths give what each metric gives alone: metrics sharing a first step on a
record (MetricInfo.prepare/finish: the token metrics' per-passage best scores) scored together on
real records, and a metric's return value turned into a Score (shared ok Scores, -0.0, NaN, None)."""

from __future__ import annotations

import math

import pytest

from ragexp.metrics.base import Score, register
from ragexp.metrics.token import token_f1, token_precision, token_recall
from ragexp.core.scoring import _as_score, build_metrics, check_fields, score


@pytest.fixture(scope="module")
def records(data_dir):
    # BM25 over SQuAD's paragraphs: real questions, ten retrieved passages, the gold passage, SQuAD's answers
    from squad_bm25 import squad_bm25_run

    from ragexp.common.records import to_record

    fields = ("id", "query", "contexts", "gt_contexts", "reference_answers")
    return [to_record({f: r[f] for f in fields}, path="squad", row=i)
            for i, r in enumerate(squad_bm25_run(str(data_dir), 200), start=1)]


@pytest.mark.parametrize("against", ["reference_answers", "gt_contexts"])
def test_token_metrics_scored_together_equal_each_alone(records, against):
    cfg = {name: {"_target_": f"ragexp.metrics.token.{name}", "against": against}
           for name in ("token_precision", "token_recall", "token_f1")}
    specs, _ = check_fields(build_metrics(cfg)[0], records, "squad")
    assert {s.info.prepare for s in specs} == {specs[0].info.prepare} is not None  # one shared step
    scores = score(records, specs)
    for fn in (token_precision, token_recall, token_f1):
        alone = [fn(r.contexts, getattr(r, against), against=against) for r in records]
        together = [s.value for s in scores[fn.__name__]]
        assert together == alone
        assert len(set(together)) > 20  # real spread, not a constant


@pytest.mark.parametrize("family", ["answer", "context"])
def test_answer_and_context_metrics_scored_together_equal_each_alone(records, family):
    # answers of three kinds: a reference itself, a piece of a retrieved passage, empty (a miss)
    import dataclasses

    from ragexp.metrics import answer, context

    rows = [dataclasses.replace(r, answer=(r.reference_answers[0], r.contexts[1][:60], "")[i % 3])
            for i, r in enumerate(records)]
    names = {"answer": ["exact_match", "answer_token_f1", "bleu", "rouge1", "rouge2", "rougeL"],
             "context": ["context_precision", "context_recall", "context_f1"]}[family]
    module = answer if family == "answer" else context
    cfg = {n: {"_target_": f"{module.__name__}.{n}", **({"k": [1, 3, None]} if family == "context" else {})}
           for n in names}
    specs, _ = check_fields(build_metrics(cfg, "rouge_sentence")[0], rows, "squad")
    assert len({s.info.prepare for s in specs}) == 1 and specs[0].info.prepare is not None  # one shared step
    scores = score(rows, specs)
    for spec in specs:
        fn = getattr(module, spec.info.name)
        alone = [fn(*(getattr(r, f) for f in spec.fields), **spec.call_options()) for r in rows]
        assert [s.value for s in scores[spec.key]] == alone, spec.key
        assert len(set(alone)) > 1, spec.key  # values of both kinds at least, not a constant


def test_token_metrics_rules_survive_the_shared_step():
    specs, _ = build_metrics({n: {"_target_": f"ragexp.metrics.token.{n}"}
                              for n in ("token_precision", "token_recall", "token_f1")})
    from ragexp.common.records import to_record

    rows = [to_record(raw, path="x.jsonl", row=i) for i, raw in enumerate([
        {"query": "q", "contexts": [], "reference_answers": ["paris"]},            # nothing retrieved: 0
        {"query": "q", "contexts": ["paris", ""], "reference_answers": ["paris"]},  # an empty passage counts
        {"query": "q", "contexts": ["paris"], "reference_answers": ["", "the"]},   # no token in any truth
        {"query": "q", "contexts": ["paris"]},                                      # no reference field
    ], start=1)]
    out = score(rows, specs)
    assert [s.value for s in out["token_f1"][:2]] == [0.0, (1 + 0) / 2]
    assert [s.status for s in out["token_precision"][2:]] == ["undefined", "missing_field"]


def test_as_score_shares_ok_scores_but_keeps_every_value():
    assert _as_score(0.25) == Score(0.25) and _as_score(0.25) is _as_score(0.25)
    negative_zero = _as_score(-0.0)
    assert negative_zero.value == 0.0 and math.copysign(1.0, negative_zero.value) == -1.0
    assert math.copysign(1.0, _as_score(0.0).value) == 1.0
    assert _as_score(math.nan).status == "undefined" and _as_score(None).status == "undefined"
    assert _as_score(1).value == 1.0 and type(_as_score(1).value) is float
    missing = Score.missing("no answer")
    assert _as_score(missing) is missing


def test_scoring_on_two_processes_gives_the_scores_of_one(records):
    # the default suite over real records, scored in parts on two forked processes and in this one
    import warnings

    from ragexp.common.paths import compose

    cfg = compose(overrides=["dataset=demo"])
    specs, all_that_apply = build_metrics(cfg.metric, cfg.matcher)
    specs, _ = check_fields(specs, records, "squad", all_that_apply)
    seen = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork beside pytest's threads
        two = score(records, specs, progress=lambda items: (seen.append(r) or r for r in items), processes=2)
    one = score(records, specs, processes=1)
    assert list(two) == list(one) and len(one) > 20
    assert two == one  # every Score: value, status and reason, in record order
    assert seen == records  # the progress wrapper saw every record once


def scoring_pid(answer: str) -> float:
    """The id of the process that scored the record: where a run's scoring happened."""
    import os

    return float(os.getpid())


@pytest.fixture
def pid_metric():
    """``scoring_pid`` registered for one test only: other tests walk every registered metric."""
    from ragexp.metrics import base

    register(fields=("answer",))(scoring_pid)
    yield
    del base.REGISTRY["scoring_pid"], base._BY_FUNCTION[scoring_pid]


@pytest.mark.parametrize("processes", [1, 2])
def test_a_run_in_memory_scores_on_the_processes_it_is_given(processes, pid_metric):
    # execution.processes is the number of scoring processes for a run held in memory too (it was followed by
    # streamed runs only, so a run of 5,000 records forked whatever it was told): one → this process alone
    import os
    import warnings

    import ragexp
    from ragexp.common.processes import can_fork

    rows = [{"id": str(i), "query": "q", "answer": f"a {i}", "reference_answers": ["a"]} for i in range(5000)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+: fork beside pytest's threads
        result = ragexp.evaluate(rows, log=False, overrides=["+metric.scoring_pid._target_=test_scoring_shared.scoring_pid",
                                                             f"execution.processes={processes}"])
    pids = set(result.per_sample["scoring_pid"])
    if processes == 1 or not can_fork():
        assert pids == {float(os.getpid())}
    else:
        assert len(pids) == 2 and float(os.getpid()) not in pids
