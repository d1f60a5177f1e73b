"""How fast ``ragexp.evaluate(df, log=False)`` is on 1,000 records, against the bare metric loop.

    python benchmarks/bench_api.py [--data-dir ../shared/data] [--repeats 5]

Workload: HaluEval QA's 500 items as its 1,000 records (each item's right and hallucinated
answer, labelled), as a pandas DataFrame with foreign column names — ``full``: every field the
adapter gives (query, knowledge passage as contexts and ground truth, answer, reference, label:
42 metric keys of the ``default`` suite); ``answers``: only question, response and reference
(the answer metrics and keyword overlap, 7 keys). For each, in this one process:

1. the first ``evaluate`` call (config composition, the metric modules' lazy imports and jieba's
   dictionary load included; ``import ragexp, pandas`` and reading the data not);
2. the median of ``--repeats`` further calls, split into the runner's steps (score, uncertainty:
   the intervals of every aggregate at ``stats.resamples``, the rest: composition, reading the
   frame, summary, per-sample table, result);
3. the baseline: the same metrics through ``build_metrics → check_fields → score → aggregate``
   alone (what ``bench_metrics.py`` times), median of the same number of calls; and evaluate
   with ``stats={"resamples": 1000}`` to show what the bootstrap costs.

A third workload, ``demo_x20``, is bench_startup.py's: the demo's 50 ``strong`` records ×20 with
their own ids (canonical column names, the default suite; its texts repeat, so per-text caches
help it more than real data). For each workload, the median call is also timed with the kept
resample draw dropped before each call (what a call over a new number of records pays).

Then ``squad_unseen``: in the warm process, three calls on 1,000 SQuAD v2 dev questions each,
new ones per call (texts the per-text caches have not met), built from the questions' own
paragraphs (see ``squad_frames``).

Then the scoring's faster paths against the code paths they replaced, in this process, on the
HaluEval and demo records: sacrebleu's ``BLEU.sentence_score`` against ragexp's
``sentence_bleu`` (same floats), and ``score()`` with the ranked and token metrics' shared first
step switched off (each metric judges the record itself, as before) against with it.

Prints records per second and the ratio of each to the baseline, from wall time and from this
process's CPU time (on a machine shared with other jobs, CPU time is what an idle machine's wall
time would be: one thread, ``OMP_NUM_THREADS=1``). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from pathlib import Path

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

ROOT = Path(__file__).resolve().parents[1]
FOREIGN = {"query": "question", "contexts": "knowledge", "gt_contexts": "gold_passages", "answer": "response",
           "reference_answers": "truth", "label": "human_label"}


def workload(data_dir: Path):
    import pandas as pd

    from ragexp.datasets.halueval import load_halueval

    records = load_halueval(str(data_dir / "halueval" / "qa_one-turn_data.json")).records
    rows = [{FOREIGN.get(k, k): v for k, v in dataclasses.asdict(r).items() if k != "extra"} for r in records]
    full = pd.DataFrame(rows)
    answers = full[["id", "question", "response", "truth"]].copy()
    return {"full": (full, FOREIGN), "answers": (answers, {k: FOREIGN[k] for k in ("query", "answer",
                                                                                     "reference_answers")}),
            "demo_x20": (demo_frame(), None)}


def demo_frame():
    """bench_startup.py's EVALUATE workload: the demo's 50 ``strong`` records ×20, each copy its own ids."""
    import pandas as pd

    from ragexp.datasets.demo import load_demo

    fields = ("id", "query", "contexts", "context_ids", "gt_contexts", "gt_context_ids", "answer",
              "reference_answers", "label", "latency_s", "timings")
    rows = []
    for copy in range(20):
        for r in load_demo(system="strong").records:
            row = {f: getattr(r, f) for f in fields if r.has(f)}
            row["id"] = f"{row.get('id')}-{copy}"
            rows.append(row)
    return pd.DataFrame(rows)


class Steps:
    """Wall time of the runner's score and uncertainty steps within each call."""

    def __init__(self):
        from ragexp.workflow import runner

        self.times: dict[str, float] = {}
        for name in ("score_step", "uncertainty_step"):
            original = getattr(runner, name)

            def timed(*args, _original=original, _name=name, **kwargs):
                t = time.perf_counter()
                try:
                    return _original(*args, **kwargs)
                finally:
                    self.times[_name] = self.times.get(_name, 0.0) + time.perf_counter() - t

            setattr(runner, name, timed)


def bare_scoring(frame, columns) -> tuple[float, float]:
    """The metrics alone over the same records (no config composition, no intervals, no tables)."""
    from ragexp.api import _compose
    from ragexp.datasets.mapped import load_in_memory
    from ragexp.core.scoring import build_metrics, check_fields, score
    from ragexp.core.tally import tally_of

    cfg = _compose(("dataset=mapped",))
    records = load_in_memory(frame, columns=columns).records
    clock = Clock()
    specs, all_that_apply = build_metrics(cfg.metric, cfg.matcher)
    specs, _ = check_fields(specs, records, "bench", all_that_apply)
    scores = score(records, specs)
    tally_of(specs, scores, records).aggregate()
    return clock.stop()


class Clock:
    """Wall and CPU seconds since it was made."""

    def __init__(self):
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def stop(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def _median(pairs) -> tuple[float, float]:
    pairs = list(pairs)
    return statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)

    import ragexp

    loads = workload(args.data_dir)
    steps = Steps()
    print(f"ragexp.evaluate(df, log=False), HaluEval 1,000 records, {args.repeats} repeats, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; figures: wall / CPU")
    for name, (frame, columns) in loads.items():
        n = len(frame)

        def call(**options):
            clock = Clock()
            result = ragexp.evaluate(frame, columns=columns, log=False, progress=False, **options)
            return clock.stop(), result

        steps.times.clear()
        first, result = call()
        keys = len(result.metrics)
        runs, parts = [], []
        for _ in range(args.repeats):
            steps.times.clear()
            runs.append(call()[0])
            parts.append(dict(steps.times))
        wall, cpu = _median(runs)
        score_s = statistics.median(p["score_step"] for p in parts)
        unc_s = statistics.median(p["uncertainty_step"] for p in parts)
        few = _median(call(stats={"resamples": 1000})[0] for _ in range(args.repeats))
        bare = _median(bare_scoring(frame, columns) for _ in range(args.repeats))

        def line(label, t):
            return (f"  {label:<22}{t[0]:6.3f} / {t[1]:5.3f} s  {n / t[0]:7,.0f} / {n / t[1]:7,.0f} rec/s")

        print(f"\n{name}: {n} records, {keys} aggregate keys")
        print(line("first call", first))
        print(line("evaluate (median)", (wall, cpu)) + f"  = {wall / bare[0]:4.2f}x / {cpu / bare[1]:4.2f}x the bare metrics")
        print(f"    score step          {score_s:6.3f} s wall")
        print(f"    uncertainty step    {unc_s:6.3f} s wall (10,000 resamples)")
        print(f"    the rest            {wall - score_s - unc_s:6.3f} s wall (compose, read the frame, summary, tables)")
        print(line("resamples=1000", few))
        print(line("baseline: bare metrics", bare))
    unseen(args.data_dir)
    print("\nthe faster paths against the code they replaced, same process, same records "
          f"(median of {3 * args.repeats}, called in turn; CPU s; values checked equal):")
    for name in ("full", "demo_x20"):
        frame, columns = loads[name]
        replaced_paths(frame, columns, name, args.repeats)
    return 0


def squad_frames(data_dir: Path, n: int, count: int):
    """``count`` frames of ``n`` SQuAD v2 dev questions each, no question twice: the question's own
    paragraph and the next two of its article as retrieved passages (the own one ranked second),
    the own paragraph as ground truth, SQuAD's answers as references, and the next question's
    first answer as the answer (a real, mostly wrong one)."""
    import json

    import pandas as pd

    squad = json.loads((data_dir / "squad2" / "dev-v2.0.json").read_text(encoding="utf-8"))
    rows = []
    for a, article in enumerate(squad["data"]):
        paras = article["paragraphs"]
        qas = [(p, qa) for p, para in enumerate(paras) for qa in para["qas"] if qa["answers"]]
        for (p, qa), (_, after) in zip(qas, qas[1:]):
            ranked = [(p + 1) % len(paras), p, (p + 2) % len(paras)]
            rows.append({"id": qa["id"], "query": qa["question"],
                         "contexts": [paras[i]["context"] for i in ranked],
                         "context_ids": [f"{a}-{i}" for i in ranked],
                         "gt_contexts": [paras[p]["context"]], "gt_context_ids": [f"{a}-{p}"],
                         "answer": after["answers"][0]["text"],
                         "reference_answers": list(dict.fromkeys(x["text"] for x in qa["answers"]))})
    return [pd.DataFrame(rows[i * n:(i + 1) * n]) for i in range(count)]


def unseen(data_dir: Path) -> None:
    """Calls in a warm process on records whose texts it has never met (real, distinct data)."""
    import ragexp

    frames = squad_frames(data_dir, 1000, 3)  # the shared dev set gives 2,894 questions: 1,000 + 1,000 + 894
    frames[2] = pd_concat(frames[1].iloc[-106:], frames[2])  # 1,000, of which 106 were in the second call
    runs = []
    for frame in frames:
        clock = Clock()
        result = ragexp.evaluate(frame, log=False, progress=False)
        runs.append(clock.stop())
    keys = len(result.metrics)
    print(f"\nsquad_unseen: SQuAD v2 dev, three calls of 1,000 questions the process had not met "
          f"(the last repeats 106 of the second's), {keys} keys, the draw for 1,000 records kept:")
    for i, t in enumerate(runs, start=1):
        print(f"  call {i:<17}{t[0]:6.3f} / {t[1]:5.3f} s  {1000 / t[0]:7,.0f} / {1000 / t[1]:7,.0f} rec/s")
    t = _median(runs)
    print(f"  {'median':<22}{t[0]:6.3f} / {t[1]:5.3f} s  {1000 / t[0]:7,.0f} / {1000 / t[1]:7,.0f} rec/s")


def pd_concat(*frames):
    import pandas as pd

    return pd.concat(frames, ignore_index=True)


def replaced_paths(frame, columns, name: str, repeats: int) -> None:
    """sacrebleu's sentence BLEU vs ragexp's; score() without vs with the shared first steps."""
    import dataclasses

    from sacrebleu.metrics import BLEU

    from ragexp.api import _compose
    from ragexp.datasets.mapped import load_in_memory
    from ragexp.metrics.answer import _bleu_scorer, sentence_bleu
    from ragexp.core.scoring import build_metrics, check_fields, score

    records = load_in_memory(frame, columns=columns).records
    pairs = [(r.answer, [x for x in r.reference_answers if x.strip()]) for r in records
             if r.answer and r.answer.strip() and r.reference_answers and any(x.strip() for x in r.reference_answers)]
    scorer = BLEU(effective_order=True)

    def theirs():
        return [scorer.sentence_score(a, refs).score for a, refs in pairs]

    def ours():
        _bleu_scorer.cache_clear()  # cold: a new scorer
        return [sentence_bleu(a, refs) for a, refs in pairs]

    assert theirs() == ours()
    t_theirs, t_ours = _interleaved(theirs, ours, 3 * repeats)
    n = len(pairs)
    print(f"  {name}: sentence BLEU, {n} answers: sacrebleu {n / t_theirs:8,.0f} /s, ragexp {n / t_ours:8,.0f} /s "
          f"(cold caches) = {t_theirs / t_ours:4.1f}x")

    cfg = _compose(("dataset=mapped",))
    specs, all_that_apply = build_metrics(cfg.metric, cfg.matcher)
    specs, _ = check_fields(specs, records, name, all_that_apply)
    alone = [dataclasses.replace(s, info=dataclasses.replace(s.info, prepare=None, finish=None)) for s in specs]
    shared = sum(s.info.prepare is not None for s in specs)
    with_step, without = score(records, specs), score(records, alone)
    assert with_step == without
    t_without, t_with = _interleaved(lambda: score(records, alone), lambda: score(records, specs), 3 * repeats)
    print(f"  {name}: score() of {len(specs)} keys ({shared} sharing a first step), {len(records)} records: "
          f"each alone {len(records) / t_without:7,.0f} rec/s, shared {len(records) / t_with:7,.0f} rec/s "
          f"= {t_without / t_with:4.2f}x")


def _interleaved(before, after, rounds: int) -> tuple[float, float]:
    """Median CPU seconds of each, the two called in turn (a change in the machine's load touches both alike)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(rounds):
        times[0].append(_cpu(before))
        times[1].append(_cpu(after))
    return statistics.median(times[0]), statistics.median(times[1])


def _cpu(fn) -> float:
    t = time.process_time()
    fn()
    return time.process_time() - t


if __name__ == "__main__":
    sys.exit(main())
