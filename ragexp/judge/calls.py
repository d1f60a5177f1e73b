"""One litellm call in this process.

Shared by :mod:`.client` (the retry layer, in the main process) and :mod:`.workers` (the child
processes of ``judge.workers``), which both import it and neither imports the other for it:
litellm imported quietly (:func:`_quiet_litellm`), a model's declared price registered
(:func:`register_price`) and one ``litellm.acompletion`` (:func:`acompletion`). How a failure
is classified and retried is :mod:`ragexp.common.http`'s, shared with the pipeline.
"""

from __future__ import annotations

import functools
import logging
import os
from typing import Any

from ragexp.judge.loop import litellm_provider


@functools.cache
def _quiet_litellm() -> Any:
    """litellm, imported once with its price map local and its per-request log lines off."""
    if not os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP"):
        os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # never fetch the price map at run time
    import litellm

    litellm.suppress_debug_info = True
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy", "httpx"):
        logging.getLogger(name).setLevel(logging.WARNING)  # not one log line per request under Hydra's INFO logging
    return litellm


@functools.cache
def register_price(model: str, per_in: float, per_out: float) -> None:
    """Put a model that litellm's price map lacks into it, at the price the settings declare.

    litellm prices every response itself, whoever reads the figure; for a model missing from its
    map it searches the whole map for a near name on every call, about a fifth of its CPU per call
    against a fast local server (``benchmarks/bench_judge.py``). ragexp computes the cost from
    :class:`Prices` either way; this only spares litellm the search. Once per process (the worker
    processes of ``judge.workers`` do it too), and never for a model the map knows.
    """
    litellm = _quiet_litellm()
    provider = litellm_provider(model)
    entry = {"input_cost_per_token": per_in, "output_cost_per_token": per_out, "mode": "chat",
             # prompt-cache reads and writes at the full input price (no discount declared)
             "cache_read_input_token_cost": per_in, "cache_creation_input_token_cost": per_in}
    if provider:
        entry["litellm_provider"] = provider
    litellm.register_model({model: entry})


async def acompletion(kwargs: dict[str, Any], teach: tuple[str, float, float] | None = None
                      ) -> tuple[str, str | None, int, int]:
    """One ``litellm.acompletion`` in this process: (text, finish_reason, prompt tokens, completion tokens).

    ``teach``: :attr:`Prices.teach`, registered once in this process before the call.
    """
    litellm = _quiet_litellm()
    if teach is not None:
        register_price(*teach)
    response = await litellm.acompletion(**kwargs)
    choice = response.choices[0]
    u = getattr(response, "usage", None)
    return (choice.message.content or "", getattr(choice, "finish_reason", None),
            int(getattr(u, "prompt_tokens", 0) or 0), int(getattr(u, "completion_tokens", 0) or 0))
