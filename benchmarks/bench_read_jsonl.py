"""What reading and checking a JSONL file of records costs: ``load_mapped`` (``dataset=mapped``, the path
``ragexp.evaluate(path)`` reads a ``.jsonl`` by), this tree against another tree's, in turns.

    python benchmarks/bench_read_jsonl.py --against /tmp/old_tree [--n 5000] [--rounds 5] [--reps 5]

``--against``: a folder holding another version of the ``ragexp`` package (``git archive <commit> ragexp conf |
tar -x -C /tmp/old_tree``). The records are bench_peers.py's (benchmarks/realistic_records.py: SQuAD v2
questions, five retrieved paragraphs, a sentence answer; ~5.7 KB a line). Each round starts one process per
tree, in turns; each process reads the file ``--reps`` times (the first read, imports and all, not counted)
and prints its best CPU seconds per read. Printed: each round's figures, the median ratio other / this
(above 1: this tree reads faster), the load average, and whether both trees give the same records
(``repr`` of every Record, hashed): it exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_peers import english_records  # noqa: E402  (benchmarks/ is not a package)

HERE = Path(__file__).resolve().parents[1]

CHILD = """
import gc, hashlib, sys, time
from ragexp.datasets.mapped import load_mapped
path, reps = sys.argv[1], int(sys.argv[2])
records = load_mapped(path).records
digest = hashlib.sha256(repr(records).encode("utf-8", "surrogatepass")).hexdigest()[:16]
del records
best = float("inf")
for _ in range(reps):
    gc.collect()
    t = time.process_time()
    load_mapped(path)
    best = min(best, time.process_time() - t)
print(best, digest, len(load_mapped(path).records))
"""


def read_cpu(tree: Path, path: Path, reps: int) -> tuple[float, str, int]:
    """(best CPU seconds of one read, the records' digest, their count) in a fresh process on ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    out = subprocess.run([sys.executable, "-c", CHILD, str(path), str(reps)], env=env, cwd=tree, check=True,
                         capture_output=True, text=True).stdout.split()
    return float(out[0]), out[1], int(out[2])


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--against", required=True, help="a folder holding another version of the ragexp package")
    ap.add_argument("--n", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    a = ap.parse_args()
    path = english_records(Path(tempfile.mkdtemp(prefix="bench_read_jsonl_")) / "records.jsonl", a.n)
    trees = {"this": HERE, "other": Path(a.against).resolve()}
    times: dict[str, list[float]] = {"this": [], "other": []}
    digests: dict[str, set[str]] = {"this": set(), "other": set()}
    load = [os.getloadavg()[0]]
    for _ in range(a.rounds):
        for side, tree in trees.items():
            cpu, digest, n = read_cpu(tree, path, a.reps)
            times[side].append(cpu)
            digests[side].add(f"{digest}/{n}")
        load.append(os.getloadavg()[0])
    ratio = statistics.median(o / t for o, t in zip(times["other"], times["this"]))
    same = digests["this"] == digests["other"] and len(digests["this"]) == 1
    print(f"load_mapped of {a.n:,} records ({path.stat().st_size / 1e6:.1f} MB), best CPU seconds of {a.reps} reads:")
    for side in trees:
        print(f"  {side:5s} ({trees[side]}): " + ", ".join(f"{t:.3f}" for t in times[side]))
    print(f"other / this {ratio:.2f}x (median of {a.rounds} rounds in turns); records "
          + ("identical" if same else f"DIFFER ({digests})"))
    print(f"load average (1 min) {min(load):.1f}-{max(load):.1f}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
