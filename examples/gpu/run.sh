#!/usr/bin/env bash
# A real run on one 8-GPU node (e.g. 8x H100 80 GB): a Qwen3 instruct teacher served by vLLM
# collects real tool-use trajectories, a Qwen3-4B student is profiled for the RL pool, then
# SFT + GRPO with DemyAgent's settings (examples/gpu/train.yaml), then avg@32 on AIME.
# Read examples/gpu/README.md first (what to prepare, costs, what has not been run yet).
#
#   bash examples/gpu/run.sh --dry-run      # print every command, run nothing
#   bash examples/gpu/run.sh                # the whole run (about a day on the node)
#
# Every step resumes: collect, filter's profile and eval keep finished work; train takes --resume.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
OUT=${GPU_OUT:-runs/gpu}
MODELS=${MODELS:-/models}                                    # local model dirs (downloaded beforehand)
TEACHER=${TEACHER:-Qwen3-30B-A3B-Instruct-2507}              # or Qwen3-Coder-30B-A3B-Instruct
STUDENT=${STUDENT:-Qwen3-4B-Instruct-2507}
PROBLEMS=${PROBLEMS:-data/problems.jsonl}                    # your math/science/code problems with answers
BENCHMARKS=${BENCHMARKS:-"data/aime24.jsonl data/aime25.jsonl"}   # decontaminated against, and evaluated on
DRY_RUN=false
[ "${1:-}" = "--dry-run" ] && DRY_RUN=true

step() {  # step NAME COMMAND...: print, run, time
  local name=$1; shift
  printf '\n━━ step %s\n$ ' "$name"; printf '%q ' "$@"; printf '\n'
  $DRY_RUN && return 0
  local started=$SECONDS
  "$@" || { echo "gpu recipe: step '$name' failed (command above); rerun to resume" >&2; exit 1; }
  printf '%s\t%s\n' "$name" "$((SECONDS - started))" >> "$OUT/timings.tsv"
}

background() {  # background NAME COMMAND...: start a server, remember its pid for stop
  local name=$1; shift
  printf '\n━━ start %s\n$ ' "$name"; printf '%q ' "$@"; printf '&\n'
  $DRY_RUN && return 0
  "$@" > "$OUT/$name.log" 2>&1 &
  echo $! > "$OUT/$name.pid"
}

stop() {  # stop NAME: end a server this script started
  printf '\n━━ stop %s\n' "$1"
  $DRY_RUN && return 0
  [ -f "$OUT/$1.pid" ] && kill "$(cat "$OUT/$1.pid")" 2>/dev/null || true
  rm -f "$OUT/$1.pid"; sleep 10   # vLLM frees the GPUs on exit
}

wait_for() {  # wait_for URL: until it answers (model loading takes minutes)
  $DRY_RUN && return 0
  until curl -sf "$1" > /dev/null; do sleep 5; done
}

$DRY_RUN || mkdir -p "$OUT"
$DRY_RUN || trap 'stop sandbox; stop vllm' EXIT
# shellcheck disable=SC2086
set -- $BENCHMARKS
DECONTAM=(); for file in "$@"; do DECONTAM+=(--decontam "$file"); done

# The sandbox on this node's CPUs, for collect, filter, GRPO rollouts and eval alike.
background sandbox agentdata sandbox serve --host 127.0.0.1 --port 8080 --workers 64 --prefork 16 --timeout 30
wait_for http://127.0.0.1:8080/health

# 1. Teacher: 4 replicas of 2 GPUs each (a 30B MoE in bf16 needs ~61 GB of weights).
background vllm vllm serve "$MODELS/$TEACHER" --served-model-name "$TEACHER" --port 8000 \
  --tensor-parallel-size 2 --data-parallel-size 4 --max-model-len 32768 --gpu-memory-utilization 0.9 \
  --enable-prefix-caching
wait_for http://127.0.0.1:8000/v1/models
step collect agentdata collect "$PROBLEMS" --out "$OUT/teacher" \
  --teacher openai:http://127.0.0.1:8000/v1 --model "$TEACHER" --sandbox http://127.0.0.1:8080 \
  --samples 4 --concurrency 512 --max-new-tokens 16384 --max-tool-calls 16 max_turns=16 \
  tool_output_chars=256 --temperature 0.7
stop vllm

# 2. SFT set: correct answers, 1-8 calls, at most half of them failing, 2 per problem, decontaminated.
step curate agentdata curate "$OUT/teacher" --out "$OUT/sft.parquet" --max-per-problem 2 \
  max_tokens=32768 "${DECONTAM[@]}" --rejects "$OUT/sft.rejects.parquet"

# 3. RL pool: the student's pass rate over 16 rollouts, ZeroTIR's band (0.05, 0.8), diverse.
step filter agentdata filter "$PROBLEMS" --out "$OUT/pool.parquet" \
  --student "vllm:$MODELS/$STUDENT" --engine-option data_parallel_size=8 --engine-option max_model_len=32768 \
  --sandbox http://127.0.0.1:8080 --k 16 --band 0.05,0.8 --size 12800 "${DECONTAM[@]}" \
  --max-new-tokens 16384 --max-tool-calls 16 max_turns=16 temperature=1.0 --concurrency 1024

# 4. SFT then GRPO (DemyAgent's settings), ZeRO-3 over the 8 GPUs.
step train accelerate launch --config_file "$HERE/../accelerate/zero3.yaml" -m agentdata.cli.app train \
  --model "hf:$MODELS/$STUDENT" --sft-data "$OUT/sft.parquet" --rl-pool "$OUT/pool.parquet" \
  --config "$HERE/train.yaml" --out "$OUT/train"

# 5. avg@32 on AIME (DemyAgent's metric), base vs SFT vs GRPO, with the code tool.
step eval agentdata eval "base=vllm:$MODELS/$STUDENT" "$@" \
  --compare "sft=vllm:$OUT/train/sft" --compare "grpo=vllm:$OUT/train/rl" \
  --engine-option data_parallel_size=8 --engine-option max_model_len=32768 --sandbox http://127.0.0.1:8080 \
  --k 32 --temperature 1.0 --max-new-tokens 20480 --max-tool-calls 16 max_turns=16 --concurrency 1024 \
  --out "$OUT/eval"
