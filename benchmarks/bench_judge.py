"""Judge wall time at hosted-API latencies, against the ideal ``calls × latency / concurrency``.

    python benchmarks/bench_judge.py [--latencies 0.3,1,2] [--concurrency 32,256] [--ideal 6] [--repeat 1] [--broken]

A hosted judge (OpenAI, Anthropic, Gemini) answers in 0.3-2 s; a run keeps 32-256 requests in
flight. For each latency and concurrency the local OpenAI-compatible server (tests/judge_server.py,
in its own process) answers every request after that delay, and ``Judge.score`` of
``conf/judge/openai_compatible.yaml`` (litellm's ``hosted_vllm/…`` route, ``max_concurrency`` set to
the concurrency) scores as many one-passage ``retrieval_precision`` records (one request each) as
fill ``--ideal`` seconds of ideal wall time, on a fresh SQLite cache. Printed: the ideal, the
judge's wall time and its ratio to the ideal, and the same for bare ``litellm.acompletion`` calls at
that concurrency (the floor litellm and the machine's load set). A cached re-run of the last setting
is timed too (zero calls).

The benchmark checks it measured what it names: every record scored ``ok`` with exactly one
request each, and the re-run made no request; otherwise it exits non-zero (``--broken`` empties one
record's passage, which is scored without a request, to see it do so).
"""

from __future__ import annotations

import argparse
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
import sys
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


async def bare_litellm(model: str, url: str, n: int, concurrency: int, tag: str) -> float:
    """The same number of ``litellm.acompletion`` calls at the same concurrency and nothing around them:
    the floor litellm's own CPU and this machine's load set."""
    import asyncio

    import litellm

    litellm.suppress_debug_info = True
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await litellm.acompletion(
                model=model, api_base=url, api_key="no-key-needed", temperature=0, seed=0, max_tokens=64, timeout=60,
                num_retries=0, max_retries=0,
                messages=[{"role": "user", "content": f"<question>\nQuestion {i} {tag} about Paris?\n</question>\n"
                                                      "<context>\nParis is the capital of France.\n</context>\n"
                                                      '{"relevant": true or false}'}])

    t = time.perf_counter()
    await asyncio.gather(*[one(i) for i in range(n)])
    return time.perf_counter() - t


def judge_settings(url: str, concurrency: int) -> dict:
    """``conf/judge/openai_compatible.yaml`` with the server's URL and the benchmark's concurrency."""
    from omegaconf import OmegaConf

    cfg = OmegaConf.to_container(OmegaConf.load(ROOT / "conf" / "judge" / "openai_compatible.yaml"))
    cfg.update(api_base=url, max_concurrency=concurrency, name="bench")
    return cfg


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latencies", default="0.3,1,2")
    ap.add_argument("--concurrency", default="32,256")
    ap.add_argument("--ideal", type=float, default=6.0, help="seconds of ideal wall time per setting")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--broken", action="store_true", help="one record's passage empty: the check fails, exit 1")
    args = ap.parse_args()

    from ragexp.common.records import Record
    from ragexp.core.scoring import build_metrics
    from ragexp.judge import build_judge

    specs, _ = build_metrics({"retrieval_precision": {"_target_": "ragexp.metrics.judged.relevance.retrieval_precision"}})
    rows = []
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for latency in (float(x) for x in args.latencies.split(",")):
            proc, url = start_server(latency)
            try:
                for conc in (int(x) for x in args.concurrency.split(",")):
                    n = max(conc, round(args.ideal * conc / latency))
                    ideal = n * latency / conc
                    base = judge_settings(url, conc)
                    records = [Record(id=str(i), query=f"What is the capital of France? (case {i}, {latency}, {conc})",
                                      contexts=["" if args.broken and i == 0 else "Paris is the capital of France."])
                               for i in range(n)]
                    import asyncio

                    secs = asyncio.run(bare_litellm(base["model"], url, n, conc, f"{latency}-{conc}"))
                    rows.append((latency, conc, "bare litellm", n, ideal, secs))
                    print(f"  latency {latency:4.1f} s  concurrency {conc:4d}  bare litellm.acompletion  {n:5d} calls: "
                          f"ideal {ideal:6.2f} s, {secs:6.2f} s = {secs / ideal:4.2f}x ideal", flush=True)
                    build_judge({**base, "cache": False}, specs).score(
                        [Record(id="w", query="Warm-up?", contexts=["Paris."])], specs)  # imports, connections
                    times = []
                    for r in range(args.repeat):
                        cache = str(Path(tmp) / f"judge-{latency}-{conc}-{r}.sqlite")
                        t = time.perf_counter()
                        scores, usage = build_judge({**base, "cache_path": cache}, specs).score(records, specs)
                        times.append(time.perf_counter() - t)
                        if usage["judge/calls"] != n or any(s.status != "ok" for s in scores["retrieval_precision"]):
                            print(f"FAILED: {n} records at {latency} s, concurrency {conc}: {usage}", file=sys.stderr)
                            ok = False
                    rows.append((latency, conc, "ragexp judge", n, ideal, statistics.median(times)))
                    print(f"  latency {latency:4.1f} s  concurrency {conc:4d}  ragexp judge  {n:5d} calls: "
                          f"ideal {ideal:6.2f} s, judge {rows[-1][-1]:6.2f} s = {rows[-1][-1] / ideal:4.2f}x ideal",
                          flush=True)
                t = time.perf_counter()
                _, usage = build_judge({**base, "cache_path": cache}, specs).score(records, specs)
                cached = time.perf_counter() - t
                if usage["judge/calls"] != 0:
                    print(f"FAILED: the cached re-run made {usage['judge/calls']} calls", file=sys.stderr)
                    ok = False
            finally:
                proc.stdin.close()
                proc.wait(10)
    print(f"\n{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; judge model {base['model']}")
    print("| latency | concurrency | what | calls | ideal | wall | ratio |\n|---|---|---|---|---|---|---|")
    for latency, conc, what, n, ideal, secs in rows:
        print(f"| {latency:.1f} s | {conc} | {what} | {n} | {ideal:.2f} s | {secs:.2f} s | {secs / ideal:.2f}x |")
    print(f"cached re-run of {n} records: {cached:.2f} s, 0 calls")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
