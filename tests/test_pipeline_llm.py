"""The LLM generator and compressor through litellm, against a real local OpenAI-compatible server
(``tests/judge_server.py``) on 127.0.0.1, and their credential checks before any work."""

from __future__ import annotations

import json
import re

import pytest

from cli import runs
from judge_server import JudgeServer, Reply

from ragexp.datasets.base import Dataset
from ragexp.errors import CredentialsError, ConfigError
from ragexp.pipeline import build_pipeline
from ragexp.common.records import Record
from ragexp.results.columns import status_column

CITIES = {
    "paris": "Paris is the capital of France. The Eiffel Tower stands in Paris. It was built in 1889.",
    "lyon": "Lyon is a major city in France. It lies where the Rhone meets the Saone.",
    "berlin": "Berlin is the capital of Germany. The Brandenburg Gate is in Berlin.",
}
QUESTIONS = [("q1", "Where does the Eiffel Tower stand?"), ("q2", "Which rivers meet at Lyon?"),
             ("q3", "What is the capital of Germany?")]


def _dataset() -> Dataset:
    return Dataset(name="cities", records=[Record(id=i, query=q) for i, q in QUESTIONS], source="memory",
                   corpus=dict(CITIES))


def _words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z]+", text.lower()) if len(w) > 3}


def scripted_model(request) -> Reply:
    """A deterministic stand-in for an LLM that reads the prompts ragexp sends."""
    prompt = request.user
    if "Sentences that help:" in prompt:  # compress_v1
        question = prompt.split("Question: ", 1)[1].split("\n", 1)[0]
        passage = prompt.split("Passage:\n", 1)[1].rsplit("\n\nSentences that help:", 1)[0]
        keep = [s for s in re.split(r"(?<=\.)\s+", passage) if len(_words(s) & _words(question)) >= 2]
        return Reply(text=" ".join(keep) if keep else "NONE")
    first = re.search(r"^\[1\] (.*)$", prompt, re.M)  # generate_v1: answer with passage 1's first words
    return Reply(text="ANSWER: " + " ".join(first.group(1).split()[:4]) if first else "I don't know.")


@pytest.fixture
def server():
    with JudgeServer(script=scripted_model) as s:
        yield s


def test_llm_generator_answers_every_record_through_litellm(compose, server, tmp_path):
    cfg = compose("retriever=bm25", "retriever.top_k=2", "generator=llm", "generator.model=openai/local-test",
                  f"generator.api_base={server.url}", f"pipeline.cache_dir={tmp_path}")
    pipe = build_pipeline(cfg, _dataset())
    assert server.calls == 0  # building checks settings only
    records = pipe.run(_dataset().records)
    assert server.calls == len(QUESTIONS)
    for r in records:
        assert r.answer == "ANSWER: " + " ".join(r.contexts[0].split()[:4])
        assert r.timings["generate"] > 0 and r.latency_s == r.timings["total"]
    assert records[0].context_ids[0] == "paris"
    sent = server.log[0].body
    assert sent["model"] == "local-test" and sent["temperature"] == 0.0
    assert "Where does the Eiffel Tower stand?" in sent["messages"][0]["content"]


def test_llm_compressor_keeps_what_the_model_kept_and_drops_none(compose, server, tmp_path):
    cfg = compose("retriever=bm25", "retriever.top_k=3", "compressor=llm", "compressor.model=openai/local-test",
                  f"compressor.api_base={server.url}", f"pipeline.cache_dir={tmp_path}")
    ds = _dataset()
    ds.records = [Record(id="q", query="When was the Eiffel Tower of France built?")]
    [r] = build_pipeline(cfg, ds).run(ds.records)
    # BM25 retrieves Paris (eiffel, tower, built, france) and Lyon (france); the model keeps the sentences
    # sharing two words with the question: one of Paris's, none of Lyon's (NONE drops it with its id).
    assert server.calls == 2
    assert r.contexts == ["The Eiffel Tower stands in Paris."] and r.context_ids == ["paris"]
    assert "compress" in r.timings


def test_a_failing_call_empties_that_sample_only(compose, server, tmp_path):
    server.script = lambda req: Reply(status=500, text="boom") if "Lyon" in req.user else scripted_model(req)
    cfg = compose("retriever=bm25", "retriever.top_k=1", "generator=llm", "generator.model=openai/local-test",
                  f"generator.api_base={server.url}", "generator.max_retries=0", f"pipeline.cache_dir={tmp_path}")
    pipeline = build_pipeline(cfg, _dataset())
    records = pipeline.run(_dataset().records)
    assert [r.answer is None for r in records] == [False, True, False]
    assert records[1].extra["pipeline_error"].startswith("generate: generator model 'openai/local-test' failed")
    assert pipeline.stats["pipeline/failures"] == 1 == pipeline.stats["pipeline/failures/generate"]  # logged to MLflow


def test_a_rejected_key_stops_the_run_and_a_400_is_not_retried(compose, server, tmp_path):
    cfg = compose("retriever=bm25", "retriever.top_k=1", "generator=llm", "generator.model=openai/local-test",
                  f"generator.api_base={server.url}", "generator.max_retries=3", f"pipeline.cache_dir={tmp_path}")
    server.script = lambda req: Reply(status=400, text="prompt too long")
    records = build_pipeline(cfg, _dataset()).run(_dataset().records)
    assert server.calls == 3 and all(r.answer is None for r in records)  # one call each: litellm and the SDK
    assert "after 1 attempt(s)" in records[0].extra["pipeline_error"]
    server.reset()
    server.script = lambda req: Reply(status=401, text="invalid api key")
    with pytest.raises(CredentialsError, match="the generator model rejected its credentials .* generator.api_key_env"):
        build_pipeline(cfg, _dataset()).run(_dataset().records)
    assert server.calls == 1


def test_missing_key_is_named_before_any_call(compose, server, monkeypatch):
    monkeypatch.delenv("RAGEXP_TEST_GEN_KEY", raising=False)
    cfg = compose("retriever=bm25", "generator=llm", f"generator.api_base={server.url}",
                  "generator.api_key_env=RAGEXP_TEST_GEN_KEY")
    with pytest.raises(CredentialsError, match="environment variable RAGEXP_TEST_GEN_KEY, which is not set"):
        build_pipeline(cfg, _dataset())
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(CredentialsError, match="OPENAI_API_KEY"):
        build_pipeline(compose("retriever=bm25", "compressor=llm", "compressor.model=openai/gpt-4o-mini"), _dataset())
    assert server.calls == 0


def test_a_prompt_without_the_query_is_refused(compose, tmp_path):
    bad = tmp_path / "prompt.txt"
    bad.write_text("Summarise: {contexts}")
    with pytest.raises(ConfigError, match=r"expected the placeholder\(s\) \{query\}"):
        build_pipeline(compose("retriever=bm25", "generator=llm", f"generator.prompt={bad}"), _dataset())


def test_a_run_with_llm_generator_logs_answers_and_generate_latency(server, compose, tmp_path):
    from ragexp.workflow.runner import execute

    honeybee = "How many eggs can a honeybee queen lay in a day?"  # demo question q01: its call fails for good
    server.script = lambda req: Reply(status=500, text="boom") if honeybee in req.user else scripted_model(req)
    execute(compose("dataset.system=null", "retriever=bm25", "retriever.top_k=3", "generator=llm",
                    "generator.model=openai/local-test", f"generator.api_base={server.url}", "generator.max_retries=0",
                    "metric=[answer_token_f1,avg_latency]"))  # logged to tmp_path/mlflow.db, as the CLI logs
    client, [run] = runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    limit = run.data.params.get("dataset.limit", "null")  # a param only when set
    assert server.calls == (int(limit) if limit != "null" else 50)
    assert run.data.metrics["latency/generate"] > 0 and "answer_token_f1" in run.data.metrics
    assert run.data.metrics["pipeline/failures"] == 1 == run.data.metrics["pipeline/failures/generate"]
    table = json.loads(open(client.download_artifacts(run.info.run_id, "per_sample.json", str(tmp_path))).read())
    rows = [dict(zip(table["columns"], row)) for row in table["data"]]
    failed = [r for r in rows if isinstance(r.get("pipeline_error"), str)]
    assert [r["id"] for r in failed] == ["q01"] and failed[0]["pipeline_error"].startswith("generate: ")
    assert failed[0][status_column("answer_token_f1")] != "ok"  # no answer: not scored, and not a silent 0
