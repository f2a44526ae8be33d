"""Validation during training on the embedded SmolLM2: held-out accuracy against GRPO steps.

    OMP_NUM_THREADS=1 python bench/bench_validation.py [--out runs/bench_validation] [--steps 4] [--every 2]

What it runs (all through the `agentdata` command line, in a fresh process each):
1. `agentdata synth problems --kinds compute` twice: the training pool (seed 0) and the held-out
   problems (seed 1); any held-out question also in the pool is dropped.
2. `agentdata train --stage rl` from the embedded default, `smollm2-tir` (SmolLM2-135M whose
   rollouts and evaluations are shown its worked codeblock examples; the weights trained are
   SmolLM2's), with `--eval-problems held_out.jsonl rl.eval_every=EVERY --eval-k K`.
The baseline is the same run's step-0 evaluation. It prints the load average before and after,
wall and CPU time, the evaluation records of metrics.jsonl as a table (bench/RESULTS_train.md), and
copies `plots/scaling.png` to bench/validation_scaling.png.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def agentdata(*args: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    # transformers rollouts: the tiny model's 16-wide heads are narrower than vLLM's CPU attention takes (32)
    env["AGENTDATA_VLLM"] = "off"
    subprocess.run([sys.executable, "-m", "agentdata.cli.app", *args], check=True, env=env)


def load_average() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def held_out_problems(out: Path, count: int) -> Path:
    pool, held_out = out / "pool.jsonl", out / "held_out.jsonl"
    agentdata("synth", "problems", "--kinds", "compute", "--n", "16", "--seed", "0", "--out", str(pool), "--json")
    agentdata(
        "synth", "problems", "--kinds", "compute", "--n", str(count), "--seed", "1", "--out", str(held_out), "--json"
    )
    seen = {json.loads(line)["question"] for line in pool.read_text().splitlines()}
    rows = [line for line in held_out.read_text().splitlines() if json.loads(line)["question"] not in seen]
    held_out.write_text("".join(row + "\n" for row in rows))
    return held_out


def table(records: list[dict], k: int) -> str:
    lines = [
        f"| step | avg@{k} | pass@{k} | tool calls / response | model tokens / response | failed | eval s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in records:
        lines.append(
            f"| {r['step']} | {r[f'eval/avg@{k}']:.3f} | {r[f'eval/pass@{k}']:.3f} | "
            f"{r['eval/tools/call_frequency']:.2f} | {r['eval/completions/model_tokens']:.0f} | "
            f"{r['eval/rollouts/failed']} | {r['eval/seconds']:.0f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=Path("runs/bench_validation"))
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--every", type=int, default=2)
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--eval-problems", type=int, default=8)
    parser.add_argument("--num-generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--model", default="smollm2-tir", help="the start model (an engine spec)")
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes and a random tiny model, for CI (bench/ is left as it is)"
    )
    args = parser.parse_args()
    if args.smoke:  # one step, two evaluations of two problems, a random tiny model
        args.steps, args.every, args.k, args.eval_problems = 1, 1, 1, 2
        args.num_generations, args.max_new_tokens = 2, 16
        sys.path.insert(0, str(ROOT / "bench"))
        from arms import tiny_model

        args.model = f"hf:{tiny_model(args.out.with_name(args.out.name + '-tiny-model'))}"
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    print(f"load average at start: {load_average()}", flush=True)
    started = time.perf_counter()
    held_out = held_out_problems(args.out, args.eval_problems)
    settings = args.out / "train.json"
    settings.write_text(
        json.dumps(
            {
                "rl": {
                    "protocol": "codeblock",
                    "prompts_per_step": 1,
                    "max_tool_calls": 1,
                    "max_turns": 2,
                    "learning_rate": 1e-5,
                }
            }
        )
    )
    agentdata(
        "train",
        "--stage",
        "rl",
        "--model",
        args.model,
        "--rl-pool",
        str(args.out / "pool.jsonl"),
        "--out",
        str(args.out / "rl"),
        "--max-steps",
        str(args.steps),
        "--num-generations",
        str(args.num_generations),
        "--max-new-tokens",
        str(args.max_new_tokens),
        f"overlong_buffer={min(32, args.max_new_tokens // 4)}",
        "--eval-problems",
        str(held_out),
        f"rl.eval_every={args.every}",
        f"eval_k={args.k}",
        "--config",
        str(settings),
    )
    wall = time.perf_counter() - started
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    history = [json.loads(line) for line in (args.out / "rl" / "metrics.jsonl").read_text().splitlines()]
    evaluations = [r for r in history if f"eval/avg@{args.k}" in r]
    steps = [r for r in history if "accuracy" in r]
    if len(evaluations) < 2:  # the baseline at step 0 and at least one after training
        raise SystemExit(
            f"bench_validation: {len(evaluations)} evaluation(s) in metrics.jsonl, expected step 0 and more"
        )
    if not args.smoke:
        shutil.copy(args.out / "rl" / "plots" / "scaling.png", ROOT / "bench" / "validation_scaling.png")
    print(f"\nload average at end: {load_average()}")
    print(f"wall {wall:.0f} s, CPU {usage.ru_utime + usage.ru_stime:.0f} s (user + system, all processes)")
    print(f"held-out problems: {len(held_out.read_text().splitlines())}, k = {args.k}\n")
    print(table(evaluations, args.k))
    print(
        "\n| step | train accuracy | tool calls / response | model tokens | entropy | reward "
        "|\n|---|---|---|---|---|---|"
    )
    for r in steps:
        print(
            f"| {r['step']} | {r['accuracy']:.3f} | {r['tools/call_frequency']:.2f} | "
            f"{r['completions/model_tokens']:.0f} | {r.get('entropy', float('nan')):.3f} | {r['reward']:.3f} |"
        )
    checkpoints = sorted(p.name for p in (args.out / "rl" / "checkpoints").glob("checkpoint-*"))
    print(f"\ncheckpoints kept: {', '.join(checkpoints)}")


if __name__ == "__main__":
    main()
