"""``python -m ragexp.generate`` as a process against the ideal wall: 1,000 questions, 2 calls each, 0.5 s replies, 32 in flight.

    python benchmarks/bench_generate.py [--n 1000] [--latency 0.5] [--concurrency 32] [--rounds 2] [--tracking]
                                        [--against DIR] [--broken]

The stand-in judge (``ragexp.standin_judge`` through tests/judge_server.py, in its own process) answers every
request after ``--latency`` seconds and notes when each arrived. What is timed is **the whole process**: the
command as a user types it (``python -m ragexp.generate corpus.path=… n=1000 judge=openai_compatible
judge.api_base=… judge.max_concurrency=32 chunker=words chunker.size=40 …``), from its start to its exit, in an
empty folder (a fresh judge cache), on SQuAD v2's 646 paragraphs cut into 40-word chunks; tracking off unless
``--tracking`` (then the command's default: a local MLflow run in that folder). The ideal wall is
``calls × latency / concurrency``. Beside it, in the same run and in turns with it (``--rounds``):

- ``bare``: a fresh Python process that imports litellm and sends the very requests the command sent (their
  messages and response_format, read from the server's log) with ``litellm.acompletion``, as many in flight, then
  exits: the peer's whole process, what this machine allows at that moment (its asking phase: bare litellm's
  calls alone);
- ``--against DIR``: the same command run from an earlier copy of ragexp's code, for a before/after in one run
  (its test set must be byte for byte the same).

Printed per round: the command's wall as a ratio to the ideal (``RESULT``), and for each process where its wall
went — start-up (to the first request the server saw), asking (first request to the last reply), the end (last
reply to the exit) — the concurrency the server saw while asking (``calls × latency ÷ asking``: 32 means no slot
idle), the report's seconds per step, each phase's CPU (the process's, sampled from /proc), CPU per call (the whole
process's CPU divided by the calls), and the load average (1/5/15 min): on a busy machine the CPU figures are the
ones to compare code with, on a quiet one the start-up and end CPU is about their wall. A cached re-run (zero calls) ends it.

It checks it measured what it names: ``n`` items, 2 calls each (no filter dropped one before its check), the
report adding up, the server seeing as many requests as the report counts, and the re-run making no call;
otherwise it exits non-zero (``--broken`` sets the answer length bound to 0 words, so every question is
filtered before its check: 1 call each).
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
import asyncio, json, sys
import litellm
requests = json.load(open(sys.argv[1]))
url, concurrency = sys.argv[2], int(sys.argv[3])

async def main():
    sem = asyncio.Semaphore(concurrency)

    async def one(body):
        async with sem:
            extra = {"response_format": body["response_format"]} if body.get("response_format") else {}
            await litellm.acompletion(model="hosted_vllm/" + body["model"], api_base=url, messages=body["messages"],
                                      max_tokens=body.get("max_tokens"), temperature=body.get("temperature"),
                                      num_retries=0, max_retries=0, **extra)

    await asyncio.gather(*[one(b) for b in requests])

asyncio.run(main())
"""


TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int) -> float | None:
    """User + system CPU seconds of a live process so far (/proc), None once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / TICK
    except (OSError, IndexError, ValueError):
        return None


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


def timed(argv: list[str], cwd: Path, server: Server, latency: float, tree: str | None = None) -> dict:
    """A process run to its end, and the requests it sent: its wall and CPU in three phases — start-up (to the first
    request the server saw), asking (to the last reply) and the end (to its exit); CPU sampled from /proc every
    20 ms. ``tree``: another copy of ragexp's code to run instead of this one."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HF_HUB_OFFLINE": "1"}
    if tree:
        env["PYTHONPATH"] = tree
    env.pop("MLFLOW_TRACKING_URI", None)
    trace: list[tuple[float, float]] = []
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out = []
    reader = __import__("threading").Thread(target=lambda: out.append(proc.communicate()), daemon=True)
    reader.start()
    while proc.poll() is None:
        if (cpu := cpu_of(proc.pid)) is not None:
            trace.append((time.monotonic() - start, cpu))
        time.sleep(0.02)
    wall = time.monotonic() - start
    reader.join()
    stdout, stderr = out[0]
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])}… exited {proc.returncode}:\n{stderr[-3000:]}")
    seen = server.log()
    first = min((at for at, _ in seen), default=start + wall) - start  # no request (a cached re-run): all start-up
    last = max((at - start + latency for at, _ in seen), default=wall)

    def cpu_at(t: float) -> float:
        return next((c for at, c in trace if at >= t), trace[-1][1] if trace else 0.0)

    total = trace[-1][1] if trace else 0.0
    return {"wall": wall, "cpu": total, "startup": first, "asking": last - first, "end": wall - last,
            "cpu_startup": cpu_at(first), "cpu_asking": cpu_at(last) - cpu_at(first), "cpu_end": total - cpu_at(last),
            "seen": seen, "stdout": stdout}


def command(args: argparse.Namespace, corpus: Path, url: str) -> list[str]:
    return [sys.executable, "-m", "ragexp.generate", f"corpus.path={corpus}", f"n={args.n}", "seed=0", "min_words=20",
            "kinds.factoid=0.4", "kinds.descriptive=0.3", "kinds.multi=0.3", "filters.question_words=[4,60]",
            f"filters.answer_max_words={0 if args.broken else 200}", "chunker=words", "chunker.size=40",
            "chunker.overlap=0", "judge=openai_compatible", f"judge.api_base={url}",
            f"judge.max_concurrency={args.concurrency}", *([] if args.tracking else ["tracking.enabled=false"])]


def one_round(args, work: Path, corpus: Path, server: Server, k: int, failures: list[str]) -> dict:
    runs = {}
    if args.against:  # the earlier code's command, in its own empty folder
        (work / f"against{k}").mkdir()
        runs["against"] = timed(command(args, corpus, server.url), work / f"against{k}", server, args.latency,
                                args.against)
    folder = work / f"round{k}"
    folder.mkdir()
    runs["ragexp"] = timed(command(args, corpus, server.url), folder, server, args.latency)
    seen = runs["ragexp"]["seen"]
    report = json.loads((folder / "generation_report.json").read_text())
    calls = report["judge"]["calls"]
    requests = folder / "requests.json"
    requests.write_text(json.dumps([body for _, body in seen]))
    runs["bare"] = timed([sys.executable, "-c", BARE, str(requests), server.url, str(args.concurrency)], folder,
                         server, args.latency)
    if args.against and (work / f"against{k}" / "testset.jsonl").read_bytes() != (folder / "testset.jsonl").read_bytes():
        failures.append(f"round {k + 1}: the test set differs from --against's")
    if report["asked"] != args.n or calls != 2 * args.n:
        failures.append(f"expected {args.n} items with 2 calls each, got {report['asked']} items and {calls:.0f} calls")
    if report["asked"] != report["kept"] + sum(sum(report[g].values()) for g in ("filtered", "failed", "not_generated")):
        failures.append("the report does not add up")
    if len(seen) != calls or len(runs["bare"]["seen"]) != calls:
        failures.append(f"the server saw {len(seen)} requests from the command, {len(runs['bare']['seen'])} from the "
                        f"bare process; the report counts {calls:.0f}")
    return {"calls": calls, "report": report, **runs}


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
        cached = timed(command(args, corpus, server.url), again, server, args.latency)
        re_calls = json.loads((again / "generation_report.json").read_text())["judge"]["calls"]
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
        print(f"round {k + 1}: {calls:.0f} calls, ideal {ideal:.2f} s (calls x latency / concurrency); the report's "
              "steps: " + ", ".join(f"{k} {v:.1f} s" for k, v in r["report"]["seconds"].items()))
        me = r["ragexp"]
        print(f"  RESULT: whole process {me['wall']:.1f} s = {me['wall'] / ideal:.2f}x the ideal (target <= 1.20x); "
              f"bare litellm process {r['bare']['wall'] / ideal:.2f}x"
              + (f"; --against {r['against']['wall'] / ideal:.2f}x" if "against" in r else ""))
        print(f"  {'':<8} {'whole':>14} {'start-up':>16} {'asking (in flight)':>26} {'end':>15} {'CPU/call':>9}")
        for name in ("ragexp", "bare", "against"):
            if name in r:
                x = r[name]
                print(f"  {name:<8} {x['wall']:6.1f} s {x['wall'] / ideal:5.2f}x {x['startup']:5.1f} s {x['cpu_startup']:4.1f} "
                      f"CPU {x['asking']:5.1f} s {x['asking'] / ideal:4.2f}x ({calls * args.latency / x['asking']:4.1f}) "
                      f"{x['cpu_asking']:4.1f} CPU {x['end']:4.1f} s {x['cpu_end']:4.1f} CPU {1000 * x['cpu'] / calls:6.2f} ms")
    print(f"kept {rounds[0]['report']['kept']}, filtered {rounds[0]['report']['filtered']}; cached re-run (whole "
          f"process) {cached['wall']:.1f} s, {cached['cpu']:.1f} s CPU, {re_calls:.0f} calls")
    for f in failures:
        print(f"BROKEN: {f}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
