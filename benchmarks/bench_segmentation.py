"""Chinese segmentation: ragexp.common.segmentation (jieba's words from an on-disk index) against jieba itself.

    python benchmarks/bench_segmentation.py                 # 5 fresh processes per case (--repeat N)
    python benchmarks/bench_segmentation.py --data-dir ../shared/data

Workloads: the Chinese runs of the bundled demo data (what ``python -m ragexp`` segments) and every
distinct Chinese run of the shared data (crud_questeval, memory_eval, halueval, …), each handed to
the segmenter as ``ragexp.common.text`` hands it (a run of CJK characters).

Each case is a fresh ``python`` subprocess (``ragexp`` already imported, as in a run), the two cases
round-robin so a change in the machine's load touches both alike; the median of each figure is
printed with the ratio jieba / index:

- first call: from before importing the segmenter to the first run's words (jieba: ``import jieba``
  and its dictionary load from ``/tmp/jieba.cache``; index: importing ragexp.common.segmentation and opening
  the SQLite index);
- the demo's runs, then every run of the data (each new to the process), then the data again (the
  index's memo warm; jieba's dictionary is all in memory from the start).

Before the rounds, the index is built once in a private cache folder (the one-off cost a user pays
on the first Chinese text ever, printed on its own), and jieba's own cache is warmed by one process.
The children print a digest of every word list; the script stops if the two cases differ.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HAN_RUN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")

CHILD = r"""
import hashlib, json, sys, time
import ragexp
demo, data = json.load(open(sys.argv[1], encoding="utf-8"))
backend = sys.argv[2]
t0 = time.perf_counter()
if backend == "jieba":
    import logging
    import jieba
    jieba.setLogLevel(logging.WARNING)
    segment = jieba.lcut
else:
    from ragexp.common.segmentation import segment
first = segment(demo[0])
t1 = time.perf_counter()
words = [segment(r) for r in demo]
t2 = time.perf_counter()
words += [segment(r) for r in data]
t3 = time.perf_counter()
again = [segment(r) for r in data]
t4 = time.perf_counter()
if backend == "index":
    from ragexp.common.segmentation import backend as which
    assert which() == "index", which()
digest = hashlib.sha1(json.dumps([first, words, again], ensure_ascii=False).encode()).hexdigest()
print(json.dumps({"first": t1 - t0, "demo": t2 - t1, "data": t3 - t2, "again": t4 - t3, "digest": digest}))
"""


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, (dict, list)):
        for v in value.values() if isinstance(value, dict) else value:
            yield from _strings(v)


def _texts(path: Path):
    text = path.read_text("utf-8", errors="replace")
    if path.suffix not in {".json", ".jsonl"}:
        yield text
        return
    try:  # decoded, so \u escapes count
        yield from _strings(json.loads(text))
    except json.JSONDecodeError:  # JSON lines
        for line in filter(str.strip, text.splitlines()):
            yield from _strings(json.loads(line))


def _runs(paths) -> list[str]:
    runs: dict[str, None] = {}  # first-seen order
    for path in paths:
        for text in _texts(path):
            for run in HAN_RUN.findall(text):
                runs.setdefault(run)
    return list(runs)


def _child(workload: Path, backend: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, str(workload), backend], env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"{backend} child failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5, help="fresh processes per case (the median is printed)")
    ap.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    args = ap.parse_args()

    demo = _runs(sorted((ROOT / "ragexp" / "datasets" / "demo").glob("*.jsonl")))
    seen = set(demo)
    data = [r for r in _runs(sorted(p for p in args.data_dir.rglob("*") if p.suffix in {".json", ".jsonl", ".csv"}))
            if r not in seen]
    print(f"workload: {len(demo)} demo runs ({sum(map(len, demo)):,} characters), "
          f"{len(data):,} data runs ({sum(map(len, data)):,} characters)")

    with tempfile.TemporaryDirectory() as tmp:
        workload = Path(tmp) / "runs.json"
        workload.write_text(json.dumps([demo, data], ensure_ascii=False), encoding="utf-8")
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache")}

        t = time.perf_counter()
        build = subprocess.run([sys.executable, "-c", "from ragexp.common.segmentation import open_index; "
                                "assert open_index().built"], env=env, capture_output=True, text=True)
        if build.returncode != 0:
            sys.exit(f"building the index failed:\n{build.stderr[-2000:]}")
        print(f"index built once (fresh process, jieba imported to read its dict.txt): "
              f"{time.perf_counter() - t:.2f} s wall")
        _child(workload, "jieba", env)  # jieba's /tmp/jieba.cache exists, as after any first use

        figures: dict[str, list[dict]] = {"jieba": [], "index": []}
        for _ in range(args.repeat):
            for backend in figures:
                figures[backend].append(_child(workload, backend, env))

    digests = {b: {f["digest"] for f in runs} for b, runs in figures.items()}
    if len(digests["jieba"] | digests["index"]) != 1:
        sys.exit(f"the two segmenters disagree: {digests}")
    print(f"words identical in every process ({args.repeat} rounds, digest {digests['index'].pop()[:12]})\n")
    rows = [("first call (import + first run)", "first"), (f"demo runs ({len(demo)})", "demo"),
            (f"data runs ({len(data):,}), new to the process", "data"), ("data runs again", "again")]
    print(f"{'median of ' + str(args.repeat) + ' fresh processes':<44}{'jieba':>11}{'index':>11}{'jieba/index':>13}")
    for label, key in rows:
        j = statistics.median(f[key] for f in figures["jieba"])
        i = statistics.median(f[key] for f in figures["index"])
        print(f"{label:<44}{j * 1000:>8.1f} ms{i * 1000:>8.1f} ms{j / i:>12.1f}×")
    load = os.getloadavg()[0]
    print(f"\nload average {load:.1f} on {os.cpu_count()} cores")


if __name__ == "__main__":
    main()
