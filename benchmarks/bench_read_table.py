"""What reading CSV/TSV cells as text costs (ragexp.datasets.base.read_delimited).

    python benchmarks/bench_read_table.py --data-dir ../shared/data

The seven Tonic Validate run CSVs (real answers with commas, quotes and newlines inside quoted
cells), repeated to about 20,000 rows in one file, read three ways in the same process:

1. ``read_delimited`` — the csv module, every cell text, row-length and quote checks;
2. baseline: ``pandas.read_csv(dtype=str, keep_default_na=False)`` — the same text cells, but
   no row-length check (a short row is padded silently);
3. the previous reader: ``pandas.read_csv`` with type guessing, then ``to_dict("records")``.

It checks that 1 and 2 give the same cells (empty → None in 1) and prints rows/s and ratios.
Nothing is asserted about speed.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
import time
from pathlib import Path


def _best(fn, repeat: int = 3) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / "shared" / "data"))
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--out", default="/tmp/ragexp_bench_read_table.csv")
    ap.add_argument("--broken", action="store_true", help="no Tonic run files: must exit 1")
    args = ap.parse_args()

    import pandas as pd

    from ragexp.datasets.base import read_delimited

    runs = sorted((Path(args.data_dir) / "tonic_paul_graham" / ("missing" if args.broken else "runs")).glob("*.csv"))
    if not runs:
        print(f"bench_read_table: FAILED: no Tonic run files under {args.data_dir}: nothing to read", file=sys.stderr)
        return 1
    header, body = None, []
    for f in runs:
        rows = list(csv.reader(io.StringIO(f.read_text(encoding="utf-8"), newline="")))
        header = header or rows[0]
        body += [r for r in rows[1:] if r]
    out = Path(args.out)
    with open(out, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(args.rows):
            w.writerow(body[i % len(body)])
    size = out.stat().st_size / 1e6

    t_ours, ours = _best(lambda: [item for _, item in read_delimited(out, "csv")[1]])
    t_text, text = _best(lambda: pd.read_csv(out, dtype=str, keep_default_na=False).to_dict("records"))
    t_old, _ = _best(lambda: pd.read_csv(out).to_dict("records"))

    same = all({k: (v if v != "" else None) for k, v in b.items()} == a for a, b in zip(ours, text))
    print(f"{len(ours):,} rows, {size:.1f} MB ({len(runs)} Tonic run files repeated); same cells as pandas dtype=str: {same}")
    for name, t in (("read_delimited (csv module, checks)", t_ours),
                    ("pandas dtype=str, keep_default_na=False", t_text),
                    ("pandas with type guessing (previous)", t_old)):
        print(f"  {name:42s} {len(ours) / t:>10,.0f} rows/s  {t * 1e3:8.1f} ms  ratio to read_delimited {t / t_ours:5.2f}")
    if len(ours) != args.rows or not same:
        print(f"bench_read_table: FAILED: read {len(ours)} rows of {args.rows}; same cells as pandas: {same}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
