"""Every judge wait is bounded: a server that accepts connections and never answers, a verdict whose
retries outlast ``judge.deadline_s``, and a judge cache's PostgreSQL server that never answers."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from ragexp.common.records import Record
from ragexp.errors import ConfigError
from ragexp.judge import build_judge, judge_failed

from judge_server import Reply, judge_specs


def _judge(server, tmp_path, specs, **over):
    cfg = dict(name="hang", model="hosted_vllm/judge", api_base=server.url, api_key_env=None,
               cache_path=str(tmp_path / "judge.sqlite"), timeout_s=0.5, max_retries=4, backoff_s=0.01,
               max_backoff_s=0.05, max_concurrency=4, max_tokens=64)
    return build_judge({**cfg, **over}, specs)


RECORDS = [Record(id=str(i), query=f"What is the capital of France? ({i})", contexts=[f"Paris is the capital. {i}"])
           for i in range(40)]


def test_a_server_that_never_answers_ends_every_sample_as_a_timeout_with_one_line(server, tmp_path, caplog):
    server.script = lambda r: Reply(hang=True)
    s = judge_specs("retrieval_precision")
    with caplog.at_level(logging.WARNING, logger="ragexp.judge"):
        scores, usage = _judge(server, tmp_path, s).score(RECORDS, s)
    per = scores["retrieval_precision"]
    assert len(per) == len(RECORDS) and {x.status for x in per} == {"timeout"}
    assert all("answered none of the last" in x.detail for x in per[-10:])
    # after 8 timeouts in a row nothing more is sent: the 4 in flight then, not one retry per sample
    assert usage["judge/calls"] < 8 + 4 + 4
    hang_lines = [r.getMessage() for r in caplog.records if "accepts connections but answered none" in r.getMessage()]
    assert len(hang_lines) == 1 and server.url in hang_lines[0]
    assert [r for r in caplog.records if "no reply from" in r.getMessage()]  # the stall line came before
    assert "timeout" in judge_failed(scores)


def test_a_verdict_past_its_deadline_is_a_timeout_naming_the_deadline(server, tmp_path):
    server.script = lambda r: Reply(status=503, delay=0.05)  # answers, but never usefully
    s = judge_specs("retrieval_precision")
    scores, usage = _judge(server, tmp_path, s, timeout_s=5, deadline_s=2, max_retries=1000).score(RECORDS[:2], s)
    for x in scores["retrieval_precision"]:
        assert x.status == "timeout" and "judge.deadline_s=2 s" in x.detail and "attempts; the last:" in x.detail
    assert usage["judge/calls"] < 2 * 1000  # the deadline, not the retries, ended it


def test_a_server_that_answers_between_timeouts_is_not_called_hanging(server, tmp_path):
    # the first request of every even record is late, the rest answer at once: replies come between timeouts
    slow = lambda r: r.attempt == 0 and int(r.first_user.split("France? (")[1].split(")")[0]) % 2 == 0  # noqa: E731
    server.script = lambda r: Reply(delay=1.5) if slow(r) else None
    s = judge_specs("retrieval_precision")
    scores, usage = _judge(server, tmp_path, s, max_concurrency=2, timeout_s=1).score(RECORDS[:20], s)
    assert {x.status for x in scores["retrieval_precision"]} == {"ok"}
    assert usage["judge/retries"] >= 10


@pytest.fixture
def silent_port():
    """A TCP port that accepts connections and never answers (a hung PostgreSQL server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                pass

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield sock.getsockname()[1]
    stop.set()
    t.join(2)
    for c in held:
        c.close()
    sock.close()


def test_a_postgres_cache_that_never_answers_is_one_line_before_any_work(silent_port, tmp_path):
    pytest.importorskip("psycopg")
    from ragexp.judge import cache as cache_module

    s = judge_specs("retrieval_precision")
    cfg = dict(name="pg", model="hosted_vllm/judge", api_base="http://127.0.0.1:9/v1", api_key_env=None,
               cache_backend=f"postgresql://ragexp:secret-pw@127.0.0.1:{silent_port}/judge")
    with pytest.raises(ConfigError) as err:
        build_judge(cfg, s)
    line = str(err.value)
    assert "\n" not in line and "secret-pw" not in line and str(silent_port) in line
    assert f"no answer within {cache_module.PG_CONNECT_TIMEOUT_S} s" in line


@pytest.mark.services
def test_a_postgres_cache_statement_that_gets_no_answer_fails_in_one_line(postgres_cluster):
    psycopg = pytest.importorskip("psycopg")
    from ragexp.judge.errors import CacheError
    from ragexp.judge.cache import PG_TABLE, PostgresJudgeCache

    url = postgres_cluster.create_database()
    cache = PostgresJudgeCache(url)
    cache.statement_timeout_s = 1.0
    with psycopg.connect(url) as other:  # holds the table: every statement on it waits
        other.execute(f"LOCK TABLE {PG_TABLE} IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(CacheError) as err:
            cache.get("0" * 64)
    assert str(err.value).endswith("(no answer within 1 s)") and "\n" not in str(err.value)
