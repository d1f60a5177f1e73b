"""``python -m ragexp.generate`` as a process against the ideal wall: 1,000 questions, 2 calls each, 0.5 s replies, 32 in flight.

    python benchmarks/bench_generate.py [--n 1000] [--latency 0.5] [--concurrency 32] [--rounds 2] [--tracking]
                                        [--broken]

The stand-in judge (``ragexp.standin_judge`` through tests/judge_server.py, in its own process) answers every
request after ``--latency`` seconds and notes when each arrived. What is timed is **the whole process**: the
command as a user types it (``python -m ragexp.generate corpus.path=… n=1000 judge=openai_compatible
judge.api_base=… judge.max_concurrency=32 chunker=words chunker.size=40 …``), from its start to its exit, in an
empty folder (a fresh judge cache), on SQuAD v2's 646 paragraphs cut into 40-word chunks; tracking off unless
``--tracking`` (then the command's default: a local MLflow run in that folder). The ideal wall is
``calls × latency / concurrency``. Beside it, in the same run and in turns with it (``--rounds``):

- ``bare process``: a fresh Python process that imports litellm and sends the very requests the command sent
  (their messages and response_format, read from the server's log) with ``litellm.acompletion``, as many in
  flight, then exits: the peer's whole process, what this machine allows at that moment;
- ``--against DIR``: the same command run from an earlier copy of ragexp's code, for a before/after in one run;
- ``bare calls``: the same, timed inside that process from the first call to the last reply (its start-up: spawn
  to the first call; its end: the last reply to its exit).

Printed per round: the command's wall as a ratio to the ideal (``RESULT``), where its wall went — start-up (to
the first request the server saw), asking (first request to the last reply), the end (last reply to the exit)
— the concurrency the server saw while asking (``calls × latency ÷ asking``: 32 means no slot idle), the
report's seconds per step, CPU per call (the process's CPU, from ``resource``, divided by the calls), and the
load average (1/5/15 min). A cached re-run (zero calls) ends it.

It checks it measured what it names: ``n`` items, 2 calls each (no filter dropped one before its check), the
report adding up, the server seeing as many requests as the report counts, and the re-run making no call;
otherwise it exits non-zero (``--broken`` sets the answer length bound to 0 words, so every question is
filtered before its check: 1 call each).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("RAGEXP_DATA_DIR", ROOT.parent / "shared" / "data"))

SERVER = """
import json, sys
sys.path.insert(0, {tests!r})
from judge_server import JudgeServer
s = JudgeServer(latency={latency}).start()
print(s.url, flush=True)
for line in sys.stdin:  # 'log': the requests since the last 'log' (arrival time, body), then forgotten
    with s.lock:
        got = [(r.at, r.body) for r in s.log]
        s.log.clear()
    print(json.dumps(got), flush=True)
"""

#: the peer's whole process: import litellm, send the given requests, as many in flight, exit
BARE = """
import asyncio, json, sys, time
import litellm
requests = json.load(open(sys.argv[1]))
url, concurrency = sys.argv[2], int(sys.argv[3])

async def main():
    sem = asyncio.Semaphore(concurrency)

    async def one(body):
        async with sem:
            extra = {{"response_format": body["response_format"]}} if body.get("response_format") else {{}}
            await litellm.acompletion(model="hosted_vllm/" + body["model"], api_base=url, messages=body["messages"],
                                      max_tokens=body.get("max_tokens"), temperature=body.get("temperature"),
                                      num_retries=0, max_retries=0, **extra)

    t = time.monotonic()
    await asyncio.gather(*[one(b) for b in requests])
    return t, time.monotonic()

first, last = asyncio.run(main())
print(json.dumps({{"first": first, "last": last}}), flush=True)
"""


def child_cpu() -> float:
    """User + system CPU seconds of the children this process has waited for so far."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


class Server:
    def __init__(self, latency: float):
        self.proc = subprocess.Popen([sys.executable, "-c", SERVER.format(tests=str(ROOT / "tests"), latency=latency)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()

    def log(self) -> list[tuple[float, dict]]:
        self.proc.stdin.write("log\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def timed(argv: list[str], cwd: Path, tree: str | None = None) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """(start, wall, CPU) of a process run to its end (start on the monotonic clock the server notes arrivals on);
    ``tree``: another copy of ragexp's code to run instead of this one."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    if tree:
        env["PYTHONPATH"] = tree
    env.pop("MLFLOW_TRACKING_URI", None)
    cpu = child_cpu()
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}… exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return start, wall, child_cpu() - cpu, proc


def command(args: argparse.Namespace, corpus: Path, url: str) -> list[str]:
    return [sys.executable, "-m", "ragexp.generate", f"corpus.path={corpus}", f"n={args.n}", "seed=0", "min_words=20",
            "kinds.factoid=0.4", "kinds.descriptive=0.3", "kinds.multi=0.3", "filters.question_words=[4,60]",
            f"filters.answer_max_words={0 if args.broken else 200}", "chunker=words", "chunker.size=40",
            "chunker.overlap=0", "judge=openai_compatible", f"judge.api_base={url}",
            f"judge.max_concurrency={args.concurrency}", *([] if args.tracking else ["tracking.enabled=false"])]


def earlier(args, work: Path, corpus: Path, server: Server, k: int) -> dict:
    """The command of ``--against``'s copy of ragexp, in its own empty folder: its wall and CPU."""
    folder = work / f"against{k}"
    folder.mkdir()
    start, wall, cpu, _ = timed(command(args, corpus, server.url), folder, args.against)
    seen = server.log()
    return {"wall": wall, "cpu": cpu, "startup": min(at for at, _ in seen) - start,
            "end": wall - (max(at for at, _ in seen) + args.latency - start)}


def one_round(args, work: Path, corpus: Path, server: Server, k: int, failures: list[str]) -> dict:
    before = earlier(args, work, corpus, server, k) if args.against else None
    folder = work / f"round{k}"
    folder.mkdir()
    start, wall, cpu, proc = timed(command(args, corpus, server.url), folder)
    seen = server.log()
    report = json.loads((folder / "generation_report.json").read_text())
    calls = report["judge"]["calls"]
    arrivals = [at - start for at, _ in seen]
    first, last = min(arrivals), max(arrivals) + args.latency
    requests = folder / "requests.json"
    requests.write_text(json.dumps([body for _, body in seen]))
    b_start, b_wall, b_cpu, b_proc = timed([sys.executable, "-c", BARE.format(), str(requests), server.url,
                                            str(args.concurrency)], folder)
    b_seen = server.log()
    b_times = json.loads(b_proc.stdout.strip().splitlines()[-1])
    if report["asked"] != args.n or calls != 2 * args.n:
        failures.append(f"expected {args.n} items with 2 calls each, got {report['asked']} items and {calls:.0f} calls")
    if report["asked"] != report["kept"] + sum(sum(report[g].values()) for g in ("filtered", "failed", "not_generated")):
        failures.append("the report does not add up")
    if len(seen) != calls or len(b_seen) != calls:
        failures.append(f"the server saw {len(seen)} requests from the command, {len(b_seen)} from the bare process; "
                        f"the report counts {calls:.0f}")
    return {"calls": calls, "wall": wall, "cpu": cpu, "startup": first, "asking": last - first, "end": wall - last,
            "report": report, "bare_wall": b_wall, "bare_cpu": b_cpu, "bare_calls": b_times["last"] - b_times["first"],
            "bare_startup": b_times["first"] - b_start, "bare_end": b_wall - (b_times["last"] - b_start),
            "against": before}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--latency", type=float, default=0.5)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tracking", action="store_true", help="the command's default tracking (a local MLflow run)")
    ap.add_argument("--against", metavar="DIR", help="an earlier copy of ragexp's code (git archive <commit> | tar -x "
                    "-C DIR): its command runs in turns too")
    ap.add_argument("--broken", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    from ragexp.datasets.squad2 import load_squad2

    work = Path(tempfile.mkdtemp(prefix="bench_generate_"))
    corpus = work / "squad_paragraphs.jsonl"
    docs = load_squad2(str(DATA / "squad2" / "dev-v2.0.json")).corpus
    corpus.write_text("".join(json.dumps({"id": k, "text": v}) + "\n" for k, v in docs.items()))
    server = Server(args.latency)
    failures: list[str] = []
    try:
        rounds = [one_round(args, work, corpus, server, k, failures) for k in range(args.rounds)]
        again = work / "again"
        again.mkdir()
        (again / ".ragexp_cache").symlink_to(work / "round0" / ".ragexp_cache")
        _, cached, _, _ = timed(command(args, corpus, server.url), again)
        re_calls = json.loads((again / "generation_report.json").read_text())["judge"]["calls"]
        server.log()
    finally:
        server.close()
    if re_calls != 0:
        failures.append(f"the cached re-run made {re_calls:.0f} calls")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"n={args.n} latency={args.latency}s concurrency={args.concurrency} tracking={'on' if args.tracking else 'off'}; "
          f"load average {load} (1/5/15 min) at the end")
    for k, r in enumerate(rounds):
        calls = r["calls"]
        ideal = calls * args.latency / args.concurrency
        sec = r["report"]["seconds"]
        print(f"round {k + 1}: {calls:.0f} calls, ideal {ideal:.2f} s (calls x latency / concurrency)")
        print(f"  RESULT: whole process {r['wall']:.1f} s = {r['wall'] / ideal:.2f}x the ideal (target <= 1.20x); "
              f"bare litellm process {r['bare_wall']:.1f} s = {r['bare_wall'] / ideal:.2f}x, "
              f"its calls alone {r['bare_calls']:.1f} s = {r['bare_calls'] / ideal:.2f}x")
        print(f"  where: start-up {r['startup']:.1f} s (to the first request), asking {r['asking']:.1f} s "
              f"(= {r['asking'] / ideal:.2f}x; {calls * args.latency / r['asking']:.1f} in flight on average), "
              f"end {r['end']:.1f} s (last reply to exit); bare process: start-up {r['bare_startup']:.1f} s, "
              f"end {r['bare_end']:.1f} s")
        print("  steps:  " + ", ".join(f"{k} {v:.1f} s" for k, v in sec.items()))
        if (a := r["against"]) is not None:
            print(f"  against {args.against}: whole process {a['wall']:.1f} s = {a['wall'] / ideal:.2f}x; start-up "
                  f"{a['startup']:.1f} s, end {a['end']:.1f} s; CPU per call {1000 * a['cpu'] / calls:.2f} ms")
        print(f"  CPU per call: ragexp process {1000 * r['cpu'] / calls:.2f} ms, bare litellm process "
              f"{1000 * r['bare_cpu'] / calls:.2f} ms (whole processes)")
    print(f"kept {rounds[0]['report']['kept']}, filtered {rounds[0]['report']['filtered']}; cached re-run (whole "
          f"process) {cached:.1f} s, {re_calls:.0f} calls")
    for f in failures:
        print(f"BROKEN: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
