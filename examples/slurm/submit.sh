#!/bin/bash
# Submit one sharded agentdata step to Slurm: an array of N shards, then the merge step once all succeeded.
#
#   examples/slurm/submit.sh 8 collect problems.jsonl --teacher openai:http://vllm:8000/v1 --out /shared/runs/t
#
# --out must be on storage every node sees. SBATCH_ARGS (e.g. "--partition=cpu --account=me") is passed
# to both sbatch calls. Prints the two job ids.
set -euo pipefail
if [ "$#" -lt 2 ]; then
  echo "usage: $0 SHARDS collect|eval|filter ARGS..." >&2
  exit 2
fi
SHARDS=$1
shift
if ! [[ "$SHARDS" =~ ^[1-9][0-9]*$ ]]; then
  echo "$0: SHARDS must be a whole number of at least 1, got '$SHARDS'" >&2
  exit 2
fi
HERE="$(cd "$(dirname "$0")" && pwd)"
# shellcheck disable=SC2086  # SBATCH_ARGS is a list of flags
ARRAY=$(sbatch --parsable ${SBATCH_ARGS:-} --array="0-$(( SHARDS - 1 ))" "$HERE/shard.sbatch" "$@")
ARRAY=${ARRAY%%;*}  # --parsable prints "jobid[;cluster]"
# shellcheck disable=SC2086
MERGE=$(sbatch --parsable ${SBATCH_ARGS:-} --dependency="afterok:${ARRAY}" "$HERE/merge.sbatch" "$@")
echo "array job ${ARRAY} (${SHARDS} shards), merge job ${MERGE%%;*} after it"
