"""The work behind ``python -m ragexp.generate`` (docs/testset.md): corpus → chunks → seeded, stratified
sample → questions asked and checked through the judge's client → filters → BM25 round trip → the test set
(ragexp records, JSONL), ``generation_report.json``, a console summary and an MLflow run.

Every item asked for ends in exactly one outcome (:mod:`ragexp.testset.generator`), so the report's
``asked`` is always ``kept`` + the sums of ``filtered``, ``failed`` and ``not_generated``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any, Mapping

from ragexp.common.collector import collector_paused
from ragexp.common.files import refuse_overwriting, write_atomic
from ragexp.common.secrets import redact
from ragexp.datasets.corpus import TEXT_SUFFIXES, read_corpus
from ragexp.errors import ConfigError, DataError
from ragexp.testset import checks
from ragexp.testset.generator import PROMPT_VERSION, Candidate, Limits, frozen_heap, generate
from ragexp.testset.passages import (Neighbours, as_dict, chunk_passages, difficulty, eligible, kind_plan, sample,
                                     too_few_line)

KINDS = ("factoid", "descriptive", "multi", "unanswerable")
#: outcome groups of the report, in the order they are printed
GROUPS = ("filtered", "failed", "not_generated")


def _kinds(shares: Mapping[str, Any]) -> dict[str, float]:
    bad = [k for k in shares if k not in KINDS]
    if bad:
        raise ConfigError(f"kinds: unknown question kind {bad[0]!r}; the kinds are {', '.join(KINDS)}")
    out = {k: float(v or 0) for k, v in shares.items()}
    if any(v < 0 for v in out.values()) or not any(v > 0 for v in out.values()):
        raise ConfigError(f"kinds: expected non-negative shares, at least one positive, got {dict(shares)}")
    return out


def _int(value: Any, name: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{name}: expected an integer ≥ {low}, got {value!r}")
    return value


def record_of(c: Candidate, judge_model: str, chunker_name: str) -> dict[str, Any]:
    """The kept candidate as a ragexp record (docs/records.md) with its provenance."""
    gt_contexts = []
    for p, ev in zip(c.passages, c.evidence + [""] * len(c.passages)):
        found = ev and " ".join(ev.split()) in " ".join(p.text.split())
        gt_contexts.append(ev if found else p.text)
    docs = list(dict.fromkeys(p.doc_id for p in c.passages))
    rec: dict[str, Any] = {
        "id": c.id, "query": c.question,
        "reference_answers": [c.answer] if c.answerable else None,
        "gt_contexts": gt_contexts if c.answerable else None,
        "gt_context_ids": docs if c.answerable else None,
        "gt_chunk_ids": [p.id for p in c.passages],
        "gt_spans": [as_dict(p) for p in c.passages],
        "question_type": c.kind, "answerable": c.answerable,
        "source_ids": docs, "language": c.language,
        "answerability_verdict": c.verdict,
        "generator": {"model": judge_model, "prompt": f"testset_question.{PROMPT_VERSION}",
                      "check_prompt": f"testset_answerable.{PROMPT_VERSION}", "chunker": chunker_name},
    }
    return {k: v for k, v in rec.items() if v is not None}


def run_generation(cfg: Mapping[str, Any], *, progress: bool = True) -> dict[str, Any]:
    """Build the test set of ``cfg`` (conf/generate.yaml, resolved to plain values); return the report."""
    from ragexp.common.paths import conf_file
    from ragexp.common.targets import build
    from ragexp.judge import build_judge
    from ragexp.tracking.settings import tracking_settings

    import importlib.util

    absent = [m for m in ("bm25s", "langdetect") if importlib.util.find_spec(m) is None]
    if absent:
        raise ConfigError(f"ragexp.generate needs {', '.join(absent)}: pip install 'ragexp[generate]'")
    base = conf_file("generate")  # each setting's one place: what a dict given here leaves out is read from it
    n = _int(cfg.get("n"), "n")
    seed = _int(cfg.get("seed", base["seed"]), "seed", 0)
    min_words = _int(cfg.get("min_words", base["min_words"]), "min_words")
    shares = _kinds(cfg.get("kinds") or {"factoid": 1})
    f = {**base["filters"], **(cfg.get("filters") or {})}
    limits = Limits(q_words=tuple(f["question_words"]), a_max_words=int(f["answer_max_words"]))
    dup = float(f["duplicate_similarity"])
    out = Path(str(cfg.get("out") or base["out"]))
    report_path = Path(str(cfg.get("report") or out.with_name("generation_report.json")))
    corpus_cfg = cfg.get("corpus") or {}
    refuse_overwriting({"out": out, "report": report_path}, _inputs(cfg))  # before any work (docs/testset.md)
    clock = {"start": time.perf_counter()}
    corpus = read_corpus(corpus_cfg.get("path"), columns=corpus_cfg.get("columns"), format=corpus_cfg.get("format"))
    chunker = build(cfg.get("chunker") or {"_target_": "ragexp.pipeline.chunking.Chunker"}, "chunker")
    passages = chunk_passages(corpus.docs, chunker)
    pool, too_short = eligible(passages, min_words)
    if not pool:
        raise DataError(f"documents too short to ask about: none of the {len(passages)} passages has {min_words} words "
                        "or more (set min_words lower, or a larger chunker.size)", path=corpus.source)
    tracking = tracking_settings(cfg)
    if tracking.enabled:
        from ragexp.tracking.testset import check_testset_store

        check_testset_store(tracking)  # before any paid call
    if cfg.get("judge") is None:
        from ragexp.judge import JUDGE_NAMES_HINT

        raise ConfigError(f"ragexp.generate needs a model to write and check the questions: add judge=<name> "
                          f"({JUDGE_NAMES_HINT})")
    with contextlib.ExitStack() as frozen:
        with collector_paused():  # litellm's import (the judge's prices): its objects are frozen before any
            judge = build_judge(cfg.get("judge"))  # collection walks them, the first request yet to leave
            frozen.enter_context(frozen_heap())
        clock["read"] = time.perf_counter()
        picked = sample(pool, n, seed)
        short_of = n - len(picked)
        if short_of and (line := too_few_line(n, pool, min_words, _counter(corpus.docs, min_words))):
            print(f"ragexp.generate: warning: {line}", file=sys.stderr)  # with the setting that gives enough passages
        candidates = _candidates(kind_plan(n, shares, seed), picked, pool, min_words)
        clock["indexed"], cpu = time.perf_counter(), time.process_time()
        side = _SideWork(passages, pool, candidates)
        frozen.callback(side.asked.set)  # on every way out: its thread stops ranking
        usage = generate(judge, [c for c in candidates if c.outcome == "pending"], limits, progress, side=side.start)
        clock["asked"], cpu = time.perf_counter(), time.process_time() - cpu
        records = _kept_records(candidates, side.index(), dup, judge.settings.model, chunker.name, side.ranked())
    report = _report(cfg, n, candidates, records, corpus, passages, pool, too_short, side.no_partner, short_of, usage,
                     dup)
    clock["done"] = time.perf_counter()
    report["seconds"] = {  # wall time of each step (benchmarks/bench_generate.py; docs/performance.md)
        "reading": round(clock["read"] - clock["start"], 3),  # corpus, chunks, the judge's client built
        "indexing": round(clock["indexed"] - clock["read"], 3),  # sampling and the items (BM25 is built while asking)
        "asking": round(clock["asked"] - clock["indexed"], 3),  # the questions and checks, their filters; BM25, pairs
        "finishing": round(clock["done"] - clock["asked"], 3),  # near-duplicates, BM25 round trip, records
    }
    report["seconds_asking"] = report["seconds"]["asking"]
    report["cpu_seconds_asking"] = round(cpu, 3)  # this process's CPU while asking (the judge's loop; the rest waits)
    # what the model wrote may quote a key (a provider-shaped text, an environment secret): redacted in the test
    # set, its report, the console and the MLflow run's dataset and artifacts alike (docs/guarantees.md)
    records, report = redact(records), redact(report)
    _write(out, records, report_path, report)
    print_report(report, out, report_path)
    if tracking.enabled:
        from ragexp.tracking.testset import log_testset

        run_id = log_testset(tracking, out, report_path, cfg, report, records)
        print(f"MLflow run {run_id} (the test set as a dataset, the report and config as artifacts)")
    return report


def _counter(docs: Mapping[str, str], min_words: int) -> Any:
    """``count(size)``: how many passages of ``min_words``+ words ``chunker=words chunker.size=<size>
    chunker.overlap=0`` cuts the documents into (the too-few-passages line names a size that gives enough)."""
    from ragexp.pipeline.chunking import Chunker

    return lambda size: len(eligible(chunk_passages(dict(docs), Chunker(name="words", size=size, overlap=0)),
                                     min_words)[0])


def _candidates(plan: list[str], picked: list[Any], pool: list[Any], min_words: int) -> list[Candidate]:
    """One candidate per item asked for, in order: its kind and passage (a ``multi`` item waits for its partner,
    :class:`_SideWork`), or ``not_generated`` past the sampled passages."""
    candidates = [Candidate(i, kind, [p], waits=kind == "multi") for i, (kind, p) in enumerate(zip(plan, picked))]
    for i in range(len(picked), len(plan)):
        c = Candidate(i, plan[i], [])
        c.outcome = "not_generated:too_few_passages"
        c.detail = f"the corpus has {len(pool)} passages of {min_words}+ words; each is asked about once"
        candidates.append(c)
    return candidates


class _SideWork:
    """What asking runs beside the calls, in a thread of its own, started once the first requests are out
    (:func:`~ragexp.testset.generator.agenerate`), so that its CPU falls in the wait for their replies rather
    than before them: langdetect's profiles (and jieba's dictionary when a sampled passage holds Chinese text),
    which the first replies' language filter needs; then BM25 over every chunk and each ``multi`` item's partner
    (the pairing rule; an item without one is asked as a factoid), which those items wait for; then, until the
    asking ends (:meth:`ranked`), the BM25 round trip's rank of each question generated so far, which the end of
    the run would otherwise compute after the last reply (a question's rank depends on it alone)."""

    def __init__(self, passages: list[Any], pool: list[Any], candidates: list[Candidate]):
        self.passages, self.pool, self.candidates = passages, pool, candidates
        self.no_partner = 0
        self.job: concurrent.futures.Future | None = None
        self.ranks: dict[int, tuple[str, int | None]] = {}  # candidate index: (its question, its rank)
        self.asked = threading.Event()
        self.ranking: threading.Thread | None = None

    def start(self) -> concurrent.futures.Future:
        if self.job is None:
            self.job = concurrent.futures.Future()
            threading.Thread(target=self._run, name="ragexp-side-work", daemon=True).start()
        return self.job

    def _run(self) -> None:
        if not self.job.set_running_or_notify_cancel():
            return
        try:
            chinese = lambda cs: any(checks.has_chinese(p.text) for c in cs for p in c.passages)  # noqa: E731
            checks.warm(chinese(self.candidates))
            index = Neighbours(self.passages)  # the pairing rule (eligible ones) and the round trip
            multi = [c for c in self.candidates if c.waits]
            partners = index.partners([c.passages[0] for c in multi], self.pool) if multi else []
            for c, partner in zip(multi, partners):
                if partner is None:
                    c.kind, self.no_partner = "factoid", self.no_partner + 1
                else:
                    c.passages.append(partner)
            if chinese(multi):  # a partner's Chinese text: jieba loaded before any of those items is asked
                checks.warm(True)
        except BaseException as exc:  # noqa: BLE001 - handed to the run, which raises it
            self.job.set_exception(exc)
            return
        self.ranking = threading.current_thread()
        self.job.set_result(index)
        while not self.asked.wait(0.5):
            new = [c for c in self.candidates if c.outcome == "generated" and c.index not in self.ranks]
            try:
                got = index.ranks([c.question for c in new], [{p.id for p in c.passages} for c in new]) if new else []
            except Exception:  # noqa: BLE001 - the end of the run ranks what is not ranked here, and raises there
                return
            self.ranks.update((c.index, (c.question, rank)) for c, rank in zip(new, got))

    def index(self) -> Neighbours:
        """The BM25 index (the side work done, started here when asking never started it: nothing to ask)."""
        return self.start().result()

    def ranked(self) -> dict[int, tuple[str, int | None]]:
        """The ranks computed while asking (the asking is over: the thread stops after the batch under way)."""
        self.asked.set()
        if self.ranking is not None:
            self.ranking.join()
        return self.ranks


def _kept_records(candidates: list[Candidate], index: Neighbours, dup: float, judge_model: str,
                  chunker_name: str, ranked: Mapping[int, tuple[str, int | None]] | None = None) -> list[dict[str, Any]]:
    """The generated questions past the near-duplicate filter, as records with their BM25 round trip's rank
    (``ranked``'s when it holds the same question: :meth:`_SideWork.ranked`)."""
    made = [c for c in candidates if c.outcome == "generated"]
    for c, twin in zip(made, checks.near_duplicates([c.question for c in made], dup)):
        if twin is not None:
            c.drop("near_duplicate", f"repeats item {made[twin].index}: {made[twin].question!r}")
    kept = [c for c in candidates if c.outcome == "generated"]
    ranks = {c.index: got[1] for c in kept if (got := (ranked or {}).get(c.index)) and got[0] == c.question}
    rest = [c for c in kept if c.index not in ranks]
    if rest:
        ranks.update(zip([c.index for c in rest],
                         index.ranks([c.question for c in rest], [{p.id for p in c.passages} for c in rest])))
    records = []
    for c, rank in ((c, ranks[c.index]) for c in kept):
        c.outcome = "kept"
        rec = record_of(c, judge_model, chunker_name)
        rec["bm25_rank"], rec["difficulty"] = rank, difficulty(rank) if c.answerable else "n/a"
        records.append(rec)
    return records


def _inputs(cfg: Mapping[str, Any]) -> list[Path]:
    """The files ``generate`` reads: the corpus file (a folder's documents), the judge's cache, a SQLite store."""
    from ragexp.common.paths import sqlite_path, store_uri

    found: list[Path] = []
    corpus = (cfg.get("corpus") or {}).get("path")
    if corpus not in (None, "", "???"):
        root = Path(str(corpus)).expanduser()
        found.append(root)
        if root.is_dir():
            found += [f for f in root.rglob("*") if f.suffix.lower() in TEXT_SUFFIXES]
    cache = (cfg.get("judge") or {}).get("cache_path")
    if cache:
        found.append(Path(str(cache)).expanduser())
    tracking = cfg.get("tracking") or {}
    if tracking.get("enabled", True) and (db := sqlite_path(store_uri(tracking.get("uri")))) is not None:
        found.append(db)
    return found


def _write(out: Path, records: list[dict[str, Any]], report_path: Path, report: Mapping[str, Any]) -> None:
    """The test set (JSONL) and its report (JSON), each whole or not at all (:func:`write_atomic`)."""
    write_atomic(out, lambda fh: fh.writelines(json.dumps(rec, ensure_ascii=False) + "\n" for rec in records),
                 what="the test set")
    write_atomic(report_path, lambda fh: fh.write(json.dumps(report, indent=2, ensure_ascii=False)),
                 what="the generation report")


def _count(candidates: list[Candidate], group: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in candidates:
        g, _, reason = c.outcome.partition(":")
        if g == group:
            out[reason] = out.get(reason, 0) + 1
    return dict(sorted(out.items()))


def _report(cfg, n, candidates, records, corpus, passages, pool, too_short, no_partner, short_of, usage, dup):
    groups = {g: _count(candidates, g) for g in GROUPS}
    kept = len(records)
    total = kept + sum(sum(v.values()) for v in groups.values())
    assert total == n, (total, n)  # every item asked for has exactly one outcome
    by = lambda key: {v: sum(1 for r in records if r.get(key) == v) for v in sorted({str(r.get(key)) for r in records})}  # noqa: E731
    return {
        "asked": n, "generated": sum(1 for c in candidates if c.question), "kept": kept, **groups,
        "adds_up": f"asked {n} = kept {kept} + filtered {sum(groups['filtered'].values())} + failed "
                   f"{sum(groups['failed'].values())} + not generated {sum(groups['not_generated'].values())}",
        "kept_by_kind": by("question_type"), "kept_by_difficulty": by("difficulty"),
        "answerability_checks": sum(1 for c in candidates if c.verdict is not None),
        "corpus": {"source": corpus.source, "documents": len(corpus.docs), "empty_files_skipped": corpus.skipped,
                   "passages": len(passages), "eligible_passages": len(pool), "too_short_passages": too_short,
                   "documents_asked_about": len({p.doc_id for c in candidates for p in c.passages})},
        "multi_without_partner_asked_as_factoid": no_partner,
        "rules": {"sampling": "seeded round robin over documents in shuffled order (docs/testset.md)",
                  "pairing": "partner = BM25's top passage for the passage's text in another document",
                  "near_duplicate": f"keyword-set Jaccard >= {dup} or the same normalised text",
                  "difficulty": "BM25 rank of a gold chunk for the question: 1 easy, 2-5 medium, else hard",
                  "language": "writing system differs, or (under half its words in the passage) langdetect >= 0.9 "
                              "for another language (6+ words)"},
        "judge": {k.split("/", 1)[1]: v for k, v in usage.as_metrics().items()},
        "items": [{"index": c.index, "id": c.id if c.question else None, "kind": c.kind, "outcome": c.outcome,
                   "detail": c.detail, "passages": [p.id for p in c.passages], "question": c.question or None,
                   "answerability_verdict": c.verdict} for c in candidates],
    }


def print_report(report: Mapping[str, Any], out: Path, report_path: Path) -> None:
    print(f"ragexp.generate: {report['kept']} of {report['asked']} questions kept in {out} "
          f"({report['generated']} generated; {report['answerability_checks']} answerability checks)")
    for group in GROUPS:
        for reason, k in report[group].items():
            print(f"  {group.replace('_', ' ')}: {reason:<20} {k}")
    print(f"  {report['adds_up']}")
    if report["kept_by_kind"]:
        print("  kept by kind: " + ", ".join(f"{k} {v}" for k, v in report["kept_by_kind"].items())
              + "; by difficulty: " + ", ".join(f"{k} {v}" for k, v in report["kept_by_difficulty"].items()))
    j = report["judge"]
    print(f"  judge: {j['calls']:.0f} calls, {j['cache_hits']:.0f} cache hits, ${j['cost_usd']:.4f}")
    print(f"  report: {report_path}")
    if report["kept"] < report["asked"]:
        print(f"ragexp.generate: {report['asked'] - report['kept']} fewer than asked; the reasons are above and, "
              f"per item, in {report_path}", file=sys.stderr)
