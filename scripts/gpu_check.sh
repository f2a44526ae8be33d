#!/usr/bin/env bash
# The GPU paths, run for real on a GPU machine (sized for under 8 minutes on one H200, not
# yet measured; every check is 2 steps):
#   1. vllm-engine   the vllm: engine's tests (tests/test_engines_vllm.py), then every vLLM path of
#                    tests/test_vllm_real.py on the GPU (servers, native tool calls, reasoning, GRPO's file push)
#   2. colocated     GRPO, 2 steps, vLLM colocated in the training process (accelerate single_gpu.yaml)
#   3. server        GRPO, 2 steps, TRL's server mode: `trl vllm-serve` on GPU 1, training on GPU 0
#                    (needs 2 GPUs: NCCL, which pushes the weights, cannot pair two processes on one GPU)
#   4. ddp, zero2    SFT, 2 steps, on every GPU with multi_gpu.yaml and zero2.yaml (needs 2 GPUs; zero2
#                    needs deepspeed)
#   5. async         GRPO, 2 steps, mode async (TRL's AsyncGRPOTrainer, max_staleness 1): a dev-mode vLLM
#                    server on GPU 1 (on GPU 0 beside training, at 30% of its memory, with one GPU) takes the
#                    weights as files; TRL's tree attention needs the `kernels` package (flash-attention 3)
# A check that cannot run here says why and is skipped; the script fails if one that ran failed.
#
#   bash scripts/gpu_check.sh              # all checks
#   bash scripts/gpu_check.sh --dry-run    # print the commands, run nothing
#   GPU_CHECK_MODEL=/models/Qwen3-0.6B bash scripts/gpu_check.sh   # default: the embedded SmolLM2
#
# Exit status: 0 every check that could run passed; 1 one failed; 3 nothing could run (no CUDA GPU
# or no vLLM; the reason on stderr). tests/test_gpu_check.py runs it and skips on 3.
set -uo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
PY=${PYTHON:-python}
OUT=${GPU_CHECK_OUT:-$(mktemp -d /tmp/agentdata-gpu-check.XXXXXX)}
PORT=${GPU_CHECK_PORT:-8765}
ASYNC_PORT=${GPU_CHECK_ASYNC_PORT:-8766}
DRY_RUN=false
[ "${1:-}" = "--dry-run" ] && DRY_RUN=true
FAILED=() PASSED=() SKIPPED=()

say() { printf '\n━━ %s\n' "$*"; }
skip() { SKIPPED+=("$1: $2"); say "skip $1: $2"; }
check() {  # check NAME COMMAND...: run, record pass/fail and seconds
  local name=$1; shift
  say "check $name"; printf '$ '; printf '%q ' "$@"; printf '\n'
  $DRY_RUN && { PASSED+=("$name (dry run)"); return 0; }
  local started=$SECONDS
  if "$@"; then PASSED+=("$name $((SECONDS - started))s"); else FAILED+=("$name"); fi
}

if ! $DRY_RUN; then
  GPUS=$("$PY" -c 'import torch; print(torch.cuda.device_count() if torch.cuda.is_available() else 0)' 2>/dev/null || echo 0)
  [ "$GPUS" -ge 1 ] || { echo "gpu_check: no CUDA GPU (torch.cuda.is_available() is false)" >&2; exit 3; }
  "$PY" -c 'import vllm' 2>/dev/null || { echo "gpu_check: vLLM is not installed (pip install 'agentdata[vllm]')" >&2; exit 3; }
  MODEL_DIR=$("$PY" -c '
import os, sys
from agentdata.training.model import resolve_model_dir
print(resolve_model_dir(os.environ.get("GPU_CHECK_MODEL", "smollm2")))') || { echo "gpu_check: no model" >&2; exit 1; }
else
  GPUS=2 MODEL_DIR=/path/to/model
fi
mkdir -p "$OUT"

# The GRPO settings of both GRPO checks; server mode adds vllm_server.
write_rl_config() {  # write_rl_config FILE [EXTRA LINE]
  cat > "$1" <<EOF
rl:
  max_steps: 2
  prompts_per_step: 2
  num_generations: 4
  max_new_tokens: 256
  overlong_buffer: 64
  protocol: codeblock
  use_vllm: "yes"
  bf16: true
  limit: 16
  plots: false
  save_steps: 1000
${2:-}
EOF
}
write_rl_config "$OUT/colocated.yaml"
write_rl_config "$OUT/server.yaml" "  vllm_server: http://127.0.0.1:$PORT"
write_rl_config "$OUT/async.yaml" "  mode: async
  max_staleness: 1
  vllm_server: http://127.0.0.1:$ASYNC_PORT"
train_rl() {  # train_rl NAME CONFIG [env...]: GRPO through accelerate, one process
  local name=$1 config=$2; shift 2
  env "$@" accelerate launch --config_file examples/accelerate/single_gpu.yaml -m agentdata.cli.app train \
    --stage rl --model "hf:$MODEL_DIR" --config "$config" --out "$OUT/$name"
}

# 1. The vllm: engine: generation, stop strings, seeds, batching (its own tests).
check vllm-engine "$PY" -m pytest -q -p no:cacheprovider tests/test_engines_vllm.py tests/test_vllm_real.py

# 2. GRPO with vLLM colocated (the single-consumer batching of rl.vllm_policy, on the real LLM).
check colocated train_rl colocated "$OUT/colocated.yaml" CUDA_VISIBLE_DEVICES=0

# 3. GRPO against `trl vllm-serve` on the second GPU.
server_check() {
  CUDA_VISIBLE_DEVICES=1 trl vllm-serve --model "$MODEL_DIR" --host 127.0.0.1 --port "$PORT" \
    --gpu-memory-utilization 0.5 --max-model-len 4096 --enforce-eager > "$OUT/vllm-serve.log" 2>&1 &
  local server=$!
  local waited=0
  until curl -sf "http://127.0.0.1:$PORT/health" > /dev/null; do
    sleep 3; waited=$((waited + 3))
    if ! kill -0 "$server" 2>/dev/null || [ "$waited" -ge 240 ]; then
      echo "gpu_check: trl vllm-serve did not come up (log: $OUT/vllm-serve.log)" >&2; tail -20 "$OUT/vllm-serve.log" >&2
      kill "$server" 2>/dev/null; return 1
    fi
  done
  train_rl server "$OUT/server.yaml" CUDA_VISIBLE_DEVICES=0
  local status=$?
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
  return $status
}
if [ "$GPUS" -ge 2 ]; then check server server_check
else skip server "needs 2 GPUs (found $GPUS): the weight push (NCCL) cannot pair two processes on one GPU"; fi

# 4. SFT on every GPU: plain DDP and DeepSpeed ZeRO-2.
"$PY" -c 'from tests.train_fixtures import write_sft_set; from pathlib import Path; write_sft_set(Path("'"$OUT"'/sft.jsonl"), 16)' 2>/dev/null \
  || $DRY_RUN || echo "gpu_check: could not write the SFT set" >&2
train_sft() {  # train_sft NAME ACCELERATE_CONFIG
  accelerate launch --config_file "examples/accelerate/$2" --num_processes "$GPUS" -m agentdata.cli.app train \
    --stage sft --model "hf:$MODEL_DIR" --sft-data "$OUT/sft.jsonl" --max-steps 2 --out "$OUT/$1"
}
if [ "$GPUS" -ge 2 ]; then
  check ddp train_sft ddp multi_gpu.yaml
  if $DRY_RUN || "$PY" -c 'import deepspeed' 2>/dev/null; then check zero2 train_sft zero2 zero2.yaml
  else skip zero2 "deepspeed is not installed (pip install deepspeed)"; fi
else
  skip ddp "needs 2 GPUs (found $GPUS)"; skip zero2 "needs 2 GPUs (found $GPUS)"
fi

# 5. GRPO's asynchronous mode against a dev-mode vLLM server (the file push, rl/weight_transfer.py).
async_check() {
  local gpu=0 share=0.3
  [ "$GPUS" -ge 2 ] && gpu=1 share=0.5
  CUDA_VISIBLE_DEVICES=$gpu VLLM_SERVER_DEV_MODE=1 "$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL_DIR" \
    --host 127.0.0.1 --port "$ASYNC_PORT" --gpu-memory-utilization "$share" --max-model-len 4096 --enforce-eager \
    > "$OUT/vllm-async.log" 2>&1 &
  local server=$!
  local waited=0
  until curl -sf "http://127.0.0.1:$ASYNC_PORT/health" > /dev/null; do
    sleep 3; waited=$((waited + 3))
    if ! kill -0 "$server" 2>/dev/null || [ "$waited" -ge 240 ]; then
      echo "gpu_check: the dev-mode vLLM server did not come up (log: $OUT/vllm-async.log)" >&2
      tail -20 "$OUT/vllm-async.log" >&2; kill "$server" 2>/dev/null; return 1
    fi
  done
  train_rl async "$OUT/async.yaml" CUDA_VISIBLE_DEVICES=0
  local status=$?
  kill "$server" 2>/dev/null; wait "$server" 2>/dev/null
  return $status
}
if $DRY_RUN || "$PY" -c 'import kernels' 2>/dev/null; then check async async_check
else skip async "TRL's asynchronous trainer needs the kernels package on CUDA (pip install kernels)"; fi

say "summary (outputs in $OUT)"
for line in "${PASSED[@]}"; do echo "  passed   $line"; done
for line in "${SKIPPED[@]}"; do echo "  skipped  $line"; done
for line in "${FAILED[@]}"; do echo "  FAILED   $line"; done
[ ${#FAILED[@]} -eq 0 ]
