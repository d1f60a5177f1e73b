"""Agreement with people through the real run: the fake judge (tests/judge_server.py) answers from a
chosen confusion matrix against the human labels, and the run reports the κ that matrix implies;
dataset=expertqa logs the agreement keys, agreement.json, the confusion picture and the disagreements
table; compare reports the paired difference of two judges' agreement; the gate takes floors on it."""

from __future__ import annotations

import json

import pytest

from judge_server import Reply, blocks

N0, N1 = 16, 24  # people: 16 items unsupported (0), 24 supported (1)
# the judge: of the 16 zeros it calls 12 zero and 4 one; of the 24 ones, 6 zero and 18 one
CONFUSION = {(0, 0): 12, (0, 1): 4, (1, 0): 6, (1, 1): 18}


def _records(path):
    rows, verdicts, i = [], {}, 0
    for (human, judge), count in CONFUSION.items():
        for _ in range(count):
            i += 1
            answer = f"Statement number {i} about topic {i}."
            rows.append({"id": f"s{i}", "query": f"What about topic {i}?", "answer": answer,
                         "contexts": [f"A passage on topic {i}."], "human": {"answer_consistency_binary": human}})
            verdicts[answer] = bool(judge)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return verdicts


def _script(verdicts, flip_every: int = 0):
    def script(request):
        answer = blocks(request.first_user)["answer"][0].strip()
        verdict = verdicts[answer]
        number = int(answer.split()[2])
        if flip_every and number % flip_every == 0:
            verdict = not verdict
        return Reply(text=json.dumps({"fully_supported": verdict, "reason": f"scripted {verdict}"}))
    return script


def _overrides(server, path, *more):
    return ("dataset=records", f"dataset.path={path}", "metric=answer_consistency_binary", "judge=openai_compatible",
            f"judge.api_base={server.url}", "judge.cache=false", "stats.resamples=2000", *more)


def test_fake_judge_with_a_confusion_matrix_gives_the_kappa_it_implies(compose, server, tmp_path):
    from ragexp.workflow.runner import execute

    server.script = _script(_records(tmp_path / "labelled.jsonl"))
    outcome = execute(compose(*_overrides(server, tmp_path / "labelled.jsonl")), save=False, show=False)
    entry = outcome.summary["agreement"]["answer_consistency_binary"]
    n = N0 + N1
    po = (12 + 18) / n
    pe = (N0 / n) * ((12 + 6) / n) + (N1 / n) * ((4 + 18) / n)  # people's margins times the judge's
    assert entry["n"] == 40 and entry["kind"] == "binary"
    assert entry["statistics"]["kappa"]["mean"] == pytest.approx((po - pe) / (1 - pe), abs=1e-12)
    assert entry["statistics"]["percent_agreement"]["mean"] == pytest.approx(po, abs=1e-12)
    assert entry["confusion"] == [[12, 4], [6, 18]]  # rows people, columns judge
    iv = entry["statistics"]["kappa"]
    assert iv["ci_low"] < iv["mean"] < iv["ci_high"]
    # every record is labelled: the corrected mean is people's mean, the bias the judge's excess
    assert entry["corrected"]["mean"] == pytest.approx(N1 / n, abs=1e-12)
    assert entry["corrected"]["bias"] == pytest.approx((22 - 24) / n, abs=1e-12)


@pytest.mark.slow
def test_expertqa_run_logs_agreement_keys_artifacts_and_description(compose, server, tmp_path):
    from mlflow.tracking import MlflowClient

    from ragexp.workflow.runner import execute

    cfg = compose("dataset=expertqa", "dataset.limit=40", "metric=answer_consistency_binary",
                  "judge=openai_compatible", f"judge.api_base={server.url}", "judge.cache=false",
                  "stats.resamples=1000", "stats.cluster_by=question_id")
    outcome = execute(cfg, show=False)
    client = MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(outcome.summary["run_id"])
    m = run.data.metrics
    for key in ("agreement/answer_consistency_binary/n", "agreement/answer_consistency_binary/kappa",
                "agreement/answer_consistency_binary/kappa/ci_low", "agreement/answer_consistency_binary/ac1",
                "corrected/answer_consistency_binary", "corrected/answer_consistency_binary/ci_high"):
        assert key in m, key
    labelled = sum(1 for r in outcome.records if "answer_consistency_binary" in (r.human or {}))
    assert m["agreement/answer_consistency_binary/n"] == labelled
    names = {f.path for f in client.list_artifacts(run.info.run_id)}
    assert {"agreement.json", "agreement_disagreements.json", "agreement_confusion.png"} <= names
    tables = json.loads(run.data.tags["mlflow.loggedArtifacts"])
    assert {"path": "agreement_disagreements.json", "type": "table"} in tables
    note = run.data.tags["mlflow.note.content"]
    assert note.startswith("**judge agrees with people on answer_consistency_binary: κ ")
    table = json.loads((outcome.folder / "agreement_disagreements.json").read_text())
    rows = [dict(zip(table["columns"], r)) for r in table["data"]]
    assert rows and all(r["judge"] != r["human"] for r in rows)
    assert all(r["reason"] for r in rows)  # the judge's stated reason
    conf = json.loads((outcome.folder / "agreement.json").read_text())["answer_consistency_binary"]["confusion"]
    assert sum(map(sum, conf)) - conf[0][0] - conf[1][1] == len(rows)


@pytest.mark.slow
def test_compare_two_judges_paired_agreement_and_gate_floor(compose, server, tmp_path):
    from ragexp.cli.compare import compare_runs
    from ragexp.stats.agreement import paired_agreement
    from ragexp.workflow.runner import execute

    path = tmp_path / "labelled.jsonl"
    verdicts = _records(path)
    server.script = _script(verdicts)
    a = execute(compose(*_overrides(server, path), "run_name=judge-a"), show=False).summary
    server.script = _script(verdicts, flip_every=3)  # a worse judge: every third verdict flipped
    b = execute(compose(*_overrides(server, path), "run_name=judge-b"), show=False).summary
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    from ragexp.common.paths import conf_dir

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = hydra_compose("compare", overrides=[f"baseline={a['run_id']}", f"candidate={b['run_id']}",
                                                  f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}", "log=false",
                                                  "stats.resamples=2000", "stats.correct_with_labels=true",
                                                  "++gate.min.agreement.answer_consistency_binary.kappa=0.6"])
    result = compare_runs(cfg)
    d = result["agreement"]["answer_consistency_binary"]["agreement"]
    human = [h for (h, _), c in CONFUSION.items() for _ in range(c)]
    judge_a = [float(v) for v in verdicts.values()]
    judge_b = [float(not v if (i + 1) % 3 == 0 else v) for i, v in enumerate(verdicts.values())]
    ref = paired_agreement("m", human, judge_a, judge_b, resamples=2000)
    assert d["diff"] == pytest.approx(ref.diff, abs=1e-12) and d["diff"] < 0
    assert (d["ci_low"], d["ci_high"]) == (pytest.approx(ref.ci_low), pytest.approx(ref.ci_high))
    corrected = result["agreement"]["answer_consistency_binary"]["corrected"]
    assert corrected["diff"] == pytest.approx(0.0, abs=1e-12)  # the same answers: people's mean cannot move
    kappa_b = b["agreement"]["answer_consistency_binary"]["statistics"]["kappa"]["mean"]
    assert kappa_b < 0.6
    assert result["gate"]["failures"] == [
        f"gate: agreement/answer_consistency_binary/kappa = {kappa_b:.4f} in the candidate is under its floor 0.6"]


def test_leaderboard_ranks_corrected_means_and_tests_the_corrected_difference():
    import numpy as np
    from ppi_py import ppi_mean_ci

    from ragexp.core.leaderboard import Entry, rank

    rng = np.random.default_rng(7)
    n, labelled = 400, 120
    people = {"a": (rng.random(n) < 0.6).astype(float), "b": (rng.random(n) < 0.75).astype(float)}
    judged = {k: np.where(rng.random(n) < 0.8, v, 1 - v) for k, v in people.items()}
    ids = [f"q{i}" for i in range(n)]
    entries = []
    for name in ("a", "b"):
        y, yh = people[name], judged[name]
        lo, hi = ppi_mean_ci(y[:labelled], yh[:labelled], yh[labelled:], alpha=0.05)
        entries.append(Entry(name, name, "FINISHED", interval={"mean": float((lo[0] + hi[0]) / 2), "n": n},
                             values=dict(zip(ids, map(float, yh))),
                             human={i: float(v) for i, v in zip(ids[:labelled], y[:labelled])}))
    board = rank(entries, metric="answer_consistency_binary", corrected=True, resamples=200)
    assert board["corrected_with_labels"] is True and board["best"] == "b"
    row = next(r for r in board["rows"] if r["run_name"] == "a")
    dy = people["a"][:labelled] - people["b"][:labelled]  # candidate a minus the best, b
    dj = judged["a"] - judged["b"]
    lo, hi = ppi_mean_ci(dy, dj[:labelled], dj[labelled:], alpha=0.05)
    assert (row["diff_ci_low"], row["diff_ci_high"]) == (pytest.approx(lo[0], abs=1e-9), pytest.approx(hi[0], abs=1e-9))
    assert row["test"].startswith("ppi++") and row["differs"] is True


@pytest.mark.slow
def test_evaluate_maps_a_column_to_human_labels_and_splits(server, tmp_path):
    import ragexp

    verdicts = _records(tmp_path / "labelled.jsonl")
    server.script = _script(verdicts)
    rows = [json.loads(line) for line in (tmp_path / "labelled.jsonl").read_text().splitlines()]
    table = [{"question": r["query"], "response": r["answer"], "passages": r["contexts"],
              "grader": r["human"]["answer_consistency_binary"]} for r in rows]
    columns = {"query": "question", "answer": "response", "contexts": "passages",
               "human.answer_consistency_binary": "grader"}
    overrides = [f"judge.api_base={server.url}", "judge.cache=false", "stats.resamples=500"]
    result = ragexp.evaluate(table, metric="answer_consistency_binary", judge="openai_compatible",
                             overrides=overrides, log=False, columns=columns)
    entry = result.summary["agreement"]["answer_consistency_binary"]
    assert entry["n"] == 40 and entry["confusion"] == [[12, 4], [6, 18]]
    dev = ragexp.evaluate(table, metric="answer_consistency_binary", judge="openai_compatible",
                          overrides=[*overrides, "dataset.split=dev"], log=False, columns=columns)
    assert dev.summary["n_samples"] == 20  # half of each label class (16 zeros, 24 ones)
    assert sum(map(sum, dev.summary["agreement"]["answer_consistency_binary"]["confusion"])) == 20


@pytest.mark.integration
def test_a_run_under_its_agreement_floor_exits_1_naming_it(tmp_path, data_dir):
    from cli import run_cli

    args = (f"data_dir={data_dir}", "dataset=halueval", "dataset.limit=60", "metric=memory", "stats.resamples=500",
            "tracking.enabled=false", "progress=false")
    ok = run_cli(*args, "gate.min.agreement.keyword_verdict.kappa=0.1", cwd=tmp_path)
    assert "the keyword verdict agrees with `label`: κ" in ok.stdout
    failed = run_cli(*args, "gate.min.agreement.keyword_verdict.kappa=0.999", cwd=tmp_path, check=False)
    assert failed.returncode == 1
    line = next(x for x in failed.stderr.splitlines() if "agreement/keyword_verdict/kappa" in x)
    assert line.startswith("gate: agreement/keyword_verdict/kappa = ") and line.endswith("is under its floor 0.999")
