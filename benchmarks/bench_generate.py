"""``ragexp.generate`` wall time against the ideal: 1,000 questions, 2 calls each, at 0.5 s latency, 32 in flight.

    python benchmarks/bench_generate.py [--n 1000] [--latency 0.5] [--concurrency 32] [--broken]

The stand-in judge (``ragexp.standin_judge`` through tests/judge_server.py, in its own process) answers every
request after ``--latency`` seconds. :func:`ragexp.workflow.generation.run_generation` builds a test set of ``--n``
questions (factoid, descriptive and multi-passage) from SQuAD v2's paragraphs cut into 40-word chunks, on a fresh
judge cache, with the judge config the command line composes (``judge=openai_compatible``,
``judge.max_concurrency=--concurrency``). The ideal wall is ``calls × latency / concurrency``. Printed:

- ``RESULT``: the whole run's wall (importing litellm, corpus, chunking, BM25, the calls, filters, writing) as a
  ratio to the ideal, and the asking step's (the calls and the filters between them);
- ``floor``: as many bare ``litellm.acompletion`` calls of the same size (the answerability prompt on a 40-word
  passage), as many in flight, to the same server, in the same run: what this machine allows at that moment;
- ``steps``: the report's seconds per step, and ``import litellm`` alone in a fresh process;
- CPU per call: this process's CPU while asking (the judge loop's thread; filters included) and during the bare
  calls, each divided by the calls: far less dependent on how busy the machine is than wall time (the asking figure
  includes the one-off load of langdetect's profiles, about 0.5 s: 0.25 ms a call at 2,000 calls);
- the load average (1/5/15 min) when it ended, and a cached re-run (zero calls).

It checks it measured what it names: ``n`` items, 2 calls each (no filter dropped one before its check),
the report adding up, and the re-run making no call; otherwise it exits non-zero (``--broken`` sets the
answer length bound to 0 words, so every question is filtered before its check: 1 call each).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data"))

SERVER = """
import sys
sys.path.insert(0, {tests!r})
from judge_server import JudgeServer
s = JudgeServer(latency={latency}).start()
print(s.url, flush=True)
sys.stdin.read()
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--broken", action="store_true")
    args = ap.parse_args()
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    from ragexp.datasets.squad2 import load_squad2
    from ragexp.workflow.generation import run_generation

    work = Path(tempfile.mkdtemp(prefix="bench_generate_"))
    corpus = work / "squad_paragraphs.jsonl"
    docs = load_squad2(str(DATA / "squad2" / "dev-v2.0.json")).corpus
    corpus.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in docs.items()))
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(tests=str(ROOT / "tests"), latency=args.latency)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    url = server.stdout.readline().strip()
    with initialize_config_dir(str(ROOT / "conf"), version_base="1.3"):  # the judge as the command line composes it
        judge = OmegaConf.to_container(compose("generate", overrides=[
            "judge=openai_compatible", f"judge.api_base={url}", f"judge.cache_path={work / 'judge.sqlite'}",
            f"judge.max_concurrency={args.concurrency}"]).judge, resolve=True)
    cfg = {"corpus": {"path": str(corpus)}, "n": args.n, "seed": 0, "min_words": 20,
           "kinds": {"factoid": 0.4, "descriptive": 0.3, "multi": 0.3},
           "filters": {"question_words": [4, 60], "answer_max_words": 0 if args.broken else 200,
                       "duplicate_similarity": 0.8},
           "chunker": {"_target_": "ragexp.pipeline.chunking.Chunker", "name": "words", "size": 40, "overlap": 0},
           "judge": judge, "out": str(work / "testset.jsonl"), "tracking": {"enabled": False}}
    failures = []

    async def floor(calls: int) -> float:
        """Bare litellm.acompletion calls to the same server, as many, as many in flight: what the machine allows."""
        import asyncio

        import litellm

        from ragexp.judge.templates import load_prompt

        sem = asyncio.Semaphore(args.concurrency)
        texts = list(docs.values())
        prompt = load_prompt("testset_answerable")  # the run's own messages' size and the server's work on them

        async def one(i: int) -> None:
            text = texts[i % len(texts)]
            msgs = prompt.render(contexts=[" ".join(text.split()[:40])], question=" ".join(text.split()[3:12]) + "?")
            async with sem:
                await litellm.acompletion(model="hosted_vllm/judge", api_base=url, messages=msgs, max_tokens=1024,
                                          temperature=0.0, num_retries=0, max_retries=0)

        t, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*[one(i) for i in range(calls)])
        return time.perf_counter() - t, time.process_time() - cpu

    try:
        t0 = time.perf_counter()
        report = run_generation(cfg, progress=False)
        wall = time.perf_counter() - t0
        calls = report["judge"]["calls"]
        ideal = calls * args.latency / args.concurrency
        t1 = time.perf_counter()
        again = run_generation({**cfg, "out": str(work / "again.jsonl")}, progress=False)
        cached = time.perf_counter() - t1
        from ragexp.judge.loop import run_sync, shutdown

        bare, bare_cpu = run_sync(floor(int(calls)))  # on the loop thread the run's calls used, closed after
        shutdown()
        t2 = time.perf_counter()  # the part of the whole run's reading step any command pays before its first call
        subprocess.run([sys.executable, "-c", "import litellm"], check=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
        startup = time.perf_counter() - t2
    finally:
        server.stdin.close()
        server.wait(10)
    if report["asked"] != args.n or calls != 2 * args.n:
        failures.append(f"expected {args.n} items with 2 calls each, got {report['asked']} items and {calls:.0f} calls")
    if report["asked"] != report["kept"] + sum(sum(report[g].values()) for g in ("filtered", "failed", "not_generated")):
        failures.append("the report does not add up")
    if again["judge"]["calls"] != 0:
        failures.append(f"the cached re-run made {again['judge']['calls']:.0f} calls")
    sec, load = report["seconds"], " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"n={args.n} latency={args.latency}s concurrency={args.concurrency}: {calls:.0f} calls, ideal {ideal:.2f} s "
          f"(calls x latency / concurrency); load average {load} (1/5/15 min) at the end")
    print(f"  RESULT: whole run {wall:.1f} s = {wall / ideal:.2f}x the ideal (target <= 1.20x); "
          f"asking {sec['asking']:.1f} s = {sec['asking'] / ideal:.2f}x")
    print(f"  floor:  bare litellm.acompletion, the same {calls:.0f} calls, {args.concurrency} in flight: {bare:.1f} s = "
          f"{bare / ideal:.2f}x the ideal (this machine, now)")
    print(f"  steps:  " + ", ".join(f"{k} {v:.1f} s" for k, v in sec.items())
          + f" (reading includes importing litellm: {startup:.1f} s in a fresh process now)")
    print(f"  CPU per call: ragexp {1000 * report['cpu_seconds_asking'] / calls:.2f} ms "
          f"(asking, filters included), bare litellm {1000 * bare_cpu / calls:.2f} ms")
    print(f"  kept {report['kept']}, filtered {report['filtered']}; cached re-run {cached:.1f} s, "
          f"{again['judge']['calls']:.0f} calls")
    for f in failures:
        print(f"BROKEN: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
