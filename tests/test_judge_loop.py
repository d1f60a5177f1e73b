"""The judge's event loop: which jobs skip the thread pool, and the garbage collector's pause."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading

from ragexp.judge.loop import InlineSetupExecutor, litellm_setup_inline, new_loop, quiet_gc


def _thread_of_job(model: str | None) -> tuple[int, int]:
    """(the loop's thread, the thread a default-executor job ran on), with or without the inline context."""

    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        if model is None:
            return threading.get_ident(), await loop.run_in_executor(None, threading.get_ident)
        with litellm_setup_inline({"model": model, "api_base": "http://127.0.0.1:9/v1"}):
            return threading.get_ident(), await loop.run_in_executor(None, threading.get_ident)

    loop = new_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


def test_natively_async_providers_build_their_request_on_the_loop_thread():
    for model in ("hosted_vllm/judge", "openai/judge", "gpt-4o-mini", "ollama_chat/llama3.1"):
        loop_thread, job_thread = _thread_of_job(model)
        assert job_thread == loop_thread, model


def test_other_jobs_still_go_to_a_thread():
    loop_thread, job_thread = _thread_of_job(None)  # outside a judge call
    assert job_thread != loop_thread
    loop_thread, job_thread = _thread_of_job("no_such_provider/model")  # a provider we have not checked
    assert job_thread != loop_thread


def test_dns_lookups_never_run_inline():
    ex = InlineSetupExecutor(max_workers=1)
    try:
        with litellm_setup_inline({"model": "hosted_vllm/judge"}):
            ex.submit(socket.getaddrinfo, "127.0.0.1", 80).result(timeout=10)
            assert len(ex._threads) == 1  # it went to the pool's thread
            assert ex.submit(threading.get_ident).result() == threading.get_ident()  # this one did not
    finally:
        ex.shutdown()


def test_inline_job_errors_reach_the_caller():
    async def main() -> None:
        with litellm_setup_inline({"model": "hosted_vllm/judge"}):
            await asyncio.get_running_loop().run_in_executor(None, lambda: 1 / 0)

    loop = new_loop()
    try:
        try:
            loop.run_until_complete(main())
        except ZeroDivisionError:
            pass
        else:
            raise AssertionError("the job's exception was lost")
    finally:
        loop.close()


def test_quiet_gc_is_reentrant_and_restores_collections():
    assert gc.get_freeze_count() == 0
    with quiet_gc():
        assert gc.get_freeze_count() > 0
        with quiet_gc():  # a second judge run in another thread
            pass
        # The inner run did not unfreeze the outer one's objects (an unfreeze empties the permanent
        # generation). The count itself may drop a little: a frozen object whose last reference
        # goes away (say in one of MLflow's or litellm's background threads) is still freed.
        assert gc.get_freeze_count() > 0
        garbage = [[]]
        garbage[0].append(garbage)  # a cycle made during the run is still collected
        del garbage
        assert gc.collect() > 0
    assert gc.get_freeze_count() == 0
