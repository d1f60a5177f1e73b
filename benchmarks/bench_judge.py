"""Judge throughput: 1,000 judge calls against the local OpenAI-compatible server at 100 ms a call.

    python benchmarks/bench_judge.py [--calls 1000] [--latency 0.1] [--concurrency 32]
                                                    [--workers 2] [--repeat 3]

The judge is ``conf/judge/openai_compatible.yaml`` as a user gets it (``hosted_vllm/…``, litellm's
own HTTP client), pointed at the server with ``max_concurrency`` = ``--concurrency``. The server
(tests/judge_server.py) runs in its own process. Printed, all measured in this process:

- the ideal wall time, ``calls × latency / concurrency``;
- bare litellm: the same number of ``litellm.acompletion`` calls at the same concurrency and
  nothing around them, through the OpenAI SDK (``openai/…``) and through litellm's own client
  (``hosted_vllm/…``), then the latter again once the served model's price is in litellm's map
  (what the judge does for a self-hosted model, :func:`ragexp.judge.client.register_price`): the
  floor litellm's per-call CPU sets on this machine;
- ragexp's judge: ``Judge.score`` on ``--calls`` records of one passage each
  (``retrieval_precision``, one request per record) — rate limiter, semaphore, retry layer,
  parsing, SQLite cache writes — in one process, and with ``judge.workers`` processes sending the
  HTTP calls (started by a warm-up call, before the clock). Each is run ``--repeat`` times on a
  fresh cache; the median, fastest and slowest are printed (this machine is shared and noisy);
- the cached re-run: a new judge on a filled cache (zero calls).

Targets (issue 4): the judge within 1.3× of the ideal; the cached re-run under 2 s.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
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


async def bare_litellm(model: str, url: str, n: int, concurrency: int) -> float:
    import litellm

    litellm.suppress_debug_info = True
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(
                model=model, api_base=url, api_key="no-key-needed", temperature=0, seed=0,
                max_tokens=64, timeout=30, num_retries=0, max_retries=0,
                messages=[{"role": "user", "content": f"<question>\nQuestion {i} about Paris?\n</question>\n"
                                                      f"<context>\nParis is the capital of France.\n</context>\n"
                                                      '{"relevant": true or false}'}])

    await asyncio.gather(*[one(i) for i in range(min(64, n))])  # warm the connection pool
    t = time.perf_counter()
    await asyncio.gather(*[one(i) for i in range(n)])
    return time.perf_counter() - t


def judge_settings(url: str, concurrency: int) -> dict:
    """``conf/judge/openai_compatible.yaml`` with the server's URL and the benchmark's concurrency."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "judge" / "openai_compatible.yaml"))
    cfg.update(api_base=url, max_concurrency=concurrency, name="bench")
    return cfg


def spread(times: list[float], ideal: float) -> str:
    med = statistics.median(times)
    return (f"{med:7.2f} s   {med / ideal:4.2f}x ideal   (fastest {min(times):.2f} s = {min(times) / ideal:.2f}x, "
            f"slowest {max(times):.2f} s = {max(times) / ideal:.2f}x, {len(times)} runs)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.1)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

    from ragexp.core.scoring import build_metrics
    from ragexp.judge import build_judge
    from ragexp.common.records import Record

    proc, url = start_server(args.latency)
    try:
        ideal = args.calls * args.latency / args.concurrency
        base = judge_settings(url, args.concurrency)
        bare = {m: asyncio.run(bare_litellm(m, url, args.calls, args.concurrency))
                for m in ("openai/gpt-4o-mini", base["model"])}
        # the same with the served model's price in litellm's map, as the judge registers it (process-wide, so last)
        from ragexp.judge.client import register_price

        register_price(base["model"], base["cost_per_million_in"] / 1e6, base["cost_per_million_out"] / 1e6)
        bare[base["model"] + " + price"] = asyncio.run(bare_litellm(base["model"], url, args.calls, args.concurrency))

        specs, _ = build_metrics({"retrieval_precision": {"_target_": "ragexp.metrics.judge.retrieval_precision"}})
        records = [Record(id=str(i), query=f"What is the capital of France? (case {i})",
                          contexts=["Paris is the capital of France."]) for i in range(args.calls)]
        warm = [Record(id="w", query="Warm-up?", contexts=["Paris."])]
        runs: dict[int, list[float]] = {1: [], args.workers: []}
        cpu: dict[int, list[float]] = {1: [], args.workers: []}
        with tempfile.TemporaryDirectory() as tmp:
            for workers in runs:  # the warm-up imports litellm's provider code, and starts worker processes
                build_judge({**base, "workers": workers, "cache": False}, specs).score(warm, specs)
            for i in range(args.repeat):
                for workers in runs:
                    settings = {**base, "workers": workers, "cache_path": str(Path(tmp) / f"judge-{workers}-{i}.sqlite")}
                    t, c = time.perf_counter(), time.process_time()
                    scores, usage = build_judge(settings, specs).score(records, specs)
                    runs[workers].append(time.perf_counter() - t)
                    cpu[workers].append(time.process_time() - c)
                    assert usage["judge/calls"] == args.calls, usage
                    assert all(s.status == "ok" for s in scores["retrieval_precision"])

            t = time.perf_counter()
            _, usage = build_judge({**base, "cache_path": str(Path(tmp) / "judge-1-0.sqlite")}, specs).score(records, specs)
            cached = time.perf_counter() - t
            assert usage["judge/calls"] == 0 and usage["judge/cache_hits"] == args.calls, usage
    finally:
        proc.stdin.close()
        proc.wait(10)

    print(f"{args.calls} judge calls, {args.latency * 1000:.0f} ms each, concurrency {args.concurrency} "
          f"({os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}); judge model {base['model']}")
    print(f"  {'ideal (calls x latency / concurrency)':<51}: {ideal:7.2f} s")
    for model, secs in bare.items():
        print(f"  bare litellm.acompletion, {model:<25}: {secs:7.2f} s   {secs / ideal:4.2f}x ideal")
    for workers, times in runs.items():
        label = "ragexp judge, one process" if workers == 1 else f"ragexp judge, judge.workers={workers}"
        per_call = statistics.median(cpu[workers]) / args.calls * 1000
        print(f"  {label:<51}: {spread(times, ideal)}   (target <= 1.3x ideal; "
              f"this process's CPU {per_call:.1f} ms a call)")
    print(f"  {'ragexp judge, cached re-run':<51}: {cached:7.2f} s   (target < 2 s)")


if __name__ == "__main__":
    main()
