"""What a run's pictures cost (``tracking.plots``), against writing its two per-sample tables.

The demo (50 questions, the default suite: 43 metric keys) is scored once as the CLI scores it
(``ragexp.workflow.runner.execute``, nothing saved); then, in this process, each step is timed (wall and
CPU) on the run's plain per-sample columns, as ``python -m ragexp`` does them: writing
``per_sample.json`` (trimmed) and ``per_sample_full.json``; importing matplotlib; drawing
``metrics.png`` + ``histograms.png`` the first time and again. The ratio to the tables is printed.

    python benchmarks/bench_plots.py
    python benchmarks/bench_plots.py --broken   # a run with no sample: exits 1

It exits 1 unless it drew both pictures of a run with samples.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def timed(fn, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


def main() -> int:
    from hydra import compose, initialize_config_dir

    from ragexp.common.paths import conf_dir
    from ragexp.report.plots import run_plots
    from ragexp.results.columns import split_json_parts, table_columns
    from ragexp.workflow.runner import execute

    with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["progress=false"])
    outcome = execute(cfg, save=False, show=False)
    full, summary = outcome.per_sample, outcome.summary
    if "--broken" in sys.argv[1:]:  # a run with no sample: nothing worth drawing, the script must exit 1
        full, summary = {k: [] for k in full}, {**summary, "n_samples": 0, "metrics": {}, "intervals": {}}
    folder = Path(tempfile.mkdtemp(prefix="bench_plots_"))

    def tables():
        (folder / "per_sample_full.json").write_text("".join(split_json_parts(full)))  # the JSON baseline (runs write Parquet)
        (folder / "per_sample.json").write_text("".join(split_json_parts(table_columns(full))))

    _, base_wall, base_cpu = timed(tables)
    _, imp_wall, imp_cpu = timed(importlib.import_module, "matplotlib.figure")  # what the pictures import
    _, first_wall, first_cpu = timed(run_plots, folder, full, summary)
    _, again_wall, again_cpu = timed(run_plots, folder, full, summary)
    load = os.getloadavg()[0]
    print(f"demo: {summary['n_samples']} samples, {len(summary['metrics'])} metric keys; load average {load:.1f} "
          f"on {os.cpu_count()} CPUs")
    print(f"{'step':<34}{'wall s':>9}{'CPU s':>9}{'× tables (CPU)':>16}")
    for name, wall, cpu in (("tables (baseline)", base_wall, base_cpu),
                            ("import matplotlib (Agg)", imp_wall, imp_cpu),
                            ("metrics.png + histograms.png", first_wall, first_cpu),
                            ("the same, again", again_wall, again_cpu)):
        print(f"{name:<34}{wall:>9.3f}{cpu:>9.3f}{cpu / base_cpu:>16.1f}")
    print(f"tracking.plots=true adds {imp_cpu + first_cpu:.2f} s CPU to a run; tracking.plots=false skips it all")
    drawn = [f for f in ("metrics.png", "histograms.png") if (folder / f).is_file() and (folder / f).stat().st_size > 1000]
    if len(drawn) != 2 or summary["n_samples"] < 1:
        print(f"bench_plots: FAILED: drew {drawn or 'nothing'} from {summary['n_samples']} samples, not the run's "
              "two pictures", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
