"""python -m ragexp.compare and the regression gate: the pairing's documented behaviour on golden
tables, agreement with ranx's compare on a real BM25-vs-dense SQuAD run, and the real commands."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cli import run_cli

from ragexp.core.pairing import RunTable, compare_tables
from ragexp.errors import ConfigError, DataError
from ragexp.cli import add_override_prefix
from ragexp.core.gate import drop_failures, flat_conditions, floor_failures, read_gate
from ragexp.results.columns import status_column
from ragexp.stats.paired import paired_compare


def table(name: str, rows: list[tuple], keys: tuple[str, ...], digest: str | None = "q") -> RunTable:
    """rows: (id, query, {key: value or (value, status)})."""
    columns = ["id", "query", "answer"] + [c for k in keys for c in (k, status_column(k))]
    data = []
    for sid, query, values in rows:
        row = [sid, query, f"answer to {sid}"]
        for k in keys:
            v = values.get(k)
            value, status = v if isinstance(v, tuple) else (v, "ok")
            row += [value, status]
        data.append(row)
    return RunTable(name=name, columns=columns, rows=data, run_id=f"id-{name}", questions_digest=digest)


QUERIES = {f"s{i}": f"question {i}?" for i in range(1, 8)}

BASELINE = table("base", [
    ("s1", QUERIES["s1"], {"token_f1": 0.2, "bleu": 10.0}),
    ("s2", QUERIES["s2"], {"token_f1": 0.4, "bleu": 20.0}),
    ("s3", QUERIES["s3"], {"token_f1": 0.6, "bleu": 30.0}),
    ("s4", QUERIES["s4"], {"token_f1": 0.5, "bleu": 40.0}),
    ("s5", QUERIES["s5"], {"token_f1": 0.1, "bleu": 50.0}),
    ("s6", QUERIES["s6"], {"token_f1": 0.9, "bleu": 60.0}),
], ("token_f1", "bleu"))

CANDIDATE = table("cand", [
    ("s1", QUERIES["s1"], {"token_f1": 0.3, "exact_match": 0.0}),
    ("s2", QUERIES["s2"], {"token_f1": 0.4, "exact_match": 1.0}),
    ("s3", QUERIES["s3"], {"token_f1": (None, "timeout"), "exact_match": 1.0}),
    ("s4", QUERIES["s4"], {"token_f1": 0.8, "exact_match": 0.0}),
    ("s5", QUERIES["s5"], {"token_f1": 0.0, "exact_match": 1.0}),
    ("s7", QUERIES["s7"], {"token_f1": 1.0, "exact_match": 1.0}),  # not in the baseline
], ("token_f1", "exact_match"))


def test_pairing_golden():
    out = compare_tables(BASELINE, CANDIDATE, min_match_fraction=0.8)
    # s6 only in the baseline, s7 only in the candidate: counted, left out
    assert out["samples"] == {"matched": 5, "only_in_baseline": 1, "only_in_candidate": 1, "questions_digest": "q"}
    f1 = out["metrics"]["token_f1"]
    # s3 timed out in the candidate: left out of this metric only, and counted
    assert (f1["n"], f1["excluded"], f1["excluded_by"]) == (4, 1, {"candidate timeout": 1})
    assert f1["mean_baseline"] == pytest.approx((0.2 + 0.4 + 0.5 + 0.1) / 4)
    assert f1["mean_candidate"] == pytest.approx((0.3 + 0.4 + 0.8 + 0.0) / 4)
    assert f1["diff"] == pytest.approx((0.1 + 0 + 0.3 - 0.1) / 4)
    assert (f1["better"], f1["ties"], f1["worse"]) == (2, 1, 1)
    alone = paired_compare([0.2, 0.4, 0.5, 0.1], [0.3, 0.4, 0.8, 0.0])
    assert f1["p_value"] == alone.p_value and f1["test"] == "permutation"
    # a metric present in one run only is listed, not dropped
    assert out["metrics"]["bleu"]["only_in"] == "baseline" and "p_value" not in out["metrics"]["bleu"]
    assert out["metrics"]["exact_match"]["only_in"] == "candidate"
    assert list(out["metrics"]) == ["token_f1", "bleu", "exact_match"]
    # Holm over the one metric compared is the p-value itself
    assert f1["p_holm"] == f1["p_value"]
    # the regressed samples of token_f1: s5 (0.1 -> 0.0) only
    assert [(r["id"], r["baseline"], r["candidate"]) for r in out["regressions"]["token_f1"]] == [("s5", 0.1, 0.0)]


def test_too_few_shared_ids_are_refused_with_the_counts():
    with pytest.raises(DataError, match=r"only 5 sample ids are in both runs .*has 6.*has 6.*at least 6"):
        compare_tables(BASELINE, CANDIDATE)  # 5 of 6 < 0.9


def test_different_questions_are_refused():
    other = RunTable(**{**CANDIDATE.__dict__, "questions_digest": "other"})
    with pytest.raises(DataError, match="different questions.*digest q.*digest other"):
        compare_tables(BASELINE, other, min_match_fraction=0.5)
    # without digests (older runs) a shared id asked differently is caught too
    renamed = table("cand2", [(sid, "another question" if sid == "s2" else q, {"token_f1": 0.5})
                              for sid, q in QUERIES.items()], ("token_f1",), digest=None)
    with pytest.raises(DataError, match="sample id 's2' has another query"):
        compare_tables(BASELINE, renamed, min_match_fraction=0.5)


def test_duplicate_ids_are_refused():
    dup = table("dup", [("s1", "q", {"token_f1": 0.1}), ("s1", "q", {"token_f1": 0.2})], ("token_f1",))
    with pytest.raises(DataError, match="row 2: sample id 's1' appears twice"):
        compare_tables(dup, dup)


def test_a_run_against_itself_differs_by_nothing():
    out = compare_tables(BASELINE, BASELINE)
    for key in ("token_f1", "bleu"):
        r = out["metrics"][key]
        assert (r["diff"], r["p_value"], r["p_holm"], r["verdict"]) == (0, 1, 1, "no significant difference")
        assert r["ties"] == 6
    assert out["regressions"] == {"token_f1": [], "bleu": []}


def test_direction_comes_from_the_registry():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.5, 1.0, 60)
    rows_b = [(f"s{i}", f"q{i}", {"avg_latency": float(v), "answer_token_f1": float(v) / 2}) for i, v in enumerate(base)]
    rows_c = [(f"s{i}", f"q{i}", {"avg_latency": float(v) + 0.5, "answer_token_f1": float(v) / 2 + 0.2})
              for i, v in enumerate(base)]
    keys = ("avg_latency", "answer_token_f1")
    out = compare_tables(table("b", rows_b, keys), table("c", rows_c, keys))
    lat, f1 = out["metrics"]["avg_latency"], out["metrics"]["answer_token_f1"]
    assert lat["higher_is_better"] is False and lat["verdict"] == "worse" and lat["worse"] == 60
    assert f1["higher_is_better"] is True and f1["verdict"] == "better" and f1["better"] == 60


# -- the gate -----------------------------------------------------------------------------------


def _row(diff, p_holm, higher_is_better=True):
    return {"diff": diff, "p_holm": p_holm, "higher_is_better": higher_is_better, "mean_baseline": 0.5,
            "mean_candidate": 0.5 + diff, "ci_low": diff - 0.01, "ci_high": diff + 0.01}


def test_gate_fails_only_on_a_significant_drop_beyond_the_allowance():
    rows = {"answer_token_f1": _row(-0.05, 0.001), "noisy": _row(-0.05, 0.2), "small": _row(-0.01, 0.001),
            "avg_latency": _row(0.3, 0.001, higher_is_better=False), "up": _row(0.3, 0.001)}
    allow = {"answer_token_f1": 0.02, "noisy": 0.02, "small": 0.02, "avg_latency": 0.1, "up": 0.0}
    failed = drop_failures(rows, allow, alpha=0.05)
    assert len(failed) == 2
    assert failed[0].startswith("gate: answer_token_f1 got worse by 0.0500")
    assert failed[1].startswith("gate: avg_latency got worse by 0.3000")
    assert drop_failures(rows, {"missing": 0.1}, 0.05) == ["gate: missing cannot be checked for a drop: "
                                                            "not computed in both runs"]


def test_floors():
    values = {"hit_rate/hit_rate_at_5": 0.62, "answer_token_f1": 0.49, "f1": None}
    assert floor_failures(values, {"hit_rate/hit_rate_at_5": 0.5, "answer_token_f1": 0.49}) == []
    failed = floor_failures(values, {"hit_rate/hit_rate_at_5": 0.9, "f1": 0.1, "mrr": 0.1})
    assert failed[0] == "gate: hit_rate/hit_rate_at_5 = 0.6200 is under its floor 0.9"
    assert failed[1].startswith("gate: f1 is undefined") and failed[2].startswith("gate: mrr was not computed")


def test_gate_override_syntax_hydra_parses(data_dir):
    """A variant key written with a dot for its slash, or the whole map as a value, in real Hydra."""
    from hydra import compose, initialize_config_dir

    from conftest import CONF

    argv = add_override_prefix(["gate.min.hit_rate.hit_rate_at_5=0.5", "gate.max_drop.answer_token_f1=0.02",
                                "gate.min.answer_token_f1=0.3"])
    assert argv[0] == "++gate.min.hit_rate.hit_rate_at_5=0.5"
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(config_name="compare", overrides=["baseline=a", "candidate=b", *argv])
        assert read_gate(cfg.gate) == ({"answer_token_f1": 0.02}, {"hit_rate/hit_rate_at_5": 0.5, "answer_token_f1": 0.3})
        cfg = compose(config_name="compare", overrides=["gate.min={hit_rate/hit_rate_at_5: 0.5, mrr: 0.2}"])
        assert read_gate(cfg.gate)[1] == {"hit_rate/hit_rate_at_5": 0.5, "mrr": 0.2}
        cfg = compose(config_name="compare", overrides=["gate=demo", "gate.max_drop.answer_token_f1=0.05"])
        assert read_gate(cfg.gate)[0] == {"answer_token_f1": 0.05, "hit_rate/hit_rate_at_5": 0.0, "avg_latency": 1.5}
        cfg = compose(config_name="config", overrides=[f"data_dir={data_dir}", *argv])  # the runner's too
        assert read_gate(cfg.gate)[1] == {"hit_rate/hit_rate_at_5": 0.5, "answer_token_f1": 0.3}
    with pytest.raises(ConfigError, match="gate.min.mrr: expected a number, got 'high'"):
        flat_conditions({"mrr": "high"}, "gate.min")


# -- agreement with ranx on a real BM25-vs-dense run over SQuAD ----------------------------------


@pytest.fixture(scope="module")
def squad_two_retrievers(data_dir):
    """BM25 (bm25s) and dense (the bundled all-MiniLM-L6-v2, cosine) top-10 over the paragraphs of
    SQuAD's first four articles, for every answerable question on them (725)."""
    from ragexp.datasets.squad2 import load_squad2
    from ragexp.pipeline.chunking import Chunker
    from ragexp.pipeline.retrievers import BM25Retriever, load_encoder

    ds = load_squad2(str(data_dir / "squad2" / "dev-v2.0.json"))
    corpus = {pid: text for pid, text in ds.corpus.items() if pid.split("-")[0] in ("0", "1", "2", "3")}
    records = [r for r in ds.records if r.gt_context_ids[0] in corpus]
    chunks = Chunker().split(corpus)
    bm25 = BM25Retriever(top_k=10)
    bm25.prepare(chunks, {"corpus": "squad-4-articles"}, None)
    runs = {"bm25": {r.id: [chunks[i].doc_id for i, _ in bm25.search(r.query, 10, {})] for r in records}}
    encoder = load_encoder("all-MiniLM-L6-v2")
    docs = encoder.encode([c.text for c in chunks], batch_size=32, normalize_embeddings=True)
    queries = encoder.encode([r.query for r in records], batch_size=64, normalize_embeddings=True)
    top = np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :10]
    runs["dense"] = {r.id: [chunks[i].doc_id for i in top[j]] for j, r in enumerate(records)}
    return records, runs


@pytest.mark.slow
def test_agrees_with_ranx_compare_on_squad_bm25_vs_dense(squad_two_retrievers):
    """Same direction, and the same significant / not at 0.05, as ranx's Fisher randomization test."""
    from ranx import Qrels, Run, compare

    from ragexp.metrics.ranking import mrr, ndcg, recall_at_k

    records, runs = squad_two_retrievers
    assert len(records) > 500
    qrels = Qrels({r.id: {r.gt_context_ids[0]: 1} for r in records})
    ranx_runs = [Run({qid: {doc: float(10 - rank) for rank, doc in enumerate(ranked)} for qid, ranked in runs[name].items()},
                     name=name) for name in ("bm25", "dense")]
    ours = {"ndcg@10": (ndcg, 10), "mrr@10": (mrr, 10), "recall@1": (recall_at_k, 1), "recall@5": (recall_at_k, 5),
            "recall@10": (recall_at_k, 10)}
    report = compare(qrels, ranx_runs, list(ours), stat_test="fisher", n_permutations=10_000, max_p=0.05,
                     make_comparable=True).to_dict()
    outcomes = []
    for name, (fn, k) in ours.items():
        per = {system: [fn(runs[system][r.id], r.gt_context_ids, k=k, relevance="ids") for r in records]
               for system in ("bm25", "dense")}
        result = paired_compare(per["bm25"], per["dense"])
        theirs_diff = report["dense"]["scores"][name] - report["bm25"]["scores"][name]
        theirs_p = report["bm25"]["comparisons"]["dense"][name]
        assert result.diff == pytest.approx(theirs_diff, abs=1e-9), name  # the same per-query values
        assert (result.p_value < 0.05) == (theirs_p < 0.05), (name, result.p_value, theirs_p)
        outcomes.append((result.test, result.p_value < 0.05))
    # both of our tests ran, and the run holds significant and non-significant differences alike
    assert {t for t, _ in outcomes} == {"permutation", "mcnemar"}
    assert {sig for _, sig in outcomes} == {True, False}


# -- the real commands ---------------------------------------------------------------------------


def compare_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "PYTHONUNBUFFERED": "1"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run([sys.executable, "-m", "ragexp.cli.compare", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def demo_sweep(tmp_path_factory):
    """The README's sweep: the demo's strong and weak systems, one child run each."""
    where = tmp_path_factory.mktemp("compare")
    run_cli("-m", "dataset.system=strong,weak", "tracking.traces=0", cwd=where)  # runs compared, not their traces
    from cli import parent_and_children

    client, _, children = parent_and_children(f"sqlite:///{where / 'mlflow.db'}")
    by_system = {c.data.params["dataset.system"]: c for c in children}
    return where, client, by_system


@pytest.mark.integration
def test_cli_compare_weak_to_strong_by_name(demo_sweep, tmp_path):
    where, client, runs = demo_sweep
    weak, strong = runs["weak"], runs["strong"]
    # from another directory, the store named with tracking.uri=
    proc = compare_cli(f"baseline='{weak.info.run_name}'", f"candidate='{strong.info.run_name}'",
                       f"tracking.uri=sqlite:///{where / 'mlflow.db'}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Samples that regressed most" in proc.stdout and "▲ better" in proc.stdout
    found = client.search_runs([strong.info.experiment_id], filter_string="tags.`ragexp.kind` = 'comparison'")
    assert len(found) == 1
    run = found[0]
    assert run.data.tags["ragexp.baseline_run_id"] == weak.info.run_id
    assert run.data.tags["ragexp.candidate_run_id"] == strong.info.run_id
    arts = {a.path for a in client.list_artifacts(run.info.run_id)}
    assert {"comparison.json", "regressions.json", "comparison.png"} <= arts
    data = json.loads(Path(client.download_artifacts(run.info.run_id, "comparison.json", str(tmp_path))).read_text())
    rows = data["metrics"]
    # where the systems obviously differ, the difference is significant and in the right direction
    for key in ("hit_rate/hit_rate_at_1", "mrr/mrr_at_10", "ndcg/ndcg_at_10", "answer_token_f1", "keyword_overlap"):
        assert rows[key]["verdict"] == "better", key
        assert rows[key]["mean_candidate"] == pytest.approx(strong.data.metrics[key])  # every sample ok
        assert rows[key]["mean_baseline"] == pytest.approx(weak.data.metrics[key])
    assert rows["hit_rate/hit_rate_at_1"]["test"] == "mcnemar" and rows["answer_token_f1"]["test"] == "permutation"
    assert rows["avg_latency"]["verdict"] == "worse"  # strong is slower: lower is better
    assert data["samples"]["matched"] == 50 and data["not_compared"]["keyword_verdict_accuracy"]["candidate"] == pytest.approx(
        strong.data.metrics["keyword_verdict_accuracy"])
    assert run.data.metrics["diff/answer_token_f1"] == pytest.approx(rows["answer_token_f1"]["diff"])


@pytest.mark.integration
def test_cli_run_against_itself_by_id(demo_sweep):
    where, _, runs = demo_sweep
    rid = runs["strong"].info.run_id
    proc = compare_cli(f"baseline={rid}", f"candidate={rid}", "log=false", cwd=where)
    assert proc.returncode == 0, proc.stderr
    assert "▲ better" not in proc.stdout and "▼ worse" not in proc.stdout
    assert "regressed most" not in proc.stdout and "+0.0000 │ [0.0000, 0.0000] │    1.000" in proc.stdout


@pytest.mark.integration
def test_cli_gate_exit_codes(demo_sweep):
    where, _, runs = demo_sweep
    pair = [f"baseline={runs['strong'].info.run_id}", f"candidate={runs['weak'].info.run_id}", "log=false"]
    proc = compare_cli(*pair, "gate.max_drop.answer_token_f1=0.02", cwd=where)
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("gate:")]
    assert len(lines) == 1 and lines[0].startswith("gate: answer_token_f1 got worse by 0.29")
    # a drop within its allowance passes; so does a floor the candidate meets (variant key, map form)
    proc = compare_cli(*pair, "gate.max_drop.answer_token_f1=0.5", "gate.min={hit_rate/hit_rate_at_5: 0.6}", cwd=where)
    assert proc.returncode == 0, proc.stderr
    proc = compare_cli(*pair, "gate.min.hit_rate.hit_rate_at_5=0.9", "gate.min.answer_token_f1=0.1", cwd=where)
    assert proc.returncode == 1
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("gate:")] == [
        "gate: hit_rate/hit_rate_at_5 = 0.6200 in the candidate is under its floor 0.9"]


@pytest.mark.integration
def test_cli_names_that_do_not_identify_one_run(demo_sweep, tmp_path):
    where, client, runs = demo_sweep
    proc = compare_cli("baseline=nosuch", "candidate=nosuch", cwd=where)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "ragexp: error: baseline=nosuch: no finished run has this id or name in the store"
    for run in runs.values():
        client.set_tag(run.info.run_id, "mlflow.runName", "twin")
    try:
        proc = compare_cli("baseline=twin", "candidate=twin", cwd=where)
    finally:
        for run in runs.values():
            client.set_tag(run.info.run_id, "mlflow.runName", run.info.run_name)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1
    assert "baseline=twin: 2 runs have this name" in proc.stderr
    assert all(r.info.run_id in proc.stderr for r in runs.values())
    proc = compare_cli("baseline=x", "candidate=y", cwd=tmp_path)  # no store here
    assert proc.returncode == 2 and "no MLflow store at" in proc.stderr
    # exit status 1 means the gate failed, nothing else: Hydra's own errors (a bad override) exit 2
    proc = compare_cli("baseline=x", "candidate=y", "gate.nosuch=1", cwd=where)
    assert proc.returncode == 2 and "gate.nosuch" in proc.stderr


@pytest.mark.integration
def test_cli_unreachable_store_is_one_line_without_its_password(tmp_path):
    proc = compare_cli("baseline=a", "candidate=b", "tracking.uri=http://alice:s3cr3t@127.0.0.1:9", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "ragexp: error: tracking store http://***@127.0.0.1:9: cannot read the runs: connection refused"]
    assert "s3cr3t" not in proc.stdout + proc.stderr


@pytest.mark.integration
def test_cli_plain_run_gate(tmp_path):
    proc = run_cli("dataset.system=weak", "progress=false", "gate.min.answer_token_f1=0.1",
                   "gate.min.hit_rate.hit_rate_at_1=0.5", "tracking.traces=0", "tracking.plots=false", cwd=tmp_path, check=False)
    assert proc.returncode == 1, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("gate:")] == [
        "gate: hit_rate/hit_rate_at_1 = 0.3000 is under its floor 0.5"]
    assert "MLflow run" in proc.stdout  # the run is logged all the same
    proc = run_cli("nosuch.key=1", cwd=tmp_path, check=False)
    assert proc.returncode == 2


@pytest.mark.integration
@pytest.mark.parametrize("launcher", [[], ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2"]], ids=["basic", "joblib"])
def test_cli_multirun_exits_1_when_a_job_missed_a_floor(tmp_path, launcher):
    quiet = ("tracking.traces=0", "tracking.plots=false")  # the gate's verdict is checked, not what is logged
    proc = run_cli("-m", *launcher, "dataset.system=strong,weak", "metric=hit_rate", "progress=false",
                   "gate.min.hit_rate.hit_rate_at_1=0.5", *quiet, cwd=tmp_path, check=False)
    assert proc.returncode == 1, proc.stderr[-2000:]
    missed = sorted(p.read_text() for p in tmp_path.glob("multirun/*/*/*/gate_failed.txt"))
    assert missed == ["gate: hit_rate/hit_rate_at_1 = 0.3000 is under its floor 0.5\n"]  # the weak job's, not the strong one's
    proc = run_cli("-m", *launcher, "dataset.system=strong,weak", "metric=hit_rate", "progress=false",
                   "gate.min.hit_rate.hit_rate_at_1=0.2", *quiet, cwd=tmp_path, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_comparison_plot_is_a_png_with_a_panel_per_scale(tmp_path):
    from PIL import Image

    from ragexp.report.plots import plot_paired_differences

    rng = np.random.default_rng(2)
    base = rng.uniform(0.2, 0.8, 80)
    keys = ("answer_token_f1", "bleu", "avg_latency")
    rows_b = [(f"s{i}", f"q{i}", {"answer_token_f1": v, "bleu": 100 * v, "avg_latency": v}) for i, v in enumerate(base)]
    rows_c = [(f"s{i}", f"q{i}", {"answer_token_f1": v + 0.1, "bleu": 100 * v - 5, "avg_latency": v})
              for i, v in enumerate(base)]
    out = compare_tables(table("b", rows_b, keys), table("c", rows_c, keys))
    path = plot_paired_differences(out, tmp_path / "comparison.png")
    from ragexp.report.plots import _paired_title

    assert _paired_title(out, []).endswith(  # the caption says what the p-values and the intervals are adjusted for
        "\np: Holm-adjusted over the 3 metrics compared; intervals are each metric's own 95%, not adjusted")
    with Image.open(path) as img:
        assert img.format == "PNG" and img.size[0] > 600 and img.size[1] > 200
    empty = compare_tables(table("b", rows_b, ("bleu",)), table("c", rows_c, ("answer_token_f1",)),
                           min_match_fraction=1.0)
    assert plot_paired_differences(empty, tmp_path / "none.png") is None  # nothing compared: no picture


@pytest.mark.integration
def test_cli_help(tmp_path):
    proc = compare_cli("--help", cwd=tmp_path)
    assert proc.returncode == 0
    assert "python -m ragexp.compare baseline=" in proc.stdout and "Exit status: 0, or 1 when a gate" in proc.stdout
    assert "min_match_fraction: 0.9" in proc.stdout  # the options with their defaults


def test_too_few_resamples_for_holm_are_called_out(capsys):
    from ragexp.report.comparison import print_comparison

    rng = np.random.default_rng(5)
    keys = tuple(f"token_f1/v{i}" for i in range(30))
    rows_b = [(f"s{i}", f"q{i}", {k: float(rng.random()) for k in keys}) for i in range(40)]
    rows_c = [(sid, q, {k: min(1.0, v + 0.3) for k, v in vals.items()}) for sid, q, vals in rows_b]
    few = compare_tables(table("b", rows_b, keys), table("c", rows_c, keys), resamples=999)
    print_comparison(few)
    # 2 / 1000 · 30 metrics = 0.06 >= 0.05: nothing could be significant, and the output says why
    assert all(r["verdict"] == "no significant difference" for r in few["metrics"].values())
    printed = capsys.readouterr().out
    assert "raise stats.resamples (e.g. stats.resamples=12,000)" in printed
    # the p-values are Holm-adjusted over the family, the intervals are not: said under the table
    assert "p: Holm-adjusted over the 30 metrics compared; intervals are each metric's own 95%, not adjusted" in printed
    enough = compare_tables(table("b", rows_b, keys), table("c", rows_c, keys), resamples=5000)
    print_comparison(enough)
    assert all(r["verdict"] == "better" for r in enough["metrics"].values())
    assert "raise stats.resamples" not in capsys.readouterr().out


def test_a_clustered_comparison_tests_over_its_clusters_and_says_so(capsys):
    """With stats.cluster_by the comparison's p-value flips whole clusters' total differences (as scipy's one-sample
    permutation_test does on those totals), no McNemar, no two-stage; the output names the clusters and their count."""
    from scipy import stats

    from ragexp.report.comparison import print_comparison

    rng = np.random.default_rng(8)
    conv = [f"conv{i % 6}" for i in range(36)]  # 6 conversations of 6 questions
    keys = ("token_f1", "exact_match")
    rows_b = [(f"s{i}", f"q{i}", {"token_f1": float(rng.random()), "exact_match": float(i % 2)}) for i in range(36)]
    rows_c = [(sid, q, {"token_f1": min(1.0, v["token_f1"] + 0.1 * (int(conv[i][-1]) - 1)),
                        "exact_match": float(i % 3 == 0)}) for i, (sid, q, v) in enumerate(rows_b)]

    def clustered(name, rows):
        t = table(name, rows, keys)
        return RunTable(**{**t.__dict__, "columns": [*t.columns, "conversation_id"],
                           "rows": [[*r, c] for r, c in zip(t.rows, conv)], "cluster_by": "conversation_id"})

    result = compare_tables(clustered("b", rows_b), clustered("c", rows_c))
    for key in keys:
        row = result["metrics"][key]
        d = np.array([c[2][key] - b[2][key] for b, c in zip(rows_b, rows_c)])
        totals = np.array([d[[x == f"conv{g}" for x in conv]].sum() for g in range(6)])
        theirs = stats.permutation_test((totals,), np.mean, permutation_type="samples", vectorized=True).pvalue
        assert (row["test"], row["clusters"]) == ("cluster permutation", 6)
        assert row["p_value"] == pytest.approx(theirs, abs=1e-12) and row["p_value"] >= 2 / 2 ** 6
    assert result["method"]["cluster_by"] == "conversation_id" and result["method"]["clusters"] == 6
    print_comparison(result)
    out = " ".join(capsys.readouterr().out.split())
    assert "sign-flip permutation of the 6 clusters of conversation_id" in out and "McNemar" not in out
    assert "over its 6 clusters" in out and "no p-value is below 0.031 before Holm" in out  # 2 / 2**6
    # Holm over the 2 metrics doubles that floor past 0.05: the output says no difference can be significant, and why
    assert ("with 6 clusters and Holm over 2 metrics no difference can reach p < 0.05, however large: more resamples "
            "do not help, more clusters do") in out and "raise stats.resamples" not in out
    plain = compare_tables(table("b", rows_b, keys), table("c", rows_c, keys))
    assert plain["metrics"]["exact_match"]["test"] == "mcnemar" and "cluster_by" not in plain["method"]
    assert "clusters" not in plain["metrics"]["token_f1"]
    with pytest.raises(DataError, match="stats.cluster_by='lang': neither run's per-sample table has a 'lang' column"):
        compare_tables(table("b", rows_b, keys), table("c", rows_c, keys), cluster_by="lang")


def test_a_mistyped_floor_names_the_closest_metric():
    # gate.min.answer_tokn_f1=0.4 listed every one of the run's ~60 metric keys and no closest name (H8's walkthrough)
    values = {"answer_token_f1": 0.27, "context_recall": 0.52, "token_f1": 0.13}
    assert floor_failures(values, {"answer_tokn_f1": 0.4}) == [
        "gate: answer_tokn_f1 was not computed, so it cannot be checked against its floor 0.4 "
        "(did you mean answer_token_f1?)"]
    assert floor_failures(values, {"zzz": 0.4}) == [
        "gate: zzz was not computed, so it cannot be checked against its floor 0.4 "
        "(metrics: answer_token_f1, context_recall, token_f1)"]
