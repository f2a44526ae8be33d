"""What a SmolLM2 GRPO stage leaves in its process, and what giving freed memory back returns.

    python bench/bench_memory.py [--steps 4] [--out /tmp/bench_memory] [--smoke]

One process runs a GRPO stage on the embedded SmolLM2 (the zero-tir recipe's settings on the default
problems: codeblock, 2 prompts x 4 rollouts a step, up to 160 tokens a turn) through `agentdata
train`'s library, with one torch thread. At every step's end it reads the resident memory before and
after the trim the stage now does there (training/memory.py), and after the stage it reads it as the
stage left it (train() trims after each stage: here the stage runs through `rl.run.run_grpo`, which
does not) and then after `release_freed_memory()`. Both figures of each pair come from the same
process at the same moment, so the pairs are the same-run comparison. A sampler thread records the
peak (every 0.2 s).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def resident_mb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) // 1024
    return 0


class PeakSampler(threading.Thread):
    def __init__(self):
        super().__init__(daemon=True)
        self.peak = 0

    def run(self) -> None:
        while True:
            self.peak = max(self.peak, resident_mb())
            time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", type=Path, default=Path(tempfile.mkdtemp(prefix="bench_memory-")))
    parser.add_argument("--smoke", action="store_true", help="a tiny random model, one short step: the code path only")
    args = parser.parse_args()

    import torch
    from arms import tiny_model
    from transformers import TrainerCallback

    from agentdata.rl import run as grpo
    from agentdata.train.settings import train_settings
    from agentdata.training import memory

    torch.set_num_threads(1)
    sampler = PeakSampler()
    sampler.start()
    untrimmed = memory.release_freed_memory

    class StepReport(TrainerCallback):  # added after ReleaseMemoryCallback: reads the step as it ended
        def on_step_end(self, args, state, control, **kwargs):
            print(f"step {state.global_step}: trimmed to {resident_mb()} MB, peak so far {sampler.peak} MB", flush=True)

    class BeforeTrim(TrainerCallback):  # added first: reads the step before the trim
        def on_step_end(self, args, state, control, **kwargs):
            print(f"step {state.global_step}: {resident_mb()} MB before the trim", flush=True)

    build = grpo.build_grpo_trainer

    def instrumented(config, sandbox, plan=None):
        trainer, rollout, step_times = build(config, sandbox, plan)
        callbacks = trainer.callback_handler.callbacks
        release = next(c for c in callbacks if isinstance(c, memory.ReleaseMemoryCallback))
        trainer.callback_handler.callbacks = [
            *(c for c in callbacks if c is not release),
            BeforeTrim(),
            release,
            StepReport(),
        ]
        return trainer, rollout, step_times

    grpo.build_grpo_trainer = instrumented
    section = {
        "model": f"hf:{tiny_model(args.out / 'tiny-model')}" if args.smoke else "smollm2",
        "out": str(args.out / "model"),
        "max_steps": 1 if args.smoke else args.steps,
        "prompts_per_step": 2,
        "num_generations": 4,
        "learning_rate": 1e-5,
        "save_steps": 1000,
        "eval_every": 1000,
        "eval_k": 1,
        "max_new_tokens": 16 if args.smoke else 160,
        "max_tool_calls": 2,
        "max_turns": 3,
        "protocol": "codeblock",
        "use_vllm": "no",
    }
    print(f"before the stage: {resident_mb()} MB", flush=True)
    started = time.perf_counter()
    grpo.run_grpo(train_settings(settings={"rl": section})["rl"])
    left = resident_mb()
    untrimmed()
    print(
        f"after the stage: {left} MB as it left it, {resident_mb()} MB after release_freed_memory(); "
        f"peak {sampler.peak} MB; {time.perf_counter() - started:.0f} s",
        flush=True,
    )


if __name__ == "__main__":
    main()
