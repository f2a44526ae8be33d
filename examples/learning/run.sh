#!/usr/bin/env bash
# Learning, shown: SFT of SmolLM2-135M on a few hundred stitched tool-use trajectories raises the
# share of held-out responses that call the code tool correctly and end in \boxed{}.
#
#   bash examples/learning/run.sh            # ~25-40 minutes on two shared CPU cores
#   OUT=/tmp/learning N=400 bash examples/learning/run.sh
#
# Data source (no strong teacher is available offline, and SmolLM2's own rollouts almost never
# solve a problem with the tool, so rejection sampling yields nothing): generated problems with
# short worked solutions (agentdata.synth.generators.worked_solution), stitched by
# `agentdata synth stitch` into conversations whose code cells really ran in the sandbox, then
# curated (decontaminated against the held-out set). Held out: the 16 built-in problems, which
# the generators never produce (checked by make_data.py and by curate's 13-gram decontamination).
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-runs/learning}
N=${N:-400}
K=${K:-4}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}   # two shared cores: one thread per process
HERE=examples/learning

uptime
python $HERE/make_data.py --n "$N" --seed 1 --out "$OUT"
rm -rf "$OUT/stitched"
agentdata synth stitch "$OUT/solutions.jsonl" --trajectories "$OUT/stitched" --out "$OUT/stitched_raw.parquet"
agentdata curate "$OUT/stitched" --out "$OUT/sft_full_prompt.parquet" --decontam "$OUT/heldout.jsonl"
python $HERE/compact_prompt.py "$OUT/sft_full_prompt.parquet" "$OUT/sft_compact.parquet"

uptime
(cd $HERE && python evaluate.py before=smollm2 "../../$OUT/heldout.jsonl" --out "../../$OUT/eval_before" --k "$K")
uptime
agentdata train --stage sft --sft-data "$OUT/sft_compact.parquet" --out "$OUT/sft" --config $HERE/sft.yaml
uptime
(cd $HERE && python evaluate.py "after=hf:../../$OUT/sft" "../../$OUT/heldout.jsonl" --out "../../$OUT/eval_after" --k "$K")
uptime
python - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
before, after = (json.loads((out / f"eval_{name}" / "shares.json").read_text()) for name in ("before", "after"))
print(f"{'':28}{'before':>10}{'after':>10}")
for key, label in (("tool_call_ok", "tool call ran without error"), ("boxed", "ends in \\boxed{}"),
                   ("accuracy", "accuracy (avg@k)"), ("mean_tool_calls", "tool calls per response")):
    print(f"{label:28}{before[key]:>10.3f}{after[key]:>10.3f}")
PY
