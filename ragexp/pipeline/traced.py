"""``pipeline=traced``: your app as it is (a LangChain chain, a LlamaIndex query engine, any function),
built by your factory from the swept keyword arguments and asked each question under MLflow tracing.
Contexts, ids, the answer and stage timings are read from the app's own spans by the same mapping as
``dataset=mlflow_traces`` (:mod:`ragexp.common.spans`). Definitions: docs/traced-apps.md.
"""

from __future__ import annotations

import inspect
import os
import sys
import time
from typing import Any, Callable, Iterable

from ragexp.common.isolation import DEFAULT_TIMEOUT_S, UserCode, describe, load
from ragexp.common.paths import artifact_root
from ragexp.common.records import Record
from ragexp.common.spans import RECORD_TAG, SpanReading, count_problems, problems_line, read_trace
from ragexp.errors import ConfigError

#: MLflow flavors whose autologging ``autolog: auto`` turns on for an app whose class comes from their package
#: (after the app is built: both trace through callbacks or handlers registered at call time).
AUTOLOG = {"langchain": "langchain", "llama_index": "llama_index"}
#: Traces exported and read back together (MLflow writes them in the background; one flush per batch).
BATCH = 64

Progress = Callable[[Iterable[Any]], Iterable[Any]]


def _autolog(which: Any, app: Any) -> list[str]:
    """Turn on MLflow's autologging for ``which`` (``auto``: the framework of :data:`AUTOLOG` the app's class is from)."""
    import mlflow

    if which in (None, False, "none", []):
        return []
    home = type(app).__module__.split(".")[0]
    names = [n for n, prefix in AUTOLOG.items() if home.startswith(prefix)] if which == "auto" \
        else [which] if isinstance(which, str) else list(which)
    for name in names:
        flavor = getattr(mlflow, name, None)
        if flavor is None or not hasattr(flavor, "autolog"):
            raise ConfigError(f"pipeline.autolog: mlflow has no autologging for {name!r}; expected auto, none or "
                              f"a list of mlflow flavors such as langchain, llama_index, openai")
        flavor.autolog(silent=True)
    return names


class _AppFailed(Exception):
    """The app's call failed (its reason already one line): ends the question's root span as an error."""


class TracedPipeline:
    """Builds the app once (``factory(**kwargs)``), then per question: a root span (inputs ``{"query": ...}``,
    outputs what the app returned) around ``call``, the trace read back into the record.

    ``call``: ``auto`` (``invoke`` for LangChain runnables, else ``query`` for LlamaIndex engines, else the
    app itself called), a method name, or ``module:function`` called as ``function(app, query)``.
    ``experiment``: where the app's traces go in the run's store (``tracking_uri``). ``timeout_s``: seconds one
    question may take (the app runs as :mod:`ragexp.common.isolation` says; whatever it raises, ``sys.exit``
    included, or a question past its deadline is that question's ``pipeline_error``).
    """

    def __init__(self, factory: str, kwargs: dict[str, Any] | None = None, call: str = "auto", autolog: Any = "auto",
                 experiment: str = "ragexp app traces", tracking_uri: str | None = None,
                 reading: SpanReading = SpanReading(), timeout_s: float | None = DEFAULT_TIMEOUT_S):
        self.target = factory
        self.kwargs = dict(kwargs or {})
        self.code = UserCode(f"pipeline.factory {factory}", timeout_s)
        build = load(factory, "pipeline.factory")
        if not callable(build):
            raise ConfigError(f"pipeline.factory {factory}: expected a function that builds your app, got "
                              f"{type(build).__name__}")
        try:
            inspect.signature(build).bind(**self.kwargs)
        except TypeError as exc:
            raise ConfigError(f"pipeline.factory {factory}: {exc} (it is called with pipeline.kwargs: "
                              f"{self.kwargs})") from None
        except ValueError:  # a builtin without a signature: let the call tell
            pass
        self.build = build
        self.call = call
        self.caller = None if call in ("auto", None) or ":" not in str(call) else load(call, "pipeline.call")
        self.autolog = autolog
        self.experiment = experiment
        self.uri = tracking_uri
        self.reading = reading
        self.app: Any = None
        self.where: Any = None  # the app's traces' experiment (an MLflow trace location), set by run()
        self.autologged: list[str] = []
        self.stats: dict[str, float] = {}
        self.failures = 0

    @property
    def produces(self) -> tuple[str, ...]:
        return ("contexts", "context_ids", "answer", "timings", "latency_s")

    def _ask(self) -> Callable[[str], Any]:
        app, call = self.app, self.call
        if self.caller is not None:
            return lambda q: self.caller(app, q)
        if call not in ("auto", None):
            method = getattr(app, str(call), None)
            if not callable(method):
                raise ConfigError(f"pipeline.call: the app built by {self.target} ({type(app).__name__}) has no "
                                  f"method {call!r}")
            return method
        for name in ("invoke", "query"):
            if callable(getattr(app, name, None)):
                return getattr(app, name)
        if callable(app):
            return app
        raise ConfigError(f"pipeline.call: cannot tell how to ask {type(app).__name__} a question (no invoke, no "
                          "query, not callable); set pipeline.call=METHOD or pipeline.call=module:function")

    def prepare(self) -> None:
        """Build the app (not part of any question's timing)."""
        if self.app is not None:
            return
        t0 = time.perf_counter()
        called = f"pipeline.factory {self.target}({', '.join(f'{k}={v!r}' for k, v in self.kwargs.items())})"
        self.app = UserCode(called, None).build(lambda: self.build(**self.kwargs))
        self.stats["pipeline/build_seconds"] = time.perf_counter() - t0

    def run(self, records: list[Record], progress: Progress | None = None) -> list[Record]:
        import mlflow

        from mlflow.entities.trace_location import MlflowExperimentLocation
        from mlflow.tracing.config import get_config

        from ragexp.common.secrets import redact_span

        had_uri = mlflow.get_tracking_uri() if mlflow.is_tracking_uri_set() else None
        if self.uri:
            mlflow.set_tracking_uri(self.uri)
        if mlflow.get_tracking_uri().startswith("sqlite:"):  # one writer: MLflow's export threads wait on SQLite's lock
            os.environ.setdefault("MLFLOW_ASYNC_TRACE_LOGGING_MAX_WORKERS", "1")
        theirs: list | None = None  # the span processors set before ours (by the factory too), put back at the end
        try:
            self.where = MlflowExperimentLocation(self._experiment_id(mlflow))  # the process's active experiment untouched
            self.prepare()
            self.autologged = _autolog(self.autolog, self.app)  # turned off again at the end
            theirs = list(get_config().span_processors)  # after the factory, which may set its own: kept, ours last
            mlflow.tracing.configure(span_processors=[*theirs, redact_span])  # secrets out of every span it writes
            ask = self._ask()
            pending: list[tuple[Record, str | None, float]] = []
            problems: list[list[str]] = []
            for r in progress(records) if progress else records:
                pending.append(self._one(mlflow, ask, r))
                if len(pending) >= BATCH:
                    problems += self._read_back(mlflow, pending)
                    pending = []
            problems += self._read_back(mlflow, pending)
        finally:
            if theirs is not None:
                mlflow.tracing.configure(span_processors=theirs)
            for name in self.autologged:  # the process is left as it was found (a notebook, the next sweep job)
                getattr(mlflow, name).autolog(disable=True)
            self.autologged = []
            mlflow.set_tracking_uri(had_uri)  # None: unset again, as it was
        counts = count_problems(problems)
        for p, n in counts.items():
            self.stats[f"pipeline/trace_problems/{p}"] = float(n)
        self.stats["pipeline/failures"] = float(self.failures)
        self.stats["pipeline/timeouts"] = float(self.code.timeouts)
        print(f"[ragexp] {problems_line(counts, len(problems), f'pipeline=traced ({self.target})')}",
              file=sys.stderr, flush=True)
        if self.failures:
            late = f", {self.code.timeouts} of them past pipeline.timeout_s={self.code.timeout_s:g} s" \
                if self.code.timeouts else ""
            print(f"[ragexp] {self.failures} question(s) failed in the app (an error, sys.exit, no answer in "
                  f"time{late}); their fields are left empty (see the pipeline_error column of per_sample.json)",
                  file=sys.stderr, flush=True)
        return records

    def _experiment_id(self, mlflow: Any) -> str:
        """The app's traces' experiment, created beside a SQLite store (not in ./mlruns) as a GenAI one."""
        client = mlflow.MlflowClient()
        for _ in range(3):  # parallel sweep jobs may race to create it
            found = client.get_experiment_by_name(self.experiment)
            if found is not None:
                return found.experiment_id
            try:
                return client.create_experiment(self.experiment, artifact_location=artifact_root(mlflow.get_tracking_uri()),
                                                tags={"mlflow.experimentKind": "genai_development"})
            except Exception:  # noqa: BLE001 - created by another job meanwhile: found on the next pass
                time.sleep(0.2)
        found = client.get_experiment_by_name(self.experiment)
        if found is None:
            raise ConfigError(f"pipeline.experiment: cannot create the experiment {self.experiment!r} for the app's traces")
        return found.experiment_id

    def _one(self, mlflow: Any, ask: Callable[[str], Any], r: Record) -> tuple[Record, str | None, float]:
        t0 = time.perf_counter()
        trace_id = None
        try:
            with mlflow.start_span(name="ragexp.traced", span_type="CHAIN", trace_destination=self.where) as span:
                trace_id = span.trace_id
                span.set_inputs({"query": r.query})
                mlflow.update_current_trace(tags={RECORD_TAG: r.id})
                out = self.code.call(ask, r.query, label=f"question {r.id}")
                if not out.ok:  # the root span ends ERROR with the reason (secrets redacted), not the app's raw message
                    raise _AppFailed(out.reason)
                span.set_outputs(out.value)
        except Exception as exc:  # noqa: BLE001 - the app's failure is this sample's, not the run's
            self.failures += 1
            r.extra["pipeline_error"] = str(exc) if isinstance(exc, _AppFailed) else describe(exc)
        return r, trace_id, time.perf_counter() - t0

    def _read_back(self, mlflow: Any, pending: list[tuple[Record, str | None, float]]) -> list[list[str]]:
        """Each trace of the batch read into its record (contexts, ids, answer, timings)."""
        if not pending:
            return []
        mlflow.flush_trace_async_logging()
        out = []
        for r, trace_id, wall in pending:
            trace = mlflow.get_trace(trace_id, silent=True) if trace_id else None
            if trace is None:
                out.append(["trace_not_stored"])
                r.extra["trace_status"] = "trace_not_stored"
                r.timings, r.latency_s = {"total": wall}, wall
                continue
            mapped = read_trace(trace, self.reading, record_id=r.id)
            raw = mapped.raw
            if r.extra.get("pipeline_error"):  # said there already
                mapped.problems = [p for p in mapped.problems if p not in ("no_output", "non_text_output")]
            for name in ("contexts", "context_ids", "answer"):
                value = raw.get(name)
                setattr(r, name, list(value) if isinstance(value, list) else value)
            r.timings = dict(raw.get("timings") or {})
            r.timings.setdefault("total", wall)
            r.latency_s = r.timings["total"]
            r.extra["trace_id"] = trace_id
            r.extra["trace_status"] = mapped.status
            if "context_scores" in raw:
                r.extra["context_scores"] = raw["context_scores"]
            out.append(mapped.problems)
        return out


__all__ = ["TracedPipeline"]
