"""Evaluate a model on the held-out problems and print the learning demo's numbers.

Runs `agentdata.evaluation.run_eval` (the library behind `agentdata eval`) with the compact
system prompt the SFT set was trained with, then reads the trajectories it collected:
  tool_call_ok  share of responses with at least one parsed tool call that ran without error
  boxed         share of responses whose last assistant message holds a \\boxed{} answer
  accuracy      share of responses judged correct (avg@k)
The numbers are printed as one JSON line and written to OUT/shares.json.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pyarrow.parquet as pq

from agentdata.agent.config import LoopConfig
from agentdata.agent.rundir import trajectory_files
from agentdata.evaluation.runner import EvalConfig, run_eval

# The protocol's own hermes prompt is ~330 tokens; on two shared CPU cores that would be two
# thirds of every training conversation, so the demo trains and evaluates (before and after
# alike) with this short prompt of the same protocol.
COMPACT_SYSTEM_PROMPT = (
    "You can run Python code with the code_interpreter tool. To call it, write:\n"
    "<tool_call>\n"
    '{"name": "code_interpreter", "arguments": {"code": "print(2 + 3)"}}\n'
    "</tool_call>\n"
    "The result comes back inside <tool_response></tool_response> tags. "
    "Give the final answer as \\boxed{answer} at the end."
)


def shares(run_dir: Path) -> dict[str, float]:
    columns = ["num_tool_calls", "num_tool_errors", "final_answer", "correct"]
    rows = [row for path in trajectory_files(run_dir) for row in pq.read_table(path, columns=columns).to_pylist()]
    count = max(1, len(rows))
    return {
        "responses": len(rows),
        "tool_call_ok": sum(1 for r in rows if r["num_tool_calls"] - r["num_tool_errors"] >= 1) / count,
        "boxed": sum(1 for r in rows if r["final_answer"] is not None) / count,
        "accuracy": sum(1 for r in rows if r["correct"]) / count,
        "mean_tool_calls": sum(r["num_tool_calls"] for r in rows) / count,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", help="LABEL=SPEC, e.g. before=smollm2 or after=hf:runs/learning/sft")
    parser.add_argument("heldout", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--k", type=int, default=4, help="responses per problem")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    args = parser.parse_args()
    loop = LoopConfig(
        protocol="hermes",
        system_prompt=COMPACT_SYSTEM_PROMPT,
        max_turns=4,
        max_new_tokens=args.max_new_tokens,
        temperature=0.7,
        tool_output_chars=256,
    )
    config = EvalConfig(samples=args.k, tool_call_budgets=[4], concurrency=64, seed=0, loop=loop)
    report = run_eval([args.model], [args.heldout], args.out, config)
    result = report.results[0]
    numbers = {
        "model": result.model,
        "spec": result.spec,
        "load_average": os.getloadavg()[0],
        **shares(Path(result.run_dir)),
    }
    (args.out / "shares.json").write_text(json.dumps(numbers, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(numbers))


if __name__ == "__main__":
    main()
