"""GRPO with vLLM's rollouts run twice with the same seed: do the steps repeat? (issue 49)

    python bench/grpo_seed_repro.py OUT [MODEL_SPEC]      # default: a tiny random Llama; e.g. smollm2-tir

Runs `agentdata train --stage rl` twice (2 steps of 2 prompts x 4 rollouts, 96 tokens, seed 5, `use_vllm: yes`:
the managed CPU server, a fresh one each run) and prints each step's reward, accuracy, length, loss, entropy and
calls per response from both runs, `same` or `DIFFERENT`. Equal figures after a step that trained (loss not 0)
mean the rollouts, the update and the weight push repeated.
"""

import json
import subprocess
import sys
from pathlib import Path

KEYS = ("step", "reward", "accuracy", "completions/mean_length", "loss", "entropy", "tools/call_frequency")
SETTINGS = (
    "rl:\n  max_steps: 2\n  prompts_per_step: 2\n  num_generations: 4\n  max_new_tokens: 96\n"
    "  overlong_buffer: 0\n  limit: 8\n  use_vllm: 'yes'\n  plots: false\n  seed: 5\n"
)


def tiny_model(folder: Path) -> Path:
    from bench.arms import tiny_vllm_model

    return folder if folder.exists() else tiny_vllm_model(folder)


def main() -> None:
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    spec = sys.argv[2] if len(sys.argv) > 2 else f"hf:{tiny_model(out / 'tiny')}"
    settings = out / "rl.yaml"
    settings.write_text(SETTINGS)
    runs = []
    for index in range(2):
        run = out / f"run-{index}"
        command = [sys.executable, "-m", "agentdata.cli.app", "train", "--stage", "rl", "--model", spec]
        subprocess.run([*command, "--config", str(settings), "--out", str(run)], check=True)
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        runs.append([{key: row[key] for key in KEYS if key in row} for row in rows if "loss" in row])
    for first, second in zip(*runs):
        print(first, second, "same" if first == second else "DIFFERENT", sep="\n")


if __name__ == "__main__":
    main()
