"""Judge throughput: 1,000 judge calls against the local OpenAI-compatible server at 100 ms a call.

    /work/venv/bin/python benchmarks/bench_judge.py [--calls 1000] [--latency 0.1] [--concurrency 32]

The server (tests/judge_server.py) runs in its own process, so its CPU does not compete with the
judge's event loop. Printed, all measured in this process:

- the ideal wall time, ``calls × latency / concurrency``;
- bare litellm: the same number of ``litellm.acompletion`` calls at the same concurrency, with
  nothing around them (the floor litellm's own per-call CPU sets on this machine);
- ragexp's judge: ``Judge.score`` on 1,000 records of one passage each (``retrieval_precision``,
  one request per record): rate limiter, semaphore, retry layer, parsing, SQLite cache writes;
- the same with ``judge.workers`` processes sending the HTTP calls (``--workers``, default 2: one per
  core here), on a fresh cache; the workers are started by the warm-up call, before the clock;
- the cached re-run: a new judge on the same cache file (zero calls).

Targets (issue 4): the judge within 1.3× of the ideal; the cached re-run under 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]

SERVER = """
import sys, time
sys.path.insert(0, {tests!r})
from judge_server import JudgeServer
s = JudgeServer(latency={latency}).start()
print(s.url, flush=True)
sys.stdin.read()  # until the benchmark closes our stdin
"""


def start_server(latency: float) -> tuple[subprocess.Popen, str]:
    code = SERVER.format(tests=str(ROOT / "tests"), latency=latency)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        raise SystemExit("the judge server did not start")
    return proc, url


async def bare_litellm(url: str, n: int, concurrency: int) -> float:
    import litellm

    litellm.suppress_debug_info = True
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(
                model="openai/gpt-4o-mini", api_base=url, api_key="no-key-needed", temperature=0, seed=0,
                max_tokens=64, timeout=30, num_retries=0, max_retries=0,
                messages=[{"role": "user", "content": f"<question>\nQuestion {i} about Paris?\n</question>\n"
                                                      f"<context>\nParis is the capital of France.\n</context>\n"
                                                      '{"relevant": true or false}'}])

    await asyncio.gather(*[one(i) for i in range(min(64, n))])  # warm the connection pool
    t = time.perf_counter()
    await asyncio.gather(*[one(i) for i in range(n)])
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()

    from ragexp.evaluate import build_metrics
    from ragexp.judge import build_judge
    from ragexp.records import Record

    proc, url = start_server(args.latency)
    try:
        ideal = args.calls * args.latency / args.concurrency
        bare = asyncio.run(bare_litellm(url, args.calls, args.concurrency))

        specs, _ = build_metrics({"retrieval_precision": {"_target_": "ragexp.metrics.judge.retrieval_precision"}})
        records = [Record(id=str(i), query=f"What is the capital of France? (case {i})",
                          contexts=["Paris is the capital of France."]) for i in range(args.calls)]
        with tempfile.TemporaryDirectory() as tmp:
            settings = dict(name="bench", model="openai/gpt-4o-mini", api_base=url, api_key_env=None,
                            max_concurrency=args.concurrency, max_tokens=64, timeout_s=30,
                            cache_path=str(Path(tmp) / "judge.sqlite"))
            warm = [Record(id="w", query="Warm-up?", contexts=["Paris."])]
            build_judge({**settings, "cache": False}, specs).score(warm, specs)  # litellm's first-call setup

            t, cpu = time.perf_counter(), time.process_time()
            scores, usage = build_judge(settings, specs).score(records, specs)
            fresh, cpu = time.perf_counter() - t, time.process_time() - cpu
            assert usage["judge/calls"] == args.calls, usage
            assert all(s.status == "ok" for s in scores["retrieval_precision"])

            par = {**settings, "workers": args.workers, "cache_path": str(Path(tmp) / "judge_workers.sqlite")}
            build_judge({**par, "cache": False}, specs).score(warm, specs)  # starts the worker processes
            t, cpu_par = time.perf_counter(), time.process_time()
            _, usage_par = build_judge(par, specs).score(records, specs)
            fresh_par, cpu_par = time.perf_counter() - t, time.process_time() - cpu_par
            assert usage_par["judge/calls"] == args.calls, usage_par

            t = time.perf_counter()
            _, usage2 = build_judge(settings, specs).score(records, specs)
            cached = time.perf_counter() - t
            assert usage2["judge/calls"] == 0 and usage2["judge/cache_hits"] == args.calls, usage2
    finally:
        proc.stdin.close()
        proc.wait(10)

    print(f"{args.calls} judge calls, {args.latency * 1000:.0f} ms each, concurrency {args.concurrency} "
          f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f})")
    print(f"  ideal (calls x latency / concurrency) : {ideal:7.2f} s")
    print(f"  bare litellm.acompletion              : {bare:7.2f} s   {bare / ideal:4.2f}x ideal")
    print(f"  ragexp judge, cold cache              : {fresh:7.2f} s   {fresh / ideal:4.2f}x ideal   "
          f"{fresh / bare:4.2f}x bare litellm   (target <= 1.3x ideal)")
    label = f"ragexp judge, cold, {args.workers} workers"
    print(f"  {label:<38}: {fresh_par:7.2f} s   {fresh_par / ideal:4.2f}x ideal   "
          f"{fresh_par / bare:4.2f}x bare litellm   (judge.workers={args.workers}; parent CPU "
          f"{cpu_par / args.calls * 1000:.1f} ms a call)")
    print(f"  ragexp judge, cached re-run           : {cached:7.2f} s   (target < 2 s)")
    print(f"  client CPU in the cold run            : {cpu:7.2f} s   = {cpu / args.calls * 1000:.1f} ms a call "
          f"(one event loop runs on one core: the wall time cannot go below this)")


if __name__ == "__main__":
    main()
