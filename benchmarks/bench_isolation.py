"""What running the user's code through ragexp/common/isolation.py costs per call (docs/guarantees.md,
"Your code cannot stop ragexp"): ``UserCode.call`` (a fresh daemon thread, waited for with a deadline)
against calling the same function directly, and, for comparison, the other way considered — the same
call sent to a separate worker process and its answer read back over a pipe (what a subprocess-per-app
design pays per question, before any pickling of real answers). Rounds alternate the three ways.

    python benchmarks/bench_isolation.py --calls 2000 --rounds 3
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

from ragexp.common.isolation import UserCode


def answer(question: str) -> str:
    return question.upper()


def _serve(conn) -> None:
    while True:
        question = conn.recv()
        if question is None:
            return
        conn.send(answer(question))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    code = UserCode("bench:answer", timeout_s=60)
    ours, theirs = multiprocessing.Pipe()
    worker = multiprocessing.get_context("fork").Process(target=_serve, args=(theirs,), daemon=True)
    worker.start()

    def direct() -> None:
        answer("how many queens?")

    def isolated() -> None:
        assert code.call(answer, "how many queens?").ok

    def subprocess_roundtrip() -> None:
        ours.send("how many queens?")
        ours.recv()

    per: dict[str, list[float]] = {"direct": [], "isolated": [], "subprocess": []}
    for _ in range(args.rounds):
        for name, fn in (("direct", direct), ("isolated", isolated), ("subprocess", subprocess_roundtrip)):
            t0 = time.perf_counter()
            for _ in range(args.calls):
                fn()
            per[name].append((time.perf_counter() - t0) / args.calls)
    ours.send(None)
    worker.join(5)
    best = {name: min(v) for name, v in per.items()}
    print(f"load average {os.getloadavg()[0]:.1f}; {args.calls} calls x {args.rounds} rounds, best round per call:")
    for name, seconds in best.items():
        print(f"  {name:<10} {seconds * 1e6:8.1f} us")
    print(f"  isolation overhead per call: {(best['isolated'] - best['direct']) * 1e6:.0f} us; "
          f"a subprocess round trip: {(best['subprocess'] - best['direct']) * 1e6:.0f} us")


if __name__ == "__main__":
    main()
