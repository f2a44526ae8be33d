"""GRPO synchronous against asynchronous (issue 48), the same work in one run, arms alternating, on this CPU with
vLLM's CPU build (`.venv-vllm`).

    python bench/bench_async_grpo.py --steps 4 --rounds 1          # SmolLM2 (smollm2-tir): sync, async 1, async 2
    python bench/bench_async_grpo.py --smoke                       # a tiny random model: every code path, a minute

One vLLM server (dev mode, started once, its start-up outside every arm) generates every arm's rollouts; before
each arm the start model's weights are pushed to it, so each arm starts from the same policy. Arms, in this order
each round: `mode: sync`, then `mode: async` with each `max_staleness` asked (default 1 and 2): the same steps,
prompts per step, rollouts per prompt, token budget, tool budget and seed.

Per arm: the stage's wall time and its median step; the engine's idle share (the share of the stage's steps
during which the server ran no request: its `vllm:num_requests_running` gauge, read every 0.1 s); the trainer's
idle share (the share of the steps it waited for rollouts: the synchronous stage's rollout time, the asynchronous
stage's `perf/rollout_wait_s`); the mean reward and accuracy over the steps (so a reader sees whether staleness
cost anything); each step's mean staleness; the load (`os.getloadavg`) before and after. The ratio of each
asynchronous arm's stage time against the synchronous arm of the same round is printed too. An asynchronous arm
generates up to max_staleness batches at the end that no step trains (the worker runs ahead): counted in the
engine's busy time, not in the trained work.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


STALENESS = "sample/staleness_mean"  # TRL's, per step


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


class EngineBusy:
    """Samples the server's running-request gauge every `interval_s`: the share of samples with a request running."""

    def __init__(self, base_url: str, interval_s: float = 0.1):
        self.url = f"{base_url}/metrics"
        self.interval_s = interval_s
        self.samples: list[bool] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> EngineBusy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                with urllib.request.urlopen(self.url, timeout=5) as response:
                    text = response.read().decode()
            except OSError:
                continue
            running = [line for line in text.splitlines() if line.startswith("vllm:num_requests_running")]
            self.samples.append(any(float(line.rsplit(" ", 1)[1]) > 0 for line in running))

    @property
    def busy_share(self) -> float:
        return sum(self.samples) / max(1, len(self.samples))


def requests_on(base_url: str) -> float:
    """Requests running or waiting on the server now."""
    with urllib.request.urlopen(f"{base_url}/metrics", timeout=5) as response:
        text = response.read().decode()
    gauges = ("vllm:num_requests_running", "vllm:num_requests_waiting")
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(gauges))


def wait_until_idle(base_url: str, deadline_s: float = 600.0) -> None:
    """Before an arm: no request of the previous one (a batch an asynchronous arm ran past its end) still runs."""
    deadline = time.monotonic() + deadline_s
    while requests_on(base_url) and time.monotonic() < deadline:
        time.sleep(0.5)


def push_start_weights(base_url: str, model_dir: Path) -> None:
    """The start model's weights into the server, so every arm begins from the same policy."""
    from transformers import AutoModelForCausalLM

    from agentdata.rl.vllm_push import FileWeightPush

    pusher = FileWeightPush(base_url)
    try:
        pusher.push(AutoModelForCausalLM.from_pretrained(model_dir))
    finally:
        pusher.close()


def arm(name: str, mode: str, staleness: int, args: argparse.Namespace, server_url: str, out: Path) -> dict:
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.run import run_grpo
    from agentdata.settings import build

    config = build(
        GRPOStageConfig,
        dict(
            model=args.model,
            out=str(out),
            max_steps=args.steps,
            prompts_per_step=args.prompts,
            num_generations=args.generations,
            max_new_tokens=args.max_new_tokens,
            use_vllm="yes",
            vllm_server=server_url,
            mode=mode,
            max_staleness=staleness,
            seed=0,
            plots=False,
        ),
    )
    load_before = load_average()
    with EngineBusy(server_url) as engine:
        started = time.perf_counter()
        result = run_grpo(config)
        seconds = time.perf_counter() - started
    trained = [entry for entry in result.history if "loss" in entry]
    steps_s = sum(step["step_s"] for step in result.step_times)
    if mode == "sync":
        trainer_wait = sum(step["step_s"] - step["scoring_and_optimisation_s"] for step in result.step_times)
    else:
        trainer_wait = sum(entry.get("perf/rollout_wait_s", 0.0) for entry in trained)
    staleness_means = [round(entry[STALENESS], 2) for entry in trained if STALENESS in entry]
    return dict(
        arm=name,
        stage_s=round(seconds, 1),
        steps_s=round(steps_s, 1),
        median_step_s=round(statistics.median(step["step_s"] for step in result.step_times), 2),
        engine_idle_share=round(1 - engine.busy_share, 3),
        trainer_idle_share=round(trainer_wait / max(1e-9, steps_s), 3),
        reward=round(statistics.fmean(entry["reward"] for entry in trained), 3),
        accuracy=round(statistics.fmean(entry["accuracy"] for entry in trained if "accuracy" in entry), 3),
        staleness_per_step=staleness_means,
        weight_pushes=result.weight_pushes,
        steps=result.steps,
        load_before=load_before,
        load_after=load_average(),
    )


def tiny_model() -> Path:
    """A random 2-layer Llama whose attention heads are 64 wide (vLLM's CPU attention takes 32 and up)."""
    from arms import tiny_vllm_model

    return tiny_vllm_model(Path(tempfile.mkdtemp(prefix="bench-async-tiny-")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--staleness", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="a tiny random model, 2 steps: code paths only")
    args = parser.parse_args()
    from agentdata.engines import smollm2_model_dir
    from agentdata.engines.vllm_server import ServerSettings, VLLMServer

    if args.smoke:
        args.steps, args.prompts, args.generations, args.max_new_tokens, args.staleness = 2, 1, 2, 32, [1]
        model_dir = tiny_model()
        args.model = f"hf:{model_dir}"
    else:
        model_dir = smollm2_model_dir()
        args.model = "smollm2-tir"
    os.environ["AGENTDATA_VLLM"] = "on"
    arms = [("sync", "sync", 1)] + [(f"async-{s}", "async", s) for s in args.staleness]
    rows = []
    with VLLMServer(ServerSettings(model=str(model_dir), dev_mode=True, seed=0)) as server:
        for round_index in range(args.rounds):
            row = {"round": round_index}
            for name, mode, staleness in arms:
                wait_until_idle(server.base_url)
                push_start_weights(server.base_url, model_dir)
                with tempfile.TemporaryDirectory() as tmp:
                    row[name] = arm(name, mode, staleness, args, server.base_url, Path(tmp) / name)
                print(json.dumps(row[name]), flush=True)
            for name, _, _ in arms[1:]:
                row[f"ratio_stage_sync_over_{name}"] = round(row["sync"]["steps_s"] / row[name]["steps_s"], 3)
            rows.append(row)
            print(json.dumps(row), flush=True)
    print(json.dumps({"what": "async-grpo", "rounds": rows}))


if __name__ == "__main__":
    main()
