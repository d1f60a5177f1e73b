"""The judge against a real local HTTP server that speaks the OpenAI chat API (tests/judge_server.py).

Every test runs the whole litellm path. The server plays a sensible judge unless a test scripts
faults: 429 with Retry-After, 500s, timeouts, a 400, malformed and truncated replies.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import re

import pytest

from ragexp.errors import BudgetExceeded, ConfigError, CredentialsError
from ragexp.judge import build_judge
from ragexp.judge.cache import JudgeCache
from ragexp.judge.client import Budget, JudgeClient, Usage
from ragexp.judge.templates import load_prompt
from ragexp.common.records import Record

from judge_server import Reply, judge_specs


CAPITAL_OF_FRANCE = Record(
    id="capital-of-france",
    query="What is the capital of France?",
    contexts=["Paris is the capital of France.", "Bananas are yellow fruit."],
    answer="Paris is the capital of France. Paris has ten million dinosaurs.",
    reference_answers=["The capital of France is Paris."],
)




@pytest.fixture
def make_judge(server, tmp_path):
    def _make(metric_specs, **over):
        cfg = dict(name="test", model="openai/gpt-4o-mini", api_base=server.url, api_key_env=None,
                   cache_path=str(tmp_path / "judge.sqlite"), timeout_s=5.0, max_retries=2, backoff_s=0.01,
                   max_backoff_s=0.05, max_concurrency=8, max_tokens=64)
        cfg.update(over)
        return build_judge(cfg, metric_specs)

    return _make


ALL = ("answer_similarity", "retrieval_precision", "augmentation_accuracy", "augmentation_precision",
       "answer_consistency", "answer_consistency_binary", "questeval_recall", "questeval_precision", "overall_score")


def test_worked_cases_on_capital_of_france(server, make_judge):
    s = judge_specs(*ALL)
    scores, usage = make_judge(s).score([CAPITAL_OF_FRANCE], s)
    v = {k: per[0].value for k, per in scores.items()}
    assert {per[0].status for per in scores.values()} == {"ok"}
    assert v["answer_consistency"] == 1 / 2  # "Paris is the capital" supported, "ten million dinosaurs" not
    assert v["answer_consistency_binary"] == 0.0
    assert v["retrieval_precision"] == 1 / 2  # the banana passage is off topic
    assert v["augmentation_accuracy"] == 1 / 2
    assert v["augmentation_precision"] == 1 / 1  # the one relevant passage is used
    assert v["answer_similarity"] == 5.0
    assert v["overall_score"] == (5 / 5 + 1 / 2 + 1 / 2 + 1 + 1 / 2 + 0) / 6
    assert v["questeval_recall"] == 1.0 and v["questeval_precision"] == 1.0
    assert usage["judge/calls"] == server.calls > 0
    assert usage["judge/tokens_in"] > 0 and usage["judge/cost_usd"] > 0  # gpt-4o-mini is in litellm's price map
    assert usage["judge/failures"] == 0


def test_second_identical_run_makes_zero_calls(server, make_judge):
    s = judge_specs(*ALL)
    _, first = make_judge(s).score([CAPITAL_OF_FRANCE], s)
    calls = server.calls
    again, second = make_judge(s).score([CAPITAL_OF_FRANCE], s)  # a new judge: the cache is on disk
    assert server.calls == calls
    assert second["judge/calls"] == 0 and second["judge/cost_usd"] == 0
    assert second["judge/cache_hits"] == first["judge/calls"]
    assert again["answer_consistency"][0].value == 1 / 2


def test_augmentation_precision_asks_nothing_new(server, make_judge):
    s = judge_specs("retrieval_precision", "augmentation_accuracy", "augmentation_precision")
    _, usage = make_judge(s, cache=False).score([CAPITAL_OF_FRANCE], s)
    assert server.tasks() == {"relevance": 2, "usage": 2}  # one verdict per passage and question, shared
    assert usage["judge/shared_verdicts"] == 4


def test_questeval_questions_generated_once_per_reference(server, make_judge):
    s = judge_specs("questeval_recall", "questeval_precision")
    ref = ["The Eiffel Tower in Paris was finished in 1889 by Gustave Eiffel."]
    records = [Record(id=str(i), query="About the Eiffel Tower?", answer=a, reference_answers=ref)
               for i, a in enumerate(["Gustave Eiffel finished the tower.", "It stands in Paris."])]
    scores, _ = make_judge(s).score(records, s)
    assert server.tasks() == {"questions": 1, "answers": 1 + 2}  # the reference's answers once, each answer's once
    server.reset()
    # a sweep's next job with a new answer: questions and the reference's answers come from the cache
    other = [Record(id="3", query="About the Eiffel Tower?", answer="Built in 1889.", reference_answers=ref)]
    make_judge(s).score(other, s)
    assert server.tasks() == {"answers": 1}
    assert [sc.status for sc in scores["questeval_recall"]] == ["ok", "ok"]


FAULTS = {
    # tag: (script for attempts of the first ask, expected status, expected HTTP calls)
    "ok": (lambda r: None, "ok", 1),
    "429-once": (lambda r: Reply(status=429, headers={"Retry-After": "0.3"}) if r.attempt == 0 else None, "ok", 2),
    "500-twice": (lambda r: Reply(status=500) if r.attempt < 2 else None, "ok", 3),
    "timeout-once": (lambda r: Reply(delay=3.0) if r.attempt == 0 else None, "ok", 2),
    "garbled-once": (lambda r: None if r.reask else Reply(text="I would say it is relevant, probably."), "ok", 2),
    "truncated": (lambda r: Reply(text='{"relevant": tr', finish_reason="length"), "parse_error", 2),
    "prose": (lambda r: Reply(text="Looks fine to me."), "parse_error", 2),
    "429-always": (lambda r: Reply(status=429, headers={"Retry-After": "0.05"}), "rate_limited", 3),
    "500-always": (lambda r: Reply(status=500), "api_error", 3),
    "timeout-always": (lambda r: Reply(delay=3.0), "timeout", 3),
    "400": (lambda r: Reply(status=400, text="context length exceeded"), "api_error", 1),
    "broken-body": (lambda r: Reply(raw=b'{"choices": [{"message": '), "api_error", 3),
}
_TAG = re.compile(r"\[fault:([\w-]+)\]")


def _fault_script(request):
    m = _TAG.search(request.first_user)
    return FAULTS[m.group(1)][0](request) if m else None


# litellm's two routes to an OpenAI-compatible server (through the OpenAI SDK, through its own HTTP client)
ROUTES = ["openai/gpt-4o-mini", "hosted_vllm/judge"]


@pytest.mark.parametrize("model", ROUTES)
def test_fault_injection_no_sample_lost_every_failure_recorded(server, make_judge, model):
    server.script = _fault_script
    records = [Record(id=tag, query=f"What is the capital of France? [fault:{tag}]",
                      contexts=["Paris is the capital of France."]) for tag in FAULTS]
    s = judge_specs("retrieval_precision")
    # 1.5 s: a reply a loaded host is slow to read stays well inside it; the scripted timeouts wait 3 s
    scores, usage = make_judge(s, model=model, timeout_s=1.5).score(records, s)
    per = scores["retrieval_precision"]
    assert len(per) == len(records)  # no sample lost
    for record, score in zip(records, per):
        expected = FAULTS[record.id][1]
        assert score.status == expected, (record.id, score)
        if expected == "ok":
            assert score.value == 1.0
        else:
            assert score.value is None and score.detail
    by_tag = {tag: sum(1 for r in server.log if f"[fault:{tag}]" in r.first_user) for tag in FAULTS}
    assert by_tag == {tag: calls for tag, (_, _, calls) in FAULTS.items()}  # one retry layer: 1 + max_retries at most
    truncated = per[list(FAULTS).index("truncated")]
    assert '{"relevant": tr' in truncated.detail  # the raw output is kept for the per-sample table
    assert usage["judge/failures/parse_error"] == 2
    assert usage["judge/failures/rate_limited"] == 1
    assert usage["judge/failures/timeout"] == 1
    assert usage["judge/failures/api_error"] == 3
    assert usage["judge/failures"] == 7
    assert usage["judge/reasks"] == 3
    # the 429's Retry-After was honoured: the retry came no sooner than the server asked
    tries = [r.at for r in server.log if "[fault:429-once]" in r.first_user]
    assert tries[1] - tries[0] >= 0.3


def test_failed_samples_are_asked_again_next_run_but_answers_are_not(server, make_judge):
    server.script = _fault_script
    records = [Record(id=t, query=f"Capital of France? [fault:{t}]", contexts=["Paris is the capital of France."])
               for t in ("ok", "500-always", "prose")]
    s = judge_specs("retrieval_precision")
    make_judge(s).score(records, s)
    server.reset()
    scores, usage = make_judge(s).score(records, s)
    assert [sc.status for sc in scores["retrieval_precision"]] == ["ok", "api_error", "parse_error"]
    assert usage["judge/cache_hits"] == 1  # the ok answer only: an unreadable reply is never cached
    assert server.calls == 3 + 2  # the 500s are tried again (3 attempts), and the prose one is asked and re-asked


def test_concurrency_really_overlaps_and_is_bounded(server, make_judge):
    server.latency = 0.2
    record = Record(id="many", query="What is the capital of France?",
                    contexts=[f"Paris is the capital of France, fact {i}." for i in range(24)])
    s = judge_specs("retrieval_precision")
    scores, _ = make_judge(s, max_concurrency=6, cache=False).score([record], s)
    assert scores["retrieval_precision"][0].value == 1.0
    assert server.max_in_flight == 6


def test_requests_per_minute_spaces_request_starts(server, make_judge):
    record = Record(id="rpm", query="Capital of France?", contexts=[f"Paris, fact {i}." for i in range(6)])
    s = judge_specs("retrieval_precision")
    make_judge(s, cache=False).score([CAPITAL_OF_FRANCE], s)  # litellm's slow first call, off the clock
    server.reset()
    make_judge(s, requests_per_minute=300, cache=False).score([record], s)  # one start every 0.2 s
    starts = sorted(r.at for r in server.log)
    assert len(starts) == 6
    # six starts 0.2 s apart span at least 1 s (less a margin for transit jitter)
    assert starts[-1] - starts[0] >= 5 * 0.2 - 0.1


def test_budget_guard_stops_and_keeps_what_was_paid_for(server, make_judge, tmp_path):
    records = [Record(id=str(i), query=f"What is the capital of France, case {i}?",
                      contexts=["Paris is the capital of France.", "Lyon is in France.", "Bananas."])
               for i in range(10)]
    s = judge_specs("retrieval_precision")
    prices = dict(cost_per_million_in=1000.0, cost_per_million_out=1000.0)  # $0.001 a token
    # a budget for 4.5 worst-case requests: sample 1 gets one request in before the stop, its others none
    probe = make_judge(s, max_cost_usd=1.0, **prices)
    messages = load_prompt("relevance", "v1").render(question=records[0].query, context=records[0].contexts[0])
    worst = JudgeClient(probe.settings, None, probe.prices, Usage(), Budget(1.0)).worst_case(messages)
    server.script = lambda r: Reply(delay=0.5) if "case 1?" in r.first_user else None  # still in flight at the stop
    with pytest.raises(BudgetExceeded, match=r"of 10 samples fully scored") as err:
        make_judge(s, max_cost_usd=4.5 * worst, max_concurrency=2, **prices).score(records, s)
    spent = float(re.search(r"\$([\d.]+) spent", str(err.value)).group(1))
    assert 0 < spent <= 4.5 * worst
    paid = server.calls
    assert 0 < paid < 30
    cache = JudgeCache(tmp_path / "judge.sqlite")
    assert len(cache) == paid  # every paid answer is kept
    paid_usd = cache._conn.execute("SELECT SUM(cost_usd) FROM replies").fetchone()[0]
    assert spent == round(paid_usd, 4)  # the report counts requests still in flight when the budget ran out
    scores, usage = make_judge(s, **prices).score(records, s)  # finish without a limit
    assert usage["judge/cache_hits"] == paid and server.calls == 30  # nothing paid twice
    assert [sc.value for sc in scores["retrieval_precision"]] == [2 / 3] * 10


def test_budget_needs_a_price(server, make_judge):
    with pytest.raises(ConfigError, match="no price for 'openai/my-local-model'"):
        make_judge(judge_specs("retrieval_precision"), model="openai/my-local-model", max_cost_usd=1.0)


def test_a_self_hosted_models_declared_price_reaches_litellm_and_the_cost(server, make_judge):
    import litellm

    model = "hosted_vllm/priced-judge"  # a name of its own: litellm's price map is process-wide
    with pytest.raises(Exception):  # not in litellm's map before the judge declares its price
        litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=1)
    s = judge_specs("retrieval_precision")
    judge = make_judge(s, model=model, cost_per_million_in=2.0, cost_per_million_out=8.0)
    per_in, per_out = litellm.cost_per_token(model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000)
    assert (per_in, per_out) == pytest.approx((2.0, 8.0))  # litellm now prices the model as declared
    scores, usage = judge.score([CAPITAL_OF_FRANCE], s)
    assert scores["retrieval_precision"][0].value == 1 / 2
    assert usage["judge/cost_usd"] == pytest.approx((usage["judge/tokens_in"] * 2.0 + usage["judge/tokens_out"] * 8.0) / 1e6)


def test_a_mapped_models_price_is_never_rewritten_and_an_unpriced_one_stays_unknown(server, make_judge):
    import litellm

    mapped = litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=1_000_000, completion_tokens=1_000_000)
    s = judge_specs("retrieval_precision")
    judge = make_judge(s, cost_per_million_in=123.0, cost_per_million_out=456.0)  # openai/gpt-4o-mini, overridden
    assert judge.prices.per_in == 123.0 / 1e6
    judge.score([CAPITAL_OF_FRANCE], s)
    assert litellm.cost_per_token(model="gpt-4o-mini", prompt_tokens=1_000_000, completion_tokens=1_000_000) == mapped
    unpriced = make_judge(s, model="hosted_vllm/unpriced-judge")
    assert not unpriced.prices.known


@pytest.mark.parametrize("name, variable", [("gpt4o", "OPENAI_API_KEY"), ("gpt4o_mini", "OPENAI_API_KEY"),
                                            ("claude_sonnet", "ANTHROPIC_API_KEY"), ("gemini_flash", "GEMINI_API_KEY")])
def test_missing_credentials_stop_before_any_work(monkeypatch, name, variable):
    monkeypatch.delenv(variable, raising=False)
    with pytest.raises(CredentialsError, match=f"set the environment variable {variable}"):
        build_judge(name, judge_specs("answer_similarity"))


def test_local_judges_need_no_key(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.chdir(tmp_path)
    judge = build_judge("ollama", judge_specs("answer_similarity"))
    assert judge.settings.api_key_env is None
    with pytest.raises(ConfigError, match="judge.api_base="):
        build_judge("openai_compatible", judge_specs("answer_similarity"))


def test_judge_metrics_without_a_judge_say_how_to_pick_one():
    with pytest.raises(ConfigError, match=r"answer_similarity ask an LLM judge.*judge=<name>"):
        build_judge(None, judge_specs("answer_similarity"))


@pytest.mark.parametrize("model", ROUTES)
def test_rejected_key_stops_the_run(server, make_judge, model):
    server.script = lambda r: Reply(status=401, text="invalid api key")
    s = judge_specs("retrieval_precision")
    records = [Record(id=str(i), query=f"Capital of France, case {i}?", contexts=["Paris is the capital."])
               for i in range(200)]
    with pytest.raises(CredentialsError, match="rejected its credentials"):
        make_judge(s, model=model, max_concurrency=4).score(records, s)
    assert server.calls <= 4  # neither retried nor sent again for the other samples


def test_inside_a_running_event_loop_like_a_notebook(server, make_judge):
    s = judge_specs("answer_consistency")
    judge = make_judge(s)

    async def cell():
        sync_scores, _ = judge.score([CAPITAL_OF_FRANCE], s)  # the sync API inside a running loop
        async_scores, _ = await judge.ascore([CAPITAL_OF_FRANCE], s)  # or awaited on the caller's loop
        return sync_scores, async_scores

    sync_scores, async_scores = asyncio.run(cell())
    assert sync_scores["answer_consistency"][0].value == async_scores["answer_consistency"][0].value == 1 / 2


def test_a_judge_scores_one_record_of_a_registered_metric(server, make_judge):
    s = judge_specs("answer_consistency")
    scores, _ = make_judge(s).score([Record(id="1", query="-", answer=CAPITAL_OF_FRANCE.answer,
                                            contexts=CAPITAL_OF_FRANCE.contexts)], s)
    assert (scores["answer_consistency"][0].value, scores["answer_consistency"][0].status) == (1 / 2, "ok")
    with pytest.raises(ConfigError, match="prompt 'main_points' has no version 'v9'"):  # refused before any work
        make_judge(judge_specs("answer_consistency", answer_consistency={"prompt_version": "v9"}))


def test_missing_fields_are_reported_per_sample(server, make_judge):
    # SPEC §3: absent contexts are missing; present and empty (nothing retrieved) is a miss, scored 0
    s = judge_specs("answer_consistency", "overall_score")
    records = [CAPITAL_OF_FRANCE, Record(id="no-contexts", query="q", answer="Paris.", contexts=[]),
               Record(id="absent-contexts", query="q", answer="Paris.")]
    scores, _ = make_judge(s).score(records, s)
    assert [sc.status for sc in scores["answer_consistency"]] == ["ok", "ok", "missing_field"]
    assert [sc.status for sc in scores["overall_score"]] == ["ok", "ok", "missing_field"]  # never silently easier
    assert [sc.value for sc in scores["overall_score"]] == [1 / 2, 0 / 1, None]


def _writer(path: str, start: int, n: int) -> None:
    cache = JudgeCache(path)
    for i in range(start, start + n):
        cache.put(f"k{i}", model="m", text=str(i), finish_reason="stop", tokens_in=1, tokens_out=1, cost_usd=0.0)


def test_cache_is_safe_under_parallel_processes(tmp_path):
    path = str(tmp_path / "shared.sqlite")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(path, k * 300, 300)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0]
    cache = JudgeCache(path)
    assert len(cache) == 900 and cache.get("k899")["text"] == "899"
