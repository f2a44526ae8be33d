"""The embedded engine's torch threads on a shared CPU: `collect` with 2 threads against 1, in one run.

`collect` on the embedded default (smollm2-tir, protocol codeblock, the built-in problems) with
greedy sampling, so both arms do the same work; the arms alternate in one process (the engine
loaded once) and differ only in `torch.set_num_threads`. Printed: each run's wall and CPU time,
completion tokens per wall second, the load average around each run, and whether both arms wrote
the same trajectories (a different thread count can reorder a float sum, which may flip a greedy
token: then the tokens per second still compare like work, the times alone do not).

On a loaded machine a second thread spends most of its time waiting at a barrier for the first
(and spinning while it waits), so its CPU time grows while the wall time does not shrink:
bench/RESULTS_findings.md has the numbers.

    python bench/bench_threads.py --problems 8 --rounds 2 --threads 2 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from arms import tiny_model  # noqa: E402

from agentdata.agent.config import CollectConfig, LoopConfig  # noqa: E402
from agentdata.agent.rundir import RunDir  # noqa: E402
from agentdata.agent.runner import collect  # noqa: E402
from agentdata.engines import load_engine  # noqa: E402
from agentdata.sandbox import open_sandbox  # noqa: E402
from agentdata.synth.builtin import default_problems  # noqa: E402


def one_collect(problems, config, engine, sandbox, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as out:
        wall, cpu = time.perf_counter(), time.process_time()
        summary = collect(problems, out, config, engine=engine, sandbox=sandbox)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        texts = sorted(json.dumps(t.messages, sort_keys=True) for t in RunDir(out).trajectories())
    return {
        "threads": threads,
        "wall_s": wall,  # unrounded: a smoke run's collect can take under 0.05 s, and the rates divide by it
        "cpu_s": round(cpu, 1),
        "completion_tokens": summary.completion_tokens,
        "tokens_per_wall_s": round(summary.completion_tokens / wall, 2),
        "tokens_per_cpu_s": round(summary.completion_tokens / cpu, 2),
        "load_1min": [round(load_before, 1), round(os.getloadavg()[0], 1)],
        "texts": texts,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    parser.add_argument("--smoke", action="store_true", help="tiny sizes on a random tiny model, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.rounds, args.max_new_tokens = 2, 1, 8
    problems = default_problems(args.problems)
    spec = f"hf:{tiny_model(Path(tempfile.mkdtemp()) / 'tiny')}" if args.smoke else "smollm2-tir"
    config = CollectConfig(
        model=spec,
        concurrency=32,
        loop=LoopConfig(temperature=0.0, max_new_tokens=args.max_new_tokens, max_tool_calls=2, protocol="codeblock"),
    )
    engine = load_engine(spec)
    sandbox = open_sandbox("local")
    runs: list[dict] = []
    try:
        one_collect(problems[:2], config, engine, sandbox, args.threads[0])  # start-up costs before the clock
        for _ in range(args.rounds):  # alternate, so every arm sees the same machine load
            runs += [one_collect(problems, config, engine, sandbox, threads) for threads in args.threads]
    finally:
        sandbox.close()
        asyncio.run(engine.aclose())
    print(json.dumps(summarise(runs, args.threads), indent=2))


def summarise(runs: list[dict], arms: list[int]) -> dict:
    texts = {run["threads"]: run.pop("texts") for run in runs}
    rate = {
        threads: sum(r["completion_tokens"] for r in runs if r["threads"] == threads)
        / sum(r["wall_s"] for r in runs if r["threads"] == threads)
        for threads in arms
    }
    for run in runs:
        run["wall_s"] = round(run["wall_s"], 2)
    return {
        "benchmark": "collect on smollm2-tir (greedy), torch threads per arm, arms alternating in one process",
        "runs": runs,
        "tokens_per_wall_s": {str(threads): round(value, 2) for threads, value in rate.items()},
        "ratio_vs_first_arm": {str(threads): round(rate[threads] / rate[arms[0]], 2) for threads in arms},
        "same_trajectories": len({json.dumps(t) for t in texts.values()}) == 1,
        "cores": os.cpu_count(),
    }


if __name__ == "__main__":
    main()
