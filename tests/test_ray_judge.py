"""execution=ray with judge metrics: each chunk's judge questions asked by the Ray task that scores it, on a
two-node cluster started here (``ray start`` twice on 127.0.0.1), every node reading and writing one judge
cache in a PostgreSQL started here, the judge the real local OpenAI-compatible server of tests/judge_server.py
(litellm's whole path). The run equals one process: per-sample values, statuses and reasons, aggregates,
intervals and summary; the judge is paid once per distinct question; one MLflow run."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray", reason="execution=ray needs the .[cluster] extra (ray)")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from realistic_records import write_records  # noqa: E402
from ray_cluster import two_nodes  # noqa: E402,F401

import ragexp  # noqa: E402
from judge_server import JudgeServer, Reply  # noqa: E402
from ragexp.judge.cache import PG_TABLE  # noqa: E402

METRICS = "[default,answer_similarity,retrieval_precision]"
VARYING = ("seconds", "execution", "results_folder", "run_id", "tracking_uri", "judge")


def _summary(result) -> str:
    return json.dumps({k: v for k, v in result.summary.items() if k not in VARYING}, sort_keys=True, default=str)


@pytest.mark.integration
@pytest.mark.services
@pytest.mark.slow
def test_judge_calls_spread_over_two_nodes_sharing_a_postgres_cache_equal_one_process(
        tmp_path, monkeypatch, two_nodes, postgres_cluster):
    monkeypatch.chdir(tmp_path)
    path = write_records(tmp_path / "records.jsonl", 30)
    given = [json.loads(line) for line in Path(path).read_text().splitlines()]
    broken = {given[i]["query"] for i in (3, 18, 29)}  # the judge never answers these readably
    # chunks of 6: five new records and one repeating (under another id) a record of another chunk, so that every
    # chunk has questions of its own to ask, and the shared cache keeps a question from being paid twice
    rows = []
    for k in range(6):
        rows += given[5 * k:5 * k + 5] + [{**given[(5 * k + 7) % 30], "id": f"again-{k}"}]
    for i, r in enumerate(rows):  # people's grades of a third of the answers: the judge's agreement with them
        if i % 3 == 0:
            r["human"] = {"answer_similarity": float(r["label"])}
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    failing = [i for i, r in enumerate(rows) if r["query"] in broken]

    def script(request):
        if request.task == "similarity" and any(q in request.first_user for q in broken):
            return Reply(text="I would rather not say.")
        return None

    common = dict(metric=METRICS, judge="openai_compatible", tracking={"plots": False, "traces": 0}, stats={"resamples": 1000})
    with JudgeServer(script=script) as server:
        def run(database: str, **options):
            server.reset()
            out = ragexp.evaluate(path, overrides=[f"judge.api_base={server.url}", f"judge.cache_backend={database}",
                                                   "judge.max_retries=0"], **common, **options)
            return out, server.calls

        one_db, two_db = postgres_cluster.create_database(), postgres_cluster.create_database()
        alone, alone_calls = run(one_db, log=f"sqlite:///{tmp_path}/alone.db", execution={"mode": "memory"})
        sharded, sharded_calls = run(two_db, log=f"sqlite:///{tmp_path}/mlflow.db",
                                     execution={"mode": "ray", "address": two_nodes, "chunk_records": 6})

    ex = sharded.summary["execution"]
    assert ex["mode"] == "ray" and ex["nodes"] == 2, ex
    calls = ex["judge_calls_per_node"]
    assert len(calls) == 2 and min(calls) > 0, calls  # both nodes asked the judge (every chunk has new questions)
    # every value, status and reason (the unreadable replies' included) as in one process
    assert sharded.per_sample.equals(alone.per_sample)
    statuses = sharded.per_sample["answer_similarity/status"]
    assert sorted(statuses[statuses != "ok"].index.tolist()) == failing and len(failing) == 3
    assert sharded.per_sample.loc[failing[1], "answer_similarity/detail"].startswith("no JSON object")
    assert sharded.metrics.drop(index=[k for k in sharded.metrics.index if k.startswith("judge/")]).equals(
        alone.metrics.drop(index=[k for k in alone.metrics.index if k.startswith("judge/")]))
    assert _summary(sharded) == _summary(alone)
    entry = sharded.summary["agreement"]["answer_similarity"]
    unscored = sum(1 for i in failing if i % 3 == 0)  # labelled, but the judge's reply was unreadable
    assert entry["n"] == 12 - unscored and entry["labelled_not_scored"] == unscored
    assert "keyword_verdict" in sharded.summary["agreement"]
    for name in ("agreement.json", "agreement_disagreements.json"):  # the disagreements' rows and reasons too
        mine, theirs = (Path(r.summary["results_folder"], name).read_text() for r in (sharded, alone))
        assert mine == theirs and "answer_similarity" in mine, name
    assert sharded.metrics.loc["answer_similarity", "n"] == 33  # the three failed samples are not in the mean
    # paid once per distinct question: each stored once in the shared cache, nothing asked twice across nodes
    stored = int(postgres_cluster.sql(f"SELECT count(*) FROM {PG_TABLE}", database=two_db.rsplit("/", 1)[1]))
    usage, alone_usage = sharded.summary["judge"], alone.summary["judge"]
    # a verdict whose reply stays unreadable is asked, then re-asked once, and neither is stored
    assert sharded_calls == alone_calls == stored + 2 * usage["judge/failures/parse_error"], (sharded_calls, stored)
    # one process shares a repeated question's verdict; across chunks the cache answers it (or the claim waits for it)
    assert alone_usage["judge/shared_verdicts"] >= 6 * 6 and alone_usage["judge/cache_hits"] == 0
    assert (usage["judge/cache_hits"] + usage["judge/shared_verdicts"] == alone_usage["judge/shared_verdicts"]
            and usage["judge/cache_hits"] > 0)
    for key in ("judge/tokens_in", "judge/tokens_out", "judge/reasks", "judge/failures/parse_error"):
        assert usage[key] == alone_usage[key], key
    assert usage["judge/calls"] == sharded_calls == sum(calls)
    assert usage["judge/failures/parse_error"] >= 3
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    assert [r.info.run_id for r in runs] == [sharded.run_id]
    assert runs[0].data.metrics["judge/calls"] == sharded_calls


@pytest.mark.parametrize("setting, why", [
    ("judge.samples=2", "judge.samples > 1 (its noise statistics)"),
    ("judge.max_cost_usd=1", "judge.max_cost_usd (one budget for the whole run)"),
])
def test_judge_features_a_streamed_run_cannot_merge_run_in_memory_saying_why(tmp_path, capsys, setting, why):
    """Without a cluster: the line is printed before Ray is started, and the run is the in-memory one."""
    path = write_records(tmp_path / "records.jsonl", 6)
    with JudgeServer() as server:
        runs = [ragexp.evaluate(path, metric="answer_similarity", judge="openai_compatible", log=False,
                                overrides=[f"judge.api_base={server.url}", setting,
                                           f"judge.cache_path={tmp_path / 'judge.sqlite'}"],
                                stats={"resamples": 200}, execution={"mode": mode})
                for mode in ("ray", "memory")]
    assert f"execution.mode=ray: {why} needs every record at once; this run is scored in memory" in capsys.readouterr().err
    assert "execution" not in runs[0].summary
    assert runs[0].per_sample.equals(runs[1].per_sample) and _summary(runs[0]) == _summary(runs[1])


def test_a_misspelled_label_key_stops_a_ray_run_before_any_work(tmp_path):
    """As in memory (docs/judge-trust.md, "Label hygiene"): the check pass names the first row with it."""
    from ragexp.errors import DataError

    path = write_records(tmp_path / "records.jsonl", 4)
    rows = [json.loads(line) for line in Path(path).read_text().splitlines()]
    rows[2]["human"] = {"answer_similarty": 1.0}
    Path(path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    with JudgeServer() as server, pytest.raises(DataError) as caught:
        ragexp.evaluate(path, metric="answer_similarity", judge="openai_compatible", log=False,
                        overrides=[f"judge.api_base={server.url}", f"judge.cache_path={tmp_path / 'judge.sqlite'}"],
                        execution={"mode": "ray"})
    assert server.calls == 0
    assert "label key 'answer_similarty' matches no metric: did you mean 'answer_similarity'?" in str(caught.value)
    assert "row 3" in str(caught.value) and "human.answer_similarty" in str(caught.value)
