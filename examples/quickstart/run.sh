#!/usr/bin/env bash
# The whole agentdata pipeline on the embedded default (`smollm2-tir`: SmolLM2-135M-Instruct shown
# two worked examples of running code; protocol codeblock; the local sandbox; the compute ladder):
#   synth problems -> collect -> synth stitch -> curate -> filter -> train (SFT, profile, GRPO) -> eval
# Under 15 minutes with the install on a 2-core CPU (bench/RESULTS_quickstart.md).
# Everything goes under one folder.
#
#   bash examples/quickstart/run.sh                   # writes runs/quickstart
#   bash examples/quickstart/run.sh --out /tmp/qs     # or QUICKSTART_OUT=/tmp/qs
#   bash examples/quickstart/run.sh --dry-run         # print the commands, run nothing
#
# Re-runnable: collect and eval resume their run dirs, filter re-uses its profile, the other
# steps overwrite their output. The script stops at the first failing step and names it.
# Run `bash scripts/install.sh && . .venv/bin/activate` first (scripts/quickstart.sh does both).
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
OUT=${QUICKSTART_OUT:-runs/quickstart}
DRY_RUN=false
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY_RUN=true ;;
    --out) OUT=${2:?--out needs a folder}; shift ;;
    -h|--help) sed -n 2,12p "$0"; exit 0 ;;
    *) echo "quickstart: unknown argument '$1' (use --out DIR or --dry-run)" >&2; exit 2 ;;
  esac
  shift
done

# Shared rollout settings: collect's trajectories double as filter's profile (see step 5),
# so both must use the same limits and sampling.
PROBLEMS=8          # compute-ladder problems for collect, filter and GRPO
SAMPLES=4           # trajectories per problem = the student's k for the pass rate
MAX_NEW_TOKENS=192  # model tokens per trajectory, all turns together
MAX_TOOL_CALLS=2
CONCURRENCY=32      # every waiting generation is batched into one forward pass
# Teacher, student and protocol are the defaults (smollm2-tir, codeblock), so no step names them.

# Written to a file or a pipe, rich would wrap its tables at 80 columns; give them room.
[ -t 1 ] || export COLUMNS=${COLUMNS:-120}

$DRY_RUN || mkdir -p "$OUT"
$DRY_RUN || : > "$OUT/timings.tsv"

step() {  # step NAME COMMAND...: print the command, run it, record its wall time
  local name=$1; shift
  printf '\n━━ step %s\n$ ' "$name"
  printf '%q ' "$@"
  printf '\n'
  $DRY_RUN && return 0
  local started=$SECONDS
  if ! "$@"; then
    if [ "${MAY_WRITE_NOTHING:-}" = "$name" ]; then
      echo "quickstart: step '$name' wrote nothing (see its message above); the next steps cope with that"
    else
      echo "quickstart: step '$name' failed (command above); fix it and rerun: finished steps are kept" >&2
      exit 1
    fi
  fi
  printf '%s\t%s\n' "$name" "$((SECONDS - started))" >> "$OUT/timings.tsv"
}

fresh() {  # fresh DIR...: remove output that a step refuses to overwrite or that would be stale
  printf '\n$ rm -rf'; printf ' %q' "$@"; printf '\n'
  $DRY_RUN || rm -rf "$@"
}

# 1. Problems of the compute ladder (one line of Python away; the default problems' seed 0,
#    never the held-out seed 1 of step 7).
step problems agentdata synth problems --kinds compute --n "$PROBLEMS" --seed 0 --out "$OUT/problems.jsonl"

# 2. The default teacher solves each problem with a real Python sandbox: it writes a ```python
#    block, reads the real output and boxes an answer (right on a good share of them).
step collect agentdata collect "$OUT/problems.jsonl" --out "$OUT/collect" --samples "$SAMPLES" \
  --max-new-tokens "$MAX_NEW_TOKENS" --max-tool-calls "$MAX_TOOL_CALLS" --concurrency "$CONCURRENCY"

# 3. Stitched trajectories from a few worked solutions (calculations run for real in the
#    sandbox) add other kinds of problems to the SFT set; a real run uses a strong teacher.
#    (stitch refuses to write into an existing run dir; its output is cheap to remake.)
fresh "$OUT/stitched"
step stitch agentdata synth stitch "$HERE/solutions.jsonl" \
  --out "$OUT/stitched_sft.parquet" --trajectories "$OUT/stitched"

# 4. Curate with the default rules (a correct answer, at least one tool call) over both: the
#    teacher's correct trajectories and the stitched ones; the summary shows what each lost.
step curate agentdata curate "$OUT/collect" "$OUT/stitched" --out "$OUT/sft.parquet" \
  --rejects "$OUT/sft.rejects.parquet"

# 5. `filter` on its own: the base model's pass rates (0 < pass rate < 1 over k rollouts).
#    Teacher and student are the same model here, so collect's run dir is already the
#    student's profile: --profile-dir points at it (with collect's settings) and filter generates
#    nothing. It warns that these are not GRPO's settings, and it profiles the base model, not the
#    SFT model GRPO trains: step 6 makes the pool GRPO uses itself. An empty band is fine here.
$DRY_RUN || rm -f "$OUT/pool.parquet"  # a pool from an earlier run would be stale
MAY_WRITE_NOTHING=filter step filter agentdata filter "$OUT/problems.jsonl" --out "$OUT/pool.parquet" \
  --profile-dir "$OUT/collect" --k "$SAMPLES" --band 0,1 temperature=0.7 \
  --max-new-tokens "$MAX_NEW_TOKENS" --max-tool-calls "$MAX_TOOL_CALLS"

# 6. The closed loop: SFT on the curated set; then the SFT model is profiled on the problems with
#    GRPO's own rollout settings (train.yaml's rl: section), the band is kept, and GRPO trains from
#    the SFT model on that pool (train/pool.parquet, its report and histogram). When the band keeps
#    nothing (e.g. an SFT model that solves none), train says so and GRPO uses all the problems.
#    A rerun trains again from scratch, so the old model and the eval responses it gave go; the
#    profile is kept (train/profile/), and reused when SFT gives the same weights again.
fresh "$OUT/train/sft" "$OUT/train/rl" "$OUT/eval"
step train agentdata train --sft-data "$OUT/sft.parquet" --rl-problems "$OUT/problems.jsonl" \
  --config "$HERE/train.yaml" --out "$OUT/train"

# 7. Held-out problems (the ladder's seed 1, never used to choose a default): the weights training
#    started from (plain `smollm2`) against the trained ones, both with the same prompt (no worked
#    examples): what SFT + GRPO put into the weights. (`--compare teacher=smollm2-tir` adds the
#    few-shot teacher, for another minute or so.)
step benchmark agentdata synth problems --kinds compute --n 8 --seed 1 --out "$OUT/bench.jsonl"
# ... and a few built-in code tasks, graded by running the answer's program against their tests.
step codebench agentdata synth problems --n 2 --kinds code --seed 1 --out "$OUT/code_bench.jsonl"
step eval agentdata eval base=smollm2 "$OUT/bench.jsonl" "$OUT/code_bench.jsonl" --compare "trained=auto:$OUT/train/rl" \
  --k 2 --max-new-tokens "$MAX_NEW_TOKENS" --max-tool-calls "$MAX_TOOL_CALLS" \
  --concurrency "$CONCURRENCY" --out "$OUT/eval"

$DRY_RUN && exit 0
echo
echo "quickstart finished: everything is under $OUT"
echo "step       seconds"
awk -F'\t' '{ printf "%-10s %7d\n", $1, $2; total += $2 } END { printf "%-10s %7d\n", "total", total }' "$OUT/timings.tsv"
echo
echo "Open next: the eval report $OUT/eval/report.json (its plot $OUT/eval/accuracy.png), or browse every"
echo "step's output: agentdata view $OUT"
