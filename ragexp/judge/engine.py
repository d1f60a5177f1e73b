"""Scoring a dataset's judge metrics: plans per metric, shared verdicts, one event loop.

:class:`Judge` is what :func:`ragexp.judge.build_judge` returns and the runner calls:
``judge.score(records, specs, progress)`` → ``({metric key: [Score per record]}, usage)``.

- Each metric is a *plan*: the verdicts it asks for (prompts in ``prompts/``), then the pure
  arithmetic of :mod:`ragexp.metrics.judge` / :mod:`ragexp.metrics.questeval` on them.
- Identical requests within a run are asked once and shared (``augmentation_precision`` asks
  nothing that ``retrieval_precision`` and ``augmentation_accuracy`` did not), and across runs
  the SQLite cache answers them.
- An unparseable reply gets one corrective re-ask; if that fails too, the sample's status is
  ``parse_error`` and both raw replies go to the per-sample table. Only replies that parsed are
  cached (a readable re-ask under the first question's key too), so the next run asks again for
  exactly the unreadable ones.
- The work runs on one private event loop in a background thread (:mod:`.loop`), so ``score``
  behaves the same from a script, a Hydra multirun job, or a notebook whose own loop is running.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Sequence

from ragexp.errors import BudgetExceeded, ConfigError, Interrupted
from ragexp.metrics.base import Score
from ragexp.metrics.judge import (TONIC_SCALE, answer_consistency_binary_value, answer_consistency_value,
                             answer_similarity_value, augmentation_accuracy_value, augmentation_precision_value,
                             overall_value, retrieval_precision_value)
from ragexp.metrics.questeval import questeval_values
from ragexp.common.records import Record
from ragexp.judge.cache import JudgeCache
from ragexp.judge.client import Budget, BudgetStop, CallFailed, JudgeClient, Prices, Usage
from ragexp.judge.loop import run_sync, shutdown
from ragexp.judge.parse import ParseError, Verdict, parse_verdict
from ragexp.judge.settings import JudgeSettings
from ragexp.judge.templates import Prompt, load_prompt

log = logging.getLogger("ragexp.judge")

_CORRECTION = ("Your reply could not be read: {reason}.{cut} Reply again with only the JSON object, "
               "nothing before or after it, in this form:\n{form}")


# -- one verdict -------------------------------------------------------------------------------------

@dataclass
class Outcome:
    """A verdict, or why there is none (a status, docs/metrics.md#how-to-read-a-value, and the detail to show)."""

    verdict: Any
    status: str = "ok"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def _form(prompt: Prompt) -> str:
    lines = [ln for ln in prompt.user.strip().splitlines() if ln.strip().startswith("{")]
    return lines[-1] if lines else "a JSON object"


@dataclass
class _Spec:
    """A metric as :meth:`Judge.score` reads it (the runner passes ``evaluate.MetricSpec``, which has the same)."""

    key: str
    info: Any
    options: dict[str, Any]

    @property
    def fields(self) -> tuple[str, ...]:
        return self.info.required_fields(self.options)


class _Run:
    """The state of one ``score`` call: client, shared verdicts, usage."""

    def __init__(self, judge: "Judge"):
        self.usage = Usage()
        self.budget = Budget(judge.settings.max_cost_usd)
        self.client = JudgeClient(judge.settings, judge.cache, judge.prices, self.usage, self.budget)
        self.memo: dict[str, asyncio.Future] = {}

    async def drain(self) -> None:
        """Wait until no request of this run is in flight."""
        while pending := [t for t in self.memo.values() if not t.done()]:
            await asyncio.wait(pending)
        for t in self.memo.values():  # mark every failure as seen (BudgetStop may have had no reader)
            if not t.cancelled():
                t.exception()

    async def ask(self, kind: str, version: str, ctx: dict[str, Any] | None = None, *, sample: int = 0,
                  **values: Any) -> Outcome:
        """The verdict of prompt ``kind`` on ``values``; ``sample`` j > 0 asks the question again (its own
        cache key and seed + j: ``judge.samples``)."""
        prompt = load_prompt(kind, version)
        messages = prompt.render(**values)
        pid = prompt.id + (f"#sample{sample}" if sample else "")
        key = self.client.key(messages, pid)
        shared = self.memo.get(key)
        if shared is not None:
            self.usage.shared += 1
            return await asyncio.shield(shared)
        material = tuple(_material(values))
        task = asyncio.ensure_future(self._ask(kind, prompt, messages, key, {**(ctx or {}), "quoted": material},
                                               pid, sample))
        self.memo[key] = task
        return await asyncio.shield(task)

    async def _ask(self, kind: str, prompt: Prompt, messages: list[dict[str, str]], key: str,
                   ctx: dict[str, Any], pid: str, sample: int) -> Outcome:
        def check(text: str) -> Any:
            return parse_verdict(kind, text, **ctx)

        # Only a reply that parsed is cached (``check``): an unreadable one is asked again next run.
        try:
            first = await self.client.complete(messages, pid, key, check=check, schema=kind, sample=sample)
        except CallFailed as exc:
            self.usage.fail(exc.status)
            return Outcome(None, exc.status, str(exc))
        try:
            return Outcome(check(first.text), "ok", first.text)
        except ParseError as exc:
            reason = str(exc)
        self.usage.reasks += 1
        cut = " It was cut off at the length limit; keep the reasons short." if first.finish_reason == "length" else ""
        retry = messages + [
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": _CORRECTION.format(reason=reason, cut=cut, form=_form(prompt))},
        ]
        try:
            second = await self.client.complete(retry, pid + "+reask", check=check, schema=kind, sample=sample)
        except CallFailed as exc:
            self.usage.fail(exc.status)
            return Outcome(None, exc.status, f"unreadable reply ({reason}): {first.text!r}; the re-ask failed: {exc}")
        try:
            verdict = check(second.text)
        except ParseError as exc:
            self.usage.fail("parse_error")
            return Outcome(None, "parse_error", f"{exc}. reply: {first.text!r} | reply to the re-ask: {second.text!r}")
        self.client.remember(key, second)  # the readable reply answers the first question next run
        return Outcome(verdict, "ok", second.text)


#: Metrics whose value is a 0/1 verdict: with ``judge.samples`` their value is the majority, a tie 0.
BINARY = frozenset({"answer_consistency_binary"})


def combine_samples(name: str, outs: list[Score]) -> Score:
    """One record's value from its ``judge.samples`` scores (docs/judge-trust.md, "Judge noise").

    A failed sample (timeout, parse error…) fails the record, as one failed verdict fails a metric;
    otherwise the mean of the values the definition gives (the majority for a binary metric: a tie,
    possible with an even k, is 0), with every sample's value kept in ``samples``.

    >>> combine_samples("answer_consistency_binary", [Score(1.0), Score(0.0), Score(1.0)]).value
    1.0
    >>> combine_samples("answer_consistency_binary", [Score(1.0), Score(0.0)]).value
    0.0
    >>> combine_samples("retrieval_precision", [Score(0.5), Score(1.0), Score.undefined("-")]).samples
    (0.5, 1.0, None)
    """
    bad = next((o for o in outs if o.status not in ("ok", "undefined")), None)
    if bad is not None:
        return bad
    values = tuple(o.value if o.status == "ok" else None for o in outs)
    ok = [v for v in values if v is not None]
    if not ok:
        return outs[0]
    value = (1.0 if sum(ok) > len(ok) / 2 else 0.0) if name in BINARY else sum(ok) / len(ok)
    return Score(value, detail=_detail(samples=list(values), first=outs[0].detail), samples=values)


def _material(values: dict[str, Any]) -> Iterable[str]:
    """The graded material a prompt quotes (its slot values): a verdict found inside it is not the judge's."""
    for v in values.values():
        if isinstance(v, str):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (str(x) for x in v)


def _failed(outcomes: Iterable[Outcome]) -> Score | None:
    for o in outcomes:
        if not o.ok:
            return Score(None, o.status, o.detail)
    return None


def _detail(**parts: Any) -> str:
    return json.dumps(parts, ensure_ascii=False)


def _of_verdicts(value: Callable[[list[Any]], Any], name: str, outs: list[Outcome], **before: Any) -> Score:
    """``value`` of the verdicts' values, shown as ``name`` with their reasons (after ``before``); or the
    first failure among them."""
    bad = _failed(outs)
    if bad:
        return bad
    values = [x.verdict.value for x in outs]
    return Score(value(values), detail=_detail(**before, **{name: values}, reasons=[x.verdict.reason for x in outs]))


# -- the plans ---------------------------------------------------------------------------------------
#
# Absent fields never reach a plan (``_metric`` gives them ``missing_field``). A present but empty
# output of the system under test is a miss decided here without asking the judge what no verdict
# could change: no passage retrieved is nothing relevant, nothing used and nothing supported (0);
# an empty answer is 0 similar and answers no question. Only what the definition has no value
# for is ``undefined``: no reference answer, an answer without a main point (an empty one has
# none), no question answered by both texts.

#: A plan: ``(ask, record, options)`` → the record's score; ``ask(kind, version, ctx=None, **values)`` is
#: :meth:`_Run.ask` (for one ``judge.samples`` index).
Plan = Callable[[Callable[..., Awaitable[Outcome]], Record, dict[str, Any]], Awaitable[Score]]


def _blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _passages(r: Record) -> list[str]:
    """The retrieved passages that hold text (empty when nothing was retrieved)."""
    return [c for c in r.contexts or [] if not _blank(c)]


def _references(r: Record) -> list[str]:
    """The reference answers, blank ones left out (as the deterministic metrics do)."""
    return [x for x in r.reference_answers or [] if not _blank(x)]


_NO_REFERENCE = "no reference answer (empty ground truth)"


async def _decided(verdict: Verdict) -> Outcome:
    """A verdict the material decides without a judge (an empty passage is relevant to nothing)."""
    return Outcome(verdict, "ok", "decided without asking: " + verdict.reason)


async def _per_passage(ask: Any, r: Record, kind: str, version: str, **values: Any) -> list[Outcome]:
    """Verdict ``kind`` on each retrieved passage; an empty one is relevant to nothing and used by nothing."""
    return list(await asyncio.gather(*[
        _decided(Verdict(False, "empty passage")) if _blank(c) else ask(kind, version, context=c, **values)
        for c in r.contexts or []]))


async def _answer_similarity(ask: Any, r: Record, o: dict[str, Any]) -> Score:
    refs = _references(r)
    if not refs:
        return Score.undefined(_NO_REFERENCE)
    if _blank(r.answer):
        return Score(0.0, detail="empty answer: a miss, 0 against every reference (not asked)")
    outs = await asyncio.gather(*[ask("similarity", o["prompt_version"], question=r.query, reference_answer=ref,
                                      answer=r.answer) for ref in refs])
    return _of_verdicts(answer_similarity_value, "scores", list(outs))


async def _retrieval_precision(ask: Any, r: Record, o: dict[str, Any]) -> Score:
    if not _passages(r):
        return Score(retrieval_precision_value([]), detail="nothing retrieved: no relevant passage (not asked)")
    outs = await _per_passage(ask, r, "relevance", o["prompt_version"], question=r.query)
    return _of_verdicts(retrieval_precision_value, "relevant", outs)


async def _augmentation_accuracy(ask: Any, r: Record, o: dict[str, Any]) -> Score:
    if not _passages(r):
        return Score(augmentation_accuracy_value([]), detail="nothing retrieved: no passage used (not asked)")
    if _blank(r.answer):
        flags = [False] * len(r.contexts or [])
        return Score(augmentation_accuracy_value(flags), detail="empty answer: it uses no passage (not asked)")
    outs = await _per_passage(ask, r, "usage", o["prompt_version"], answer=r.answer)
    return _of_verdicts(augmentation_accuracy_value, "used", outs)


async def _augmentation_precision(ask: Any, r: Record, o: dict[str, Any]) -> Score:
    if not _passages(r):
        return Score(augmentation_precision_value([], []), detail="nothing retrieved: no relevant passage (not asked)")
    if _blank(r.answer):  # nothing used: 0 whatever is relevant
        n = len(r.contexts or [])
        return Score(augmentation_precision_value([True] * n, [False] * n),
                     detail="empty answer: it uses no passage, relevant or not (not asked)")
    v = o["prompt_version"]
    rel, use = await asyncio.gather(_per_passage(ask, r, "relevance", v, question=r.query),
                                    _per_passage(ask, r, "usage", v, answer=r.answer))
    bad = _failed(rel + use)
    if bad:
        return bad
    relevant = [x.verdict.value for x in rel]
    used = [x.verdict.value for x in use]
    return Score(augmentation_precision_value(relevant, used), detail=_detail(relevant=relevant, used=used))


async def _answer_consistency(ask: Any, r: Record, o: dict[str, Any]) -> Score:
    v = o["prompt_version"]
    if _blank(r.answer):
        return Score.undefined("empty answer: no main point to check against the passages")
    found = await ask("main_points", v, answer=r.answer)
    if not found.ok:
        return Score(None, found.status, found.detail)
    points = list(found.verdict.value)
    if not points:
        return Score.undefined("the judge found no main point in the answer")
    if not _passages(r):  # the points depend on the answer alone; none can be derived from nothing
        flags = [False] * len(points)
        return Score(answer_consistency_value(flags), detail=_detail(
            points=points, supported=flags, reasons=["nothing retrieved (not asked)"] * len(flags)))
    outs = await asyncio.gather(*[ask("support", v, statement=p, contexts=r.contexts) for p in points])
    return _of_verdicts(answer_consistency_value, "supported", list(outs), points=points)


async def _answer_consistency_binary(ask: Any, r: Record, o: dict[str, Any]) -> Score:
    if _blank(r.answer):
        return Score.undefined("empty answer: nothing to attribute to the passages")
    if not _passages(r):
        return Score(answer_consistency_binary_value(False),
                     detail="nothing retrieved: nothing to attribute the answer to (not asked)")
    out = await ask("full_support", o["prompt_version"], answer=r.answer, contexts=r.contexts)
    if not out.ok:
        return Score(None, out.status, out.detail)
    return Score(answer_consistency_binary_value(out.verdict.value), detail=out.verdict.reason)


async def _questeval(ask: Any, r: Record, o: dict[str, Any], which: str) -> Score:
    v = o["prompt_version"]
    refs = _references(r)
    if not refs:
        return Score.undefined(_NO_REFERENCE)
    reference = "\n\n".join(refs)
    qs = await ask("questions", v, text=reference)
    if not qs.ok:
        return Score(None, qs.status, qs.detail)
    questions = list(qs.verdict.value)
    if not questions:
        return Score.undefined("the judge found no key information in the reference")
    ctx = {"n_questions": len(questions)}
    # The questions and the reference's answers depend on the reference alone (shared, cached); an
    # empty answer answers none of them, so its side is not asked.
    generated = (_decided(Verdict((None,) * len(questions))) if _blank(r.answer)
                 else ask("answers", v, ctx, text=r.answer, questions=questions))
    ref_ans, gen_ans = await asyncio.gather(ask("answers", v, ctx, text=reference, questions=questions), generated)
    bad = _failed([ref_ans, gen_ans])
    if bad:
        return bad
    recall, precision = questeval_values(ref_ans.verdict.value, gen_ans.verdict.value,
                                         zero_division=o.get("zero_division"))
    detail = _detail(questions=questions, reference_answers=list(ref_ans.verdict.value),
                     answers=list(gen_ans.verdict.value))
    value = recall if which == "recall" else precision
    if value is None:
        why = ("the reference answers none of its own questions" if recall is None
               else "no question is answered by both the reference and the answer"
               + (" (the answer is empty)" if _blank(r.answer) else ""))
        return Score.undefined(f"{why}: {detail}")
    return Score(value, detail=detail)


#: Each judge metric's plan and the prompts it asks (checked to exist before any work); overall_score is
#: computed from the others' scores.
PLANS: dict[str, tuple[Plan | None, tuple[str, ...]]] = {
    "answer_similarity": (_answer_similarity, ("similarity",)),
    "retrieval_precision": (_retrieval_precision, ("relevance",)),
    "augmentation_accuracy": (_augmentation_accuracy, ("usage",)),
    "augmentation_precision": (_augmentation_precision, ("relevance", "usage")),
    "answer_consistency": (_answer_consistency, ("main_points", "support")),
    "answer_consistency_binary": (_answer_consistency_binary, ("full_support",)),
    "questeval_recall": (functools.partial(_questeval, which="recall"), ("questions", "answers")),
    "questeval_precision": (functools.partial(_questeval, which="precision"), ("questions", "answers")),
    "overall_score": (None, ()),
}


def overall_parts(specs: Sequence[Any]) -> dict[str, list[str]]:
    """For each overall_score spec, the keys of the judge metrics it averages."""
    out = {}
    for spec in specs:
        if spec.info.name != "overall_score":
            continue
        chosen = {**spec.info.options, **spec.options}.get("metrics")
        candidates = [s.key for s in specs if s.info.name in TONIC_SCALE]
        if chosen is not None:
            unknown = [m for m in chosen if m not in TONIC_SCALE]
            if unknown:
                raise ConfigError(f"metric '{spec.key}': metrics may name {', '.join(TONIC_SCALE)}; got {unknown}")
            missing = [m for m in chosen if not any(k.split("/")[0] == m for k in candidates)]
            if missing:
                raise ConfigError(f"metric '{spec.key}' averages {missing}, which this run does not compute; "
                                  "add them to the metric suite")
            candidates = [k for k in candidates if k.split("/")[0] in chosen]
        out[spec.key] = candidates
    return out


def overall_score_of(parts: Sequence[str], scores: dict[str, Score]) -> Score:
    if not parts:
        return Score.undefined("no answer_similarity / retrieval / augmentation / consistency metric in this run")
    for key in parts:
        s = scores[key]
        if s.status != "ok":
            return Score(None, s.status, f"{key}: {s.detail}" if s.detail else key)
    values = {k: scores[k].value for k in parts}
    return Score(overall_value(values), detail=_detail(**values))  # type: ignore[arg-type]


# -- the judge -------------------------------------------------------------------------------------

class Judge:
    """A configured judge: settings, price, cache. ``score`` is the runner's entry point."""

    def __init__(self, settings: JudgeSettings, cache: JudgeCache | None = None):
        self.settings = settings
        self.cache = cache
        self.prices = Prices(settings)
        self._usage: Usage | None = None  # the usage of the run in progress (read on Ctrl-C)

    def __repr__(self) -> str:
        return f"Judge({self.settings.name!r}, model={self.settings.model!r})"

    def score_one(self, name: str, fields: dict[str, Any], options: dict[str, Any]) -> Score:
        """One record's value of judge metric ``name`` (what the registered metric functions call)."""
        from ragexp.metrics.base import REGISTRY

        info = REGISTRY[name]
        spec = _Spec(key=name, info=info, options={**info.options, **options, "judge": None})
        check_specs([spec])
        record = Record(id="1", query=fields.get("query") or "-", **{k: v for k, v in fields.items() if k != "query"})
        scores, _ = self.score([record], [spec])
        return scores[name][0]

    def score(self, records: list[Record], specs: Sequence[Any], progress: bool = False
              ) -> tuple[dict[str, list[Score]], dict[str, float]]:
        """Every judge metric of ``specs`` for every record, in order, and the run's usage.

        Ctrl-C cancels the requests in flight and raises :class:`~ragexp.errors.Interrupted`, which
        says how many replies had arrived; each was cached as it arrived, so running again asks
        only for the rest.
        """
        try:
            return run_sync(self.ascore(records, specs, progress))
        except KeyboardInterrupt:
            shutdown()  # HTTP clients closed now, not by the garbage collector at exit
            u = self._usage or Usage()
            kept = f"kept in {self.cache.path}: the same command asks only for the rest" if self.cache is not None \
                else "not kept (judge.cache is off)"
            raise Interrupted(f"judge '{self.settings.name}' stopped after {u.answered} replies to {u.calls} requests "
                              f"sent ({u.cache_hits} cache hits); the replies are {kept}") from None
        except BaseException:
            shutdown()  # an error ends the run: close everything before the process exits with it
            raise

    async def ascore(self, records: list[Record], specs: Sequence[Any], progress: bool = False
                     ) -> tuple[dict[str, list[Score]], dict[str, float]]:
        """The same, awaited on the caller's own loop."""
        specs = [s for s in specs if s.info.judge]
        overall = overall_parts(specs)
        run = _Run(self)
        self._usage = run.usage
        per_record: list[dict[str, Score] | None] = [None] * len(records)
        bar = None
        if progress:
            from tqdm.auto import tqdm

            import sys

            bar = tqdm(total=len(records), desc=f"judge {self.settings.name}", file=sys.stderr, leave=False,
                       dynamic_ncols=True, mininterval=0.5)
        gate = asyncio.Semaphore(max(8, 4 * self.settings.max_concurrency))  # records in progress at once

        async def one(i: int, record: Record) -> None:
            async with gate:
                if run.budget.stopped:
                    raise BudgetStop()
                planned = [s for s in specs if PLANS[s.info.name][0] is not None]
                results = await asyncio.gather(*[self._metric(run, s, record) for s in planned],
                                               return_exceptions=True)
                for res in results:
                    if isinstance(res, BaseException):
                        raise res
                scores = {s.key: sc for s, sc in zip(planned, results)}
                for key, parts in overall.items():
                    scores[key] = overall_score_of(parts, scores)
                per_record[i] = scores
                if bar is not None:
                    bar.update(1)

        tasks = [asyncio.ensure_future(one(i, r)) for i, r in enumerate(records)]
        watch = asyncio.ensure_future(run.client.watch())  # a line when the server goes quiet
        try:
            results = await asyncio.gather(*tasks, return_exceptions=True)
            await run.drain()  # requests still in flight (a sibling failed first) finish and are cached
        except BaseException:
            for t in tasks + list(run.memo.values()):
                t.cancel()
            raise
        finally:
            watch.cancel()
            if bar is not None:
                bar.close()
        fatal = next((e for e in results if isinstance(e, BaseException) and not isinstance(e, BudgetStop)), None)
        if fatal is not None:
            raise fatal
        usage = run.usage.as_metrics()
        if self.settings.samples > 1:
            usage.update(noise_metrics(specs, per_record))
        u = run.usage
        fails = ", ".join(f"{k} {v}" for k, v in sorted(u.failures.items())) or "none"
        log.info("judge %s (%s): %d calls (%d retries, %d re-asks), %d cache hits, %d shared verdicts, "
                 "%d tokens in, %d out, $%.4f; failures: %s", self.settings.name, self.settings.model, u.calls,
                 u.retries, u.reasks, u.cache_hits, u.shared, u.tokens_in, u.tokens_out, u.cost_usd, fails)
        if any(isinstance(e, BudgetStop) for e in results):
            done = sum(1 for s in per_record if s is not None)
            where = self.cache.path if self.cache is not None else "nowhere (judge.cache is off)"
            raise BudgetExceeded(
                f"judge '{self.settings.name}' stopped before passing judge.max_cost_usd={self.settings.max_cost_usd}: "
                f"{done} of {len(records)} samples fully scored, ${run.usage.cost_usd:.4f} spent on {run.usage.calls} calls "
                f"({run.usage.cache_hits} cache hits). Every paid answer is cached in {where}: "
                "rerun with a higher judge.max_cost_usd (or a lower judge.max_tokens, which bounds each "
                "request's worst case) and only the rest is paid for")
        assert all(scores is not None for scores in per_record)  # every record finished (no sample is ever dropped)
        return {s.key: [scores[s.key] for scores in per_record] for s in specs}, usage

    async def _metric(self, run: _Run, spec: Any, record: Record) -> Score:
        absent = [f for f in spec.fields if not record.present(f)]
        if absent:
            return Score.missing(f"absent {', '.join(absent)}")
        k = self.settings.samples
        if k == 1:
            return await self._sample(run, spec, record, 0)
        outs = await asyncio.gather(*[self._sample(run, spec, record, j) for j in range(k)])
        return combine_samples(spec.info.name, list(outs))

    async def _sample(self, run: _Run, spec: Any, record: Record, j: int) -> Score:
        """The score of ``judge.samples`` index ``j``: every question asked as sample j."""
        plan = PLANS[spec.info.name][0]
        score = await plan(functools.partial(run.ask, sample=j), record, {**spec.info.options, **spec.options})
        if score.status == "ok" and (score.value is None or not math.isfinite(score.value)):
            # never an ok without a number (it would leave the mean without a word)
            return Score.undefined(f"the definition gives no value here: {score.detail}")
        return score


def noise_metrics(specs: Sequence[Any], per_record: list[dict[str, Score] | None]) -> dict[str, float]:
    """Each judge metric's self-agreement over its ``judge.samples`` verdicts: ``judge/noise/<metric>/…``
    ``fleiss_kappa`` (NaN when undefined: every verdict the same), ``flip_share`` (items whose verdicts
    differ) and ``n`` (items with all k verdicts)."""
    from ragexp.stats.twostage import fleiss_kappa, flip_share

    out: dict[str, float] = {}
    for spec in specs:
        samples = [sc[spec.key].samples for sc in per_record if sc is not None and sc[spec.key].samples]
        if not samples:
            continue
        full = [s for s in samples if all(v is not None for v in s)]
        kappa, flips = fleiss_kappa(full), flip_share(samples)
        out[f"judge/noise/{spec.key}/fleiss_kappa"] = float("nan") if kappa is None else kappa
        out[f"judge/noise/{spec.key}/flip_share"] = float("nan") if flips is None else flips
        out[f"judge/noise/{spec.key}/n"] = float(len(full))
    return out


def check_specs(specs: Sequence[Any]) -> None:
    """Refuse, before any work, options the judge cannot honour (unknown prompt versions, …)."""
    for spec in specs:  # the judge metrics of a run (build_judge), or the one of Judge.score_one
        if spec.info.name not in PLANS:
            raise ConfigError(f"metric '{spec.key}' is marked judge=True but the judge has no plan for it")
        if spec.options.get("judge") is not None:
            raise ConfigError(f"metric '{spec.key}': choose the judge with judge=<name> "
                              f"(conf/judge/), not metric.{spec.key}.judge")
        for kind in PLANS[spec.info.name][1]:
            load_prompt(kind, str({**spec.info.options, **spec.options}.get("prompt_version", "v1")))
    overall_parts(specs)


