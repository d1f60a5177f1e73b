"""The RAG pipeline under test: corpus → chunker → retriever → compressor → generator, each stage a
config group whose YAML keys are its ``_target_``'s arguments. :func:`build_pipeline` validates
every setting before heavy work and returns None when every stage is off. Definitions: docs/pipeline.md.
"""

from __future__ import annotations

import inspect
from typing import Any

from ragexp.common.paths import plain, store_uri
from ragexp.common.targets import build, resolve
from ragexp.errors import ConfigError

BUILTIN = "ragexp.pipeline.core.RAGPipeline"
TRACED = "ragexp.pipeline.traced.TracedPipeline"


def build_pipeline(cfg: Any, dataset: Any):
    """The configured pipeline for this dataset, or None when every stage is off."""
    pipe = plain(cfg.get("pipeline")) or {"_target_": BUILTIN}
    if not isinstance(pipe, dict) or "_target_" not in pipe:
        raise ConfigError(f"pipeline: expected a mapping with a _target_ (see conf/pipeline/), got {pipe!r}")
    layer = plain(cfg.get("memory_layer")) or {}
    if layer.get("name", "none") != "none":  # the memory layer under test does the retrieval (docs/memory-layers.md)
        if pipe["_target_"] != BUILTIN:
            raise ConfigError(f"memory_layer={layer.get('name')} replaces the pipeline's retrieval; drop "
                              f"pipeline={'traced' if pipe['_target_'] == TRACED else 'custom'} (or memory_layer=none)")
        from ragexp.pipeline.memory_layers import build_memory_pipeline

        return build_memory_pipeline(layer, cfg, dataset)
    if pipe["_target_"] in (None, "???"):
        raise ConfigError("pipeline=custom needs your callable: pipeline._target_=my_module.my_function")
    if pipe["_target_"] == TRACED:
        return _traced(pipe, cfg)
    if pipe["_target_"] != BUILTIN:
        return _custom(pipe, cfg)
    return _builtin(pipe, cfg, dataset)


def _builtin(pipe: dict[str, Any], cfg: Any, dataset: Any):
    from ragexp.pipeline.chunking import Chunker
    from ragexp.pipeline.compressors import NoCompressor
    from ragexp.pipeline.core import RAGPipeline
    from ragexp.pipeline.generators import ExtractiveGenerator, PrecomputedGenerator
    from ragexp.pipeline.retrievers import NoRetriever

    retriever = build(cfg.get("retriever"), "retriever", NoRetriever())
    compressor = build(cfg.get("compressor"), "compressor", NoCompressor())
    generator = build(cfg.get("generator"), "generator", PrecomputedGenerator())
    chunker = build(cfg.get("chunker"), "chunker", Chunker())
    if not retriever.uses_corpus and retriever.top_k is None and not compressor.active and not generator.active:
        return None

    records = dataset.records
    if retriever.uses_corpus:
        if not dataset.corpus:
            raise ConfigError(f"retriever={retriever.name} searches the dataset's corpus, but dataset "
                              f"'{dataset.name}' brings none; choose a dataset with a corpus or retriever=none")
    elif compressor.active or isinstance(generator, ExtractiveGenerator):
        if not any(r.has("contexts") for r in records):
            stage = f"compressor={compressor.name}" if compressor.active else f"generator={generator.name}"
            raise ConfigError(f"{stage} works on contexts, but retriever=none and dataset '{dataset.name}' brings "
                              "none; choose a retriever (bm25, dense, hybrid) over a dataset with a corpus")
    for stage in (compressor, generator):
        client = getattr(stage, "client", None)
        if client is not None:
            client.check_credentials()
    kwargs = {k: v for k, v in pipe.items() if not k.startswith("_")}
    try:
        return RAGPipeline(chunker=chunker, retriever=retriever, compressor=compressor, generator=generator,
                           corpus=dataset.corpus, **kwargs)
    except TypeError as exc:
        raise ConfigError(f"pipeline: {exc}") from None


def _own_stages_only(cfg: Any, kind: str) -> None:
    """``pipeline=custom`` / ``traced`` replace the built-in stages: a stage chosen too is a ConfigError."""
    for group, off in (("retriever", "none"), ("compressor", "none"), ("generator", "precomputed")):
        node = plain(cfg.get(group)) or {}
        if node.get("name", off) != off:
            raise ConfigError(f"pipeline={kind} replaces the built-in stages; drop {group}={node.get('name')} "
                              f"(your {'app' if kind == 'traced' else 'callable'} does the retrieval and generation)")


def _traced(pipe: dict[str, Any], cfg: Any):
    from ragexp.common.isolation import DEFAULT_TIMEOUT_S
    from ragexp.common.spans import SpanReading
    from ragexp.pipeline.traced import TracedPipeline

    _own_stages_only(cfg, "traced")
    if pipe.get("factory") in (None, "", "???"):
        raise ConfigError("pipeline=traced needs your app's factory: pipeline.factory=my_app:build (a function "
                          "returning the chain or query engine; pipeline.kwargs are its keyword arguments)")
    kwargs = pipe.get("kwargs") or {}
    if not isinstance(kwargs, dict):
        raise ConfigError(f"pipeline.kwargs: expected a mapping of keyword arguments, got {kwargs!r}")
    known = {"_target_", "factory", "kwargs", "call", "autolog", "experiment", "tracking_uri", "query_key",
             "answer_key", "context_id", "timeout_s"}
    unknown = sorted(set(pipe) - known)
    if unknown:
        raise ConfigError(f"pipeline=traced: unknown key(s) {', '.join(unknown)}; your app's arguments go under "
                          f"pipeline.kwargs (e.g. +pipeline.kwargs.{unknown[0]}=...)")
    reading = SpanReading(query_key=pipe.get("query_key"), answer_key=pipe.get("answer_key"),
                          context_id=pipe.get("context_id") or "id")
    tracking = plain(cfg.get("tracking")) or {}
    return TracedPipeline(pipe["factory"], kwargs, call=pipe.get("call") or "auto", autolog=pipe.get("autolog", "auto"),
                          experiment=pipe.get("experiment") or tracking.get("experiment") or "ragexp",
                          tracking_uri=store_uri(tracking.get("uri")), reading=reading,
                          timeout_s=pipe.get("timeout_s", DEFAULT_TIMEOUT_S))


def _custom(pipe: dict[str, Any], cfg: Any):
    from ragexp.pipeline.core import CustomPipeline

    _own_stages_only(cfg, "custom")
    target = pipe["_target_"]
    produces = pipe.get("_produces_") or ("contexts", "context_ids", "answer")
    kwargs = {k: v for k, v in pipe.items() if not k.startswith("_")}
    obj = resolve(target, "pipeline._target_")
    try:
        if inspect.isclass(obj):
            system = obj(**kwargs)
        else:
            import functools

            inspect.signature(obj).bind("query", **kwargs)
            system = functools.partial(obj, **kwargs) if kwargs else obj
    except TypeError as exc:
        raise ConfigError(f"pipeline._target_ {target}: {exc} (it is called as system(query) with the other "
                          "keys of the pipeline config as keyword arguments)") from None
    if not callable(system):
        raise ConfigError(f"pipeline._target_ {target}: expected a function or a class with __call__(query)")
    return CustomPipeline(system, target, produces)


__all__ = ["build_pipeline"]
