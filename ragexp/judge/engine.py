"""Scoring a dataset's judge metrics: plans per metric, shared verdicts, one event loop.

:class:`Judge` is what :func:`ragexp.judge.build_judge` returns and the runner calls:
``judge.score(records, specs, progress)`` → ``({metric key: [Score per record]}, usage)``.

- Each metric is a *plan*, its registered function in ``ragexp/metrics/judged/``: the verdicts it asks
  for (the prompts beside it), then its pure arithmetic on them.
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
import logging
import math
import warnings
from typing import Any, Iterable, Sequence

from ragexp.errors import BudgetExceeded, Interrupted
from ragexp.judge.errors import BudgetStop, CallFailed, ParseError
from ragexp.metrics.base import Score
from ragexp.metrics.judged import Outcome, VerdictKind, detail
from ragexp.common.records import Record
from ragexp.judge.cache import JudgeCache
from ragexp.judge.client import STANDIN_NOTE, Budget, JudgeClient, Prices, Usage
from ragexp.judge.loop import gather_watched, run_sync, shutdown
from ragexp.judge.parse import parse_verdict
from ragexp.judge.settings import JudgeSettings
from ragexp.judge.templates import Prompt, load_prompt

log = logging.getLogger("ragexp.judge")

_CORRECTION = ("Your reply could not be read: {reason}.{cut} Reply again with only the JSON object, "
               "nothing before or after it, in this form:\n{form}")


# -- one verdict -------------------------------------------------------------------------------------

def _form(prompt: Prompt) -> str:
    lines = [ln for ln in prompt.user.strip().splitlines() if ln.strip().startswith("{")]
    return lines[-1] if lines else "a JSON object"


class _Run:
    """The state of one ``score`` call: client, shared verdicts, usage."""

    def __init__(self, judge: "Judge"):
        self.usage = Usage()
        self.budget = Budget(judge.settings.max_cost_usd)
        self.client = JudgeClient(judge.settings, judge.cache, judge.prices, self.usage, self.budget)
        self.memo: dict[str, asyncio.Future] = {}
        self.shots = judge.shots

    async def drain(self) -> None:
        """Wait until no request of this run is in flight."""
        while pending := [t for t in self.memo.values() if not t.done()]:
            await asyncio.wait(pending)
        for t in self.memo.values():  # mark every failure as seen (BudgetStop may have had no reader)
            if not t.cancelled():
                t.exception()

    async def ask(self, kind: VerdictKind, version: str, ctx: dict[str, Any] | None = None, *, sample: int = 0,
                  **values: Any) -> Outcome:
        """The verdict of ``kind`` (its prompt) on ``values``; ``sample`` j > 0 asks the question again (its own
        cache key and seed + j: ``judge.samples``)."""
        prompt = load_prompt(kind.name, version, kind.folder)
        messages = prompt.render(**values)
        if kind.name in self.shots:  # judge.examples: people's worked examples (ragexp.judge.examples)
            from ragexp.judge.examples import with_examples

            messages = with_examples(messages, self.shots[kind.name])
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

    async def _ask(self, kind: VerdictKind, prompt: Prompt, messages: list[dict[str, str]], key: str,
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


def combine_samples(binary: bool, outs: list[Score]) -> Score:
    """One record's value from its ``judge.samples`` scores (docs/judge-trust.md, "Judge noise").

    A failed sample (timeout, parse error…) fails the record, as one failed verdict fails a metric;
    otherwise the mean of the values the definition gives (the majority for a binary metric: a tie,
    possible with an even k, is 0), with every sample's value kept in ``samples``.

    >>> combine_samples(True, [Score(1.0), Score(0.0), Score(1.0)]).value
    1.0
    >>> combine_samples(True, [Score(1.0), Score(0.0)]).value
    0.0
    >>> combine_samples(False, [Score(0.5), Score(1.0), Score.undefined("-")]).samples
    (0.5, 1.0, None)
    """
    bad = next((o for o in outs if o.status not in ("ok", "undefined")), None)
    if bad is not None:
        return bad
    values = tuple(o.value if o.status == "ok" else None for o in outs)
    ok = [v for v in values if v is not None]
    if not ok:
        return outs[0]
    value = (1.0 if sum(ok) > len(ok) / 2 else 0.0) if binary else sum(ok) / len(ok)
    return Score(value, detail=detail(samples=list(values), first=outs[0].detail), samples=values)


def _material(values: dict[str, Any]) -> Iterable[str]:
    """The graded material a prompt quotes (its slot values): a verdict found inside it is not the judge's."""
    for v in values.values():
        if isinstance(v, str):
            yield v
        elif isinstance(v, (list, tuple)):
            yield from (str(x) for x in v)


# -- the judge -------------------------------------------------------------------------------------

class Judge:
    """A configured judge: settings, price, cache. ``score`` is the runner's entry point."""

    def __init__(self, settings: JudgeSettings, cache: JudgeCache | None = None):
        self.settings = settings
        self.cache = cache
        self.prices = Prices(settings)
        self._usage: Usage | None = None  # the usage of the run in progress (read on Ctrl-C)
        self.shots: dict[str, str] = {}  # judge.examples: the worked examples per question (ragexp.judge.examples)
        self.example_ids: list[str] = []  # ... and the records they were taken from

    def __repr__(self) -> str:
        return f"Judge({self.settings.name!r}, model={self.settings.model!r})"

    def score(self, records: list[Record], specs: Sequence[Any], progress: bool = False
              ) -> tuple[dict[str, list[Score]], dict[str, float]]:
        """Every judge metric of ``specs`` for every record, in order, and the run's usage.

        Ctrl-C cancels the requests in flight and raises :class:`~ragexp.errors.Interrupted`, which
        says how many replies had arrived; each was cached as it arrived, so running again asks
        only for the rest.
        """
        try:
            scored = run_sync(self.ascore(records, specs, progress))
            if self._usage is not None and self._usage.standin:  # said under the run's table and in its warnings
                warnings.warn(STANDIN_NOTE, RuntimeWarning, stacklevel=2)
            return scored
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
        combined = [(s, s.info.judge.parts(s, specs)) for s in specs if s.info.judge.parts]  # overall_score
        planned = [s for s in specs if not s.info.judge.parts]
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
                results = await asyncio.gather(*[self._metric(run, s, record) for s in planned],
                                               return_exceptions=True)
                for res in results:
                    if isinstance(res, BaseException):
                        raise res
                scores = {s.key: sc for s, sc in zip(planned, results)}
                for spec, parts in combined:
                    scores[spec.key] = spec.info.fn({k: scores[k] for k in parts})
                per_record[i] = scores
                if bar is not None:
                    bar.update(1)

        tasks = [asyncio.ensure_future(one(i, r)) for i, r in enumerate(records)]
        # requests still in flight (a sibling failed first) finish and are cached before a failure is raised
        results = await gather_watched(run.client, tasks, bar=bar, settle=run.drain,
                                       also_cancel=lambda: list(run.memo.values()), tolerate=(BudgetStop,))
        usage = run.usage.as_metrics()
        if self.settings.samples > 1:
            usage.update(noise_metrics(specs, per_record))
        u = run.usage
        fails = ", ".join(f"{k} {v}" for k, v in sorted(u.failures.items())) or "none"
        log.info("judge %s (%s): %s calls to the model (%s retried after an error, %s asked again after an "
                 "unreadable reply), %s verdicts from the cache, %s verdicts reused by another metric or sample; "
                 "%s tokens in, %s out, $%.4f; failures: %s", self.settings.name, self.settings.model,
                 f"{u.calls:,}", f"{u.retries:,}", f"{u.reasks:,}", f"{u.cache_hits:,}", f"{u.shared:,}",
                 f"{u.tokens_in:,}", f"{u.tokens_out:,}", u.cost_usd, fails)
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
        return combine_samples(spec.info.binary, list(outs))

    async def _sample(self, run: _Run, spec: Any, record: Record, j: int) -> Score:
        """The score of ``judge.samples`` index ``j``: every question asked as sample j."""
        score = await spec.info.fn(functools.partial(run.ask, sample=j), *[getattr(record, f) for f in spec.fields],
                                   **{**spec.info.options, **spec.options})
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
    for spec in specs:  # the judge metrics of a run (build_judge)
        for kind in spec.info.judge.asks:
            load_prompt(kind.name, str({**spec.info.options, **spec.options}.get("prompt_version", "v1")), kind.folder)
        if spec.info.judge.parts:
            spec.info.judge.parts(spec, specs)


