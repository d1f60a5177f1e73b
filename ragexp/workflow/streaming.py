"""A run over a big file in bounded memory (``execution.mode=stream``, or ``auto`` from
``execution.stream_from_mb``): the runner's steps, with the records read, scored and written chunk by chunk.

1. check: the metrics; then one pass over the file validates every record (a bad row stops the run
   before any scoring, as in memory) and notes what the checks need — how many records, which
   fields are present, the questions and outputs digests, the MLflow dataset's shape;
2. score: a second pass hands chunks of ``execution.chunk_records`` records to
   :func:`ragexp.core.tally.score_chunk`, in this process or in ``execution.processes`` forked
   processes (None: one per core while a core is free), and each chunk's per-sample rows go to
   ``per_sample.parquet`` (:class:`ragexp.results.tables.ParquetStream`) as it comes back, in order;
3. the run's one aggregator (:class:`ragexp.core.tally.Tally`) kept the numbers the run needs; the
   aggregates, intervals, trust, summary, results folder, table and MLflow run are the steps every run
   takes (:mod:`ragexp.workflow.steps`, run by :func:`ragexp.workflow.runner.execute`).

What is kept: 8 bytes per record per sample metric, 16 per confusion metric, the ids (for the
duplicate check) and ``tracking.table_rows`` rows for ``per_sample.json``. Runs with a pipeline,
``stats.cluster_by`` or a split are run in memory (the line printed says why), and so are runs with a
judge unless ``execution.mode=ray``: there each task asks the judge for its chunk (:func:`_node_judge`,
the cache ``judge.cache_backend`` names, shared by every node when it is PostgreSQL). Definitions and
figures: docs/performance.md, "Scale" and "Beyond one machine".
"""

from __future__ import annotations

import atexit
import collections
import dataclasses
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from omegaconf import DictConfig

from ragexp.common.files import remove_leftovers
from ragexp.common.paths import conf_file, plain
from ragexp.common.processes import fork_pool, processes_for
from ragexp.core.tally import ChunkPart, Tally, score_chunk, streamable
from ragexp.datasets.base import RecordSink, streamed
from ragexp.errors import RagexpError
from ragexp.workflow.steps import (Computed, Plan, Present, Survey, aggregate_step, check_store_step, labels_step,
                                   load_dataset, metrics_step, results_folder, trust_step, uncertainty_step)


def settings(cfg: DictConfig) -> dict[str, Any]:
    """``cfg.execution`` over its defaults, read from ``conf/execution/local.yaml`` (and, for the keys only Ray
    has, ``conf/execution/ray.yaml``)."""
    return {**conf_file("execution/ray"), **conf_file("execution/local"), **(plain(cfg.get("execution")) or {})}


def why_not(cfg: DictConfig, dataset: Any) -> str | None:
    """Why this run is not streamed (None: it is): ``execution.mode``, data given in memory, no file,
    a file under ``execution.stream_from_mb`` in ``auto`` mode, or a feature that needs every record at once."""
    ex = settings(cfg)
    mode = ex["mode"]
    if mode not in ("auto", "stream", "memory", "ray"):
        from ragexp.errors import ConfigError

        raise ConfigError(f"execution.mode must be one of auto, stream, memory, ray; got {mode!r}")
    if mode == "memory" or dataset is not None:
        return "in memory"
    ds = cfg.get("dataset") or {}
    path = ds.get("path") if hasattr(ds, "get") else None
    if not path or not Path(str(path)).is_file():
        return "no dataset file"
    if mode == "auto" and Path(str(path)).stat().st_size < float(ex["stream_from_mb"]) * 2 ** 20:
        return "a small file"
    if ds.get("split", "all") != "all":
        return "dataset.split"
    if (plain(cfg.get("stats")) or {}).get("cluster_by"):
        return "stats.cluster_by"
    if (plain(cfg.get("memory_layer")) or {}).get("name", "none") != "none":  # each conversation and its questions
        return "memory_layer"
    return None


_SPECS: list = []


def _fork_init(specs: list) -> None:
    global _SPECS
    from ragexp.common.isolation import die_with_parent

    die_with_parent()  # a kill -9 of the run leaves no scoring process behind (docs/guarantees.md)
    _SPECS = specs


def _score_in_worker(chunk: list) -> ChunkPart:
    return score_chunk(chunk, _SPECS)


class _Scorer(RecordSink):
    """The score pass: each chunk scored (here or in a pool of forked processes), its rows written."""

    def __init__(self, size: int, specs: list, table: Any, processes: int, bar: Any, columns: Any = None) -> None:
        self.size = size
        self.specs = specs
        self.table = table
        self.tally = Tally(specs) if columns is None else Tally(specs, columns)
        self.bar = bar
        self.pool = None
        self.pending: collections.deque = collections.deque()
        self.processes = processes
        if processes > 1:
            self.pool = fork_pool(processes, _fork_init, (specs,))

    def __call__(self, chunk: list) -> None:
        if self.pool is None:
            self._take(score_chunk(chunk, self.specs))
            return
        self.pending.append(self.pool.submit(_score_in_worker, chunk))
        while len(self.pending) > 2 * self.processes:  # a bounded number of chunks in flight
            self._take(self.pending.popleft().result())

    def finish(self) -> None:
        while self.pending:
            self._take(self.pending.popleft().result())
        self.close()

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown(cancel_futures=True)
            self.pool = None

    def _take(self, part: ChunkPart) -> None:
        from ragexp.common.secrets import scrub_columns

        self.tally.add(part)
        self.table.append(scrub_columns(part.table))
        if self.bar is not None:
            self.bar.update(part.n)


class _RayScorer(_Scorer):
    """The score pass on a Ray cluster: each chunk a task (one CPU) on whichever node is free, taken
    back in order; the specs sent to the object store once."""

    def __init__(self, size: int, specs: list, table: Any, address: str, in_flight: int | None, bar: Any,
                 columns: Any = None, judge: Any = None, labelled: set[str] = frozenset()) -> None:
        from ragexp._compat import import_ray, ray_exposed

        ray = import_ray(address)  # a local instance listens on 127.0.0.1 only
        super().__init__(size, specs, table, 1, bar, columns)
        self.started = not ray.is_initialized()
        if self.started:
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no usage report leaves the machine
            opts: dict[str, Any] = {"address": address, "log_to_driver": False,
                                    "runtime_env": {"env_vars": {k: os.environ[k] for k in _RAY_ENV if k in os.environ}}}
            if address == "local":
                opts.update(include_dashboard=False)
            from ragexp._compat import ray_loopback_options

            ray.init(**opts, **ray_loopback_options(address))
            if warning := ray_exposed(ray, address):
                print(warning, file=sys.stderr)
        self.task = ray.remote(num_cpus=1, max_retries=2)(_score_on_node)
        self.specs_ref = ray.put(specs)
        self.processes = int(ray.cluster_resources().get("CPU", 1))
        if judge is not None and judge.requests_per_minute:  # the run's rate, shared by the tasks asking at once
            judge = dataclasses.replace(judge, requests_per_minute=judge.requests_per_minute / self.processes)
        self.judge = judge
        self.labelled = labelled  # the run's label keys: each chunk pairs them with its judge's values
        self.in_flight = int(in_flight) if in_flight else 2 * self.processes
        self.nodes: set[str] = set()
        self.judge_calls: dict[str, int] = {}  # node → the calls its tasks sent to the judge

    def __call__(self, chunk: list) -> None:
        self.pending.append(self.task.remote(chunk, self.specs_ref, self.judge, self.labelled))
        while len(self.pending) > self.in_flight:
            self._take_ref(self.pending.popleft())

    def finish(self) -> None:
        while self.pending:
            self._take_ref(self.pending.popleft())
        self.close()

    def _take_ref(self, ref: Any) -> None:
        import ray

        try:
            node, part = ray.get(ref)
        except ray.exceptions.RayTaskError as exc:  # a judge's one-line error (unreachable, rejected key…) as itself
            if isinstance(exc.cause, (RagexpError, KeyboardInterrupt)):
                raise exc.cause from None
            raise
        self.nodes.add(node)
        if "judge/calls" in part.usage:
            self.judge_calls[node] = self.judge_calls.get(node, 0) + int(part.usage["judge/calls"])
        self._take(part)

    def close(self) -> None:
        import ray

        for ref in self.pending:
            ray.cancel(ref)
        self.pending.clear()
        if self.started and ray.is_initialized():
            ray.shutdown()
            self.started = False


#: environment variables a Ray worker gets from this process (no credential among them)
_RAY_ENV = ("LITELLM_LOCAL_MODEL_COST_MAP", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "RAGEXP_DATA_DIR")


def _score_on_node(chunk: list, specs: list, judge: Any = None, labelled: Any = ()) -> tuple[str, ChunkPart]:
    """A Ray task: the chunk's scores, and the node that computed them."""
    import ray

    return ray.get_runtime_context().get_node_id(), score_chunk(chunk, specs, _node_judge(judge), labelled)


_JUDGES: dict[str, Any] = {}


def _node_judge(settings: Any) -> Any:
    """The judge of these settings in this worker process, built once (its HTTP clients and cache connection
    kept from task to task); None for None. Its credentials are the node's environment's."""
    if settings is None:
        return None
    if repr(settings) not in _JUDGES:
        from ragexp.judge import build_judge

        _JUDGES.clear()
        _JUDGES[repr(settings)] = build_judge(settings)
    return _JUDGES[repr(settings)]


def _judge_settings(cfg: DictConfig, specs: list) -> tuple[Any, str | None]:
    """The judge the nodes build (checked here, before any work, as a run in memory checks it: credentials, cache,
    prompts), its cache path absolute; or the judge feature a streamed run cannot merge (it runs in memory)."""
    from ragexp.judge import build_judge

    judge = build_judge(cfg.get("judge"), [s for s in specs if s.info.judge])
    if judge.cache is not None:
        judge.cache.close()
    s = judge.settings
    for refused, why in ((s.samples > 1, "judge.samples > 1 (its noise statistics)"), (s.examples, "judge.examples"),
                         (s.max_cost_usd is not None, "judge.max_cost_usd (one budget for the whole run)")):
        if refused:
            return None, why
    return dataclasses.replace(s, cache_path=str(s.resolved_cache_path())), None


def score_streamed(cfg: DictConfig, tracking: dict[str, Any], dataset: Any, *, save: bool, show: bool
                   ) -> Computed | None:
    """The check and score steps of a run over its file in chunks (what comes after is every run's:
    :func:`ragexp.workflow.runner.execute`), its ``per_sample`` a :class:`ragexp.results.tables.StreamedTable`;
    None when the run holds its records in memory (a line says why when it asked for chunks)."""
    from ragexp.core.scoring import check_fields
    from ragexp.pipeline import build_pipeline
    from ragexp.stats.settings import stats_settings

    ex = settings(cfg)
    if (why := why_not(cfg, dataset)) is not None:
        return _in_memory(ex, {"in memory": "the records were passed in memory",
                               "no dataset file": "the dataset is not read from a file (dataset.path)"}.get(
            why, f"{why} needs every record at once"))
    specs, all_that_apply = metrics_step(cfg)
    if (why := streamable(specs, judged=ex["mode"] == "ray")) is not None:
        return _in_memory(ex, f"{why} needs every record at once")
    judge = None
    if any(s.info.judge for s in specs):
        judge, why = _judge_settings(cfg, specs)
        if why is not None:
            return _in_memory(ex, f"{why} needs every record at once")
    survey = Survey(max(1, int(ex["chunk_records"])))
    with streamed(survey):  # every record read and checked, none kept
        dataset = load_dataset(cfg.dataset)
    if build_pipeline(cfg, dataset) is not None:
        return _in_memory(ex, "a pipeline needs every record at once")
    specs, skipped = check_fields(specs, [Present(survey.fields())], dataset.name, all_that_apply)
    labels_step(specs, dataset, rows=survey.human)
    stats_cfg = stats_settings(plain(cfg.get("stats")))
    check_store_step(tracking)
    plan = Plan(dataset, [], specs, skipped, None, None, [], stats_cfg)
    return _score_pass(cfg, ex, plan, survey, judge, tracking, save=save, bar=show)


def _score_pass(cfg: DictConfig, ex: dict[str, Any], plan: Plan, survey: Survey, judge: Any,
                tracking: dict[str, Any], *, save: bool, bar: bool) -> Computed:
    """The second pass: chunks scored (here, in forked processes or on Ray), their rows written to the table as
    they come back, the run's numbers kept in its :class:`~ragexp.core.tally.Tally` and aggregated."""
    from ragexp.results.tables import ColumnFiles, StreamedTable
    from ragexp.tracking.log import table_rows

    folder = results_folder() if save else Path(tempfile.mkdtemp(prefix="ragexp_stream_"))
    if not save:
        atexit.register(shutil.rmtree, folder, True)
    folder.mkdir(parents=True, exist_ok=True)
    specs, size = plan.specs, survey.size
    table = StreamedTable(folder / "per_sample.parquet", [s.key for s in specs if s.info.level == "sample"],
                          rows=table_rows(tracking))
    bar = _bar(bar, survey.n)
    # the per-sample numbers the statistics need, on disk: memory does not grow with the records
    remove_leftovers(Path(tempfile.gettempdir()), "ragexp_columns_")  # a run killed with kill -9 could not
    kept = Path(tempfile.mkdtemp(prefix=f"ragexp_columns_{os.getpid()}_"))
    atexit.register(shutil.rmtree, kept, True)
    columns = {group: ColumnFiles(kept / group) for group in ("values", "ratios", "timings", "verdicts", "pairs")}
    if ex["mode"] == "ray":
        scorer: _Scorer = _RayScorer(size, specs, table, str(ex["address"]), ex["in_flight"], bar, columns.get,
                                     judge, set(survey.human))
    else:
        scorer = _Scorer(size, specs, table, processes_for(ex["processes"]), bar, columns.get)
    try:
        with streamed(scorer):
            load_dataset(cfg.dataset)
        scorer.finish()
    except BaseException:
        scorer.close()
        table.abort()
        shutil.rmtree(kept, True)
        raise
    finally:
        if bar is not None:
            bar.close()
    tally = scorer.tally
    table.plot_columns = tally.values  # read a column at a time by the pictures
    scored = aggregate_step(plan, tally)
    intervals = uncertainty_step(plan, tally)
    trust_step(plan, scored)
    execution = {"mode": ex["mode"] if ex["mode"] == "ray" else "stream", "chunk_records": size,
                 "processes": scorer.processes}
    if isinstance(scorer, _RayScorer):
        execution["nodes"] = len(scorer.nodes)  # the cluster's nodes that scored chunks
        if scorer.judge is not None:
            execution["judge_calls_per_node"] = sorted(scorer.judge_calls.get(n, 0) for n in scorer.nodes)

    def cleanup() -> None:
        from ragexp.core.scoring import clear_text_caches

        shutil.rmtree(kept, True)  # the pictures and traces were the last to read the columns
        table.plot_columns = {}
        clear_text_caches()  # the caller's process keeps no text of the run (docs/performance.md, "Scale")

    return Computed(plan, scored, intervals, survey, table, [], folder, execution, cleanup)


def _in_memory(ex: dict[str, Any], why: str) -> None:
    """None (the caller runs in memory), with a line saying why when the run asked for chunks."""
    if ex["mode"] in ("stream", "ray"):
        print(f"execution.mode={ex['mode']}: {why}; this run is scored in memory", file=sys.stderr)
    return None


def _bar(enabled: bool, total: int) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(desc="metrics", total=total, file=sys.stderr, leave=False, dynamic_ncols=True, disable=None,
                mininterval=0.5)
