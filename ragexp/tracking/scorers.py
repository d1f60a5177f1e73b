"""ragexp's metrics as ``mlflow.genai`` scorers (docs/traces.md, "ragexp's metrics in mlflow.genai.evaluate").

    >>> import ragexp  # doctest: +SKIP
    >>> scorers = ragexp.mlflow_scorers(metric="answer")  # doctest: +SKIP
    >>> mlflow.genai.evaluate(data=rows, scorers=scorers)  # doctest: +SKIP

Each scorer is one metric key of the chosen suite (``metric=``, as ``python -m ragexp metric=...``), computed
by the same code as a ragexp run on a record made of MLflow's row: ``inputs`` → ``query`` (a text, or the
value under ``query`` / ``question`` / ``input``), ``outputs`` → ``answer`` (a text, or ``answer`` /
``response`` / ``output``) and, from a dict, ``contexts`` / ``context_ids``; else the documents of the
trace's ``RETRIEVER`` spans (``page_content``; ``id`` or ``metadata.doc_uri``); ``expectations`` →
``reference_answers`` (``expected_response``, ``reference_answers``), ``gt_contexts`` / ``gt_context_ids``
(``expected_retrieved_context``: ``content`` / ``doc_uri``; ``gt_context_ids``). A judge metric asks the
configured judge (``judge=``) and gives its reasons as rationale; a value ragexp would not give (a field
missing, the judge failing) comes back as feedback carrying that error, never a 0.
"""

from __future__ import annotations

import threading
from typing import Any, Iterable, Mapping, Sequence

QUERY_KEYS = ("query", "question", "input", "query_str", "request", "prompt")
ANSWER_KEYS = ("answer", "response", "output", "result", "text", "content")


def _text(value: Any, keys: Sequence[str]) -> str | None:
    """A text, or the first text under one of ``keys`` of a mapping."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for k in keys:
            if isinstance(value.get(k), str):
                return value[k]
    return None


def _retrieved(trace: Any) -> tuple[list[str] | None, list[str] | None]:
    """Texts and ids of the documents of a trace's first ``RETRIEVER`` span (MLflow's document form)."""
    if trace is None:
        return None, None
    from mlflow.entities import SpanType

    spans = sorted(trace.search_spans(span_type=SpanType.RETRIEVER), key=lambda s: s.start_time_ns or 0)
    if not spans or not isinstance(spans[0].outputs, list):
        return None, None
    texts, ids = [], []
    for doc in spans[0].outputs:
        doc = doc if isinstance(doc, Mapping) else {"page_content": str(doc)}
        texts.append(str(doc.get("page_content") or ""))
        meta = doc.get("metadata") or {}
        ids.append(doc.get("id") or meta.get("doc_uri"))
    return texts, (None if any(i is None for i in ids) else [str(i) for i in ids])


def record_of(inputs: Any = None, outputs: Any = None, expectations: Mapping[str, Any] | None = None,
              trace: Any = None) -> dict[str, Any]:
    """The raw record fields of one ``mlflow.genai.evaluate`` row (read by :func:`ragexp.common.records.to_record`).

    >>> record_of({"question": "q?"}, {"answer": "a", "contexts": ["p"]}, {"expected_response": "a"})
    {'query': 'q?', 'answer': 'a', 'contexts': ['p'], 'reference_answers': ['a']}
    """
    raw: dict[str, Any] = {"query": _text(inputs, QUERY_KEYS) or ""}
    answer = _text(outputs, ANSWER_KEYS)
    if answer is not None:
        raw["answer"] = answer
    if isinstance(outputs, Mapping) and outputs.get("contexts") is not None:
        raw["contexts"] = list(outputs["contexts"])
        if outputs.get("context_ids") is not None:
            raw["context_ids"] = [str(i) for i in outputs["context_ids"]]
    else:
        texts, ids = _retrieved(trace)
        if texts is not None:
            raw["contexts"] = texts
            if ids is not None:
                raw["context_ids"] = ids
    exp = dict(expectations or {})
    refs = exp.get("reference_answers", exp.get("expected_response"))
    if refs is not None:
        raw["reference_answers"] = [refs] if isinstance(refs, str) else [str(r) for r in refs]
    expected = exp.get("expected_retrieved_context")
    if isinstance(expected, list) and expected:
        items = [e if isinstance(e, Mapping) else {"content": str(e)} for e in expected]
        if all(i.get("content") is not None for i in items):
            raw["gt_contexts"] = [str(i["content"]) for i in items]
        if all(i.get("doc_uri") is not None for i in items):
            raw["gt_context_ids"] = [str(i["doc_uri"]) for i in items]
    if exp.get("gt_context_ids") is not None:
        raw["gt_context_ids"] = [str(i) for i in exp["gt_context_ids"]]
    if exp.get("gt_contexts") is not None:
        raw["gt_contexts"] = [str(i) for i in exp["gt_contexts"]]
    return raw


class _Suite:
    """The composed metric specs and, when a metric needs one, the judge: built once, shared by the scorers."""

    def __init__(self, overrides: Sequence[str]):
        from ragexp.common.paths import compose, plain
        from ragexp.core.scoring import build_metrics

        cfg = compose(list(overrides))
        self.specs, _ = build_metrics(cfg.get("metric"), cfg.get("matcher"))
        self.judge_specs = [s for s in self.specs if s.info.judge]
        self.judge = None
        self.judge_model = None
        if self.judge_specs:
            from ragexp.common.secrets import scrub
            from ragexp.judge import build_judge

            self.judge = build_judge(cfg.get("judge"), self.judge_specs)
            self.judge_model = scrub(str(plain(cfg.get("judge") or {}).get("model")))
        self.lock = threading.Lock()

    def value(self, key: str, raw: dict[str, Any]) -> Any:
        """One metric key's :class:`ragexp.metrics.base.Score` on one record, as a ragexp run computes it."""
        from ragexp.common.records import to_record
        from ragexp.core.scoring import score
        from ragexp.metrics.base import label_scales

        from dataclasses import replace

        from ragexp.common.records import present_fields

        spec = next(s for s in self.specs if s.key == key)
        record = to_record(raw, path="mlflow.genai.evaluate", row=1, default_id="row", scales=label_scales())
        if spec.info.resolve is not None:  # an option settled by the fields there are (as check_fields does)
            spec = replace(spec, options=spec.info.resolve(dict(spec.options), tuple(present_fields([record]))))
        missing = [f for f in spec.fields if not record.present(f)]
        if missing:
            from ragexp.metrics.base import Score

            return Score(None, "missing_field", f"the row has no {', '.join(missing)}")
        if spec.info.judge:
            with self.lock:  # the judge client is shared by the scorers MLflow runs in threads
                scores, _ = self.judge.score([record], [spec], progress=False)
        else:
            scores = score([record], [spec])
        return scores[key][0]


def mlflow_scorers(metric: str = "default", keys: Iterable[str] | None = None, *, matcher: str | None = None,
                   judge: str | None = None, overrides: Sequence[str] = ()) -> list[Any]:
    """``mlflow.genai`` scorers for the metric keys of suite ``metric`` (all of them, or those in ``keys``),
    for ``mlflow.genai.evaluate(data=..., scorers=...)``. ``matcher``, ``judge`` and ``overrides`` choose as
    on the command line (``judge="openai_compatible"``, ``overrides=["judge.api_base=http://..."]``).

    Each gives MLflow a ``Feedback``: the value ragexp gives the same record, from a ``CODE`` source named by
    the metric, or from the judge model as ``LLM_JUDGE`` source with the judge's reasons as rationale; a
    status other than ``ok`` as the feedback's error."""
    from ragexp.errors import ConfigError

    chosen = [f"metric={metric}", *([f"matcher={matcher}"] if matcher else []),
              *([f"judge={judge}"] if judge else []), *overrides]
    suite = _Suite(chosen)
    wanted = list(keys) if keys is not None else [s.key for s in suite.specs if s.info.level == "sample"]
    unknown = [k for k in wanted if k not in {s.key for s in suite.specs}]
    if unknown:
        raise ConfigError(f"metric keys {', '.join(unknown)} are not in metric={metric}: "
                          f"{', '.join(s.key for s in suite.specs)}")
    return [_scorer(suite, key) for key in wanted]


def _scorer(suite: _Suite, key: str) -> Any:
    """One metric key as an ``mlflow.genai`` scorer named by it."""
    from mlflow.entities import AssessmentError, AssessmentSource, AssessmentSourceType, Feedback
    from mlflow.genai.scorers import scorer

    from ragexp.common.secrets import scrub
    from ragexp.tracking.traces import rationale

    judged = any(s.key == key and s.info.judge for s in suite.specs)
    source = (AssessmentSource(source_type=AssessmentSourceType.LLM_JUDGE, source_id=suite.judge_model) if judged
              else AssessmentSource(source_type=AssessmentSourceType.CODE, source_id=key))

    def compute(inputs=None, outputs=None, expectations=None, trace=None) -> Feedback:
        s = suite.value(key, record_of(inputs, outputs, expectations, trace))
        if s.status != "ok":
            return Feedback(name=key, source=source, error=AssessmentError(error_code=str(s.status).upper(),
                                                                           error_message=scrub(str(s.detail or s.status))))
        detail = s.detail if s.detail is None or isinstance(s.detail, str) else str(s.detail)
        return Feedback(name=key, value=s.value, source=source, rationale=rationale(detail) if judged else None)

    return scorer(compute, name=key)
