"""One arm of two experiment runs against each other on the same held-out problems: avg@k paired by problem.

    python bench/compare_arms.py runs/zero-tir-async grpo runs/zero-tir grpo --seed 0

`agentdata experiment` compares the arms of one run; this compares an arm across two runs of one recipe (the
asynchronous GRPO mode against the synchronous one, issue 48), with the same statistics (evaluation/stats.py:
the paired bootstrap interval over problems and the sign-flip p). The held-out evaluations must share their
problems.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agentdata.evaluation.stats import paired_comparison


def arm_scores(run: Path, arm: str, seed: int) -> tuple[dict[str, float], int, dict]:
    """(avg@k per problem, k, the eval result) of `arm`'s held-out evaluation at `seed` in the experiment `run`
    (the arm's record, `arms/ARM/seed-N.json`, keeps both)."""
    record = json.loads((run / "arms" / arm / f"seed-{seed}.json").read_text())
    if record.get("status") != "done":
        raise SystemExit(f"{run} {arm} seed {seed}: {record.get('status')}, not done")
    k = record["eval"]["samples"]
    return {pid: correct / k for pid, correct in record["scores"]["correct"].items()}, k, record["eval"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_a", type=Path)
    parser.add_argument("arm_a")
    parser.add_argument("run_b", type=Path)
    parser.add_argument("arm_b")
    parser.add_argument("--seed", type=int, default=0, help="the training seed of both arms")
    options = parser.parse_args()
    a, k, result_a = arm_scores(options.run_a, options.arm_a, options.seed)
    b, _, result_b = arm_scores(options.run_b, options.arm_b, options.seed)
    label_a, label_b = f"{options.run_a.name}/{options.arm_a}", f"{options.run_b.name}/{options.arm_b}"
    comparison = paired_comparison(label_a, label_b, f"avg@{k}", a, b, responses_per_problem=k)
    if comparison is None:
        raise SystemExit("the two evaluations share no problem")
    for label, result in ((label_a, result_a), (label_b, result_b)):
        print(f"{label}: avg@{k} {result[f'avg@{k}']:.3f}, tool calls / response {result['mean_tool_calls']:.2f}")
    low, high = comparison.interval.low, comparison.interval.high
    print(
        f"{label_a} − {label_b}: {100 * comparison.difference:+.1f} points [{100 * low:.1f}, {100 * high:.1f}] "
        f"avg@{k}, p = {comparison.p_value:.3g}, {comparison.problems} problems"
    )


if __name__ == "__main__":
    main()
