"""The embedded engine's two savings, each timed against itself switched off, in one run.

`collect` with its defaults (smollm2-tir: SmolLM2 shown two worked examples before every
question, protocol codeblock, the built-in problems) except greedy sampling, so both arms
produce the same tokens and the timings compare the same work. The arms alternate in one
process (the engine loaded once). `--switch`:
- `prefix`: the shared prompt prefix; the baseline raises `hf_generate.MIN_SHARED_PREFIX` out of
  reach, i.e. every row prefills its whole prompt;
- `finished-rows`: finished rows leaving the batch (hf_stream), in whole batches; the baseline sets
  `hf_batch.DROP_FINISHED_ROWS` off, i.e. `model.generate` pads them to the longest row;
- `streaming`: requests joining the running batch between steps (engines.streaming) against whole
  batches whose finished rows leave (`ModelEngine.set_streaming(False)`).

    python bench/bench_prefix.py --problems 16 --rounds 2 [--switch finished-rows]

`--temperature T` samples as the recipes do (1.0) instead: the arms then draw different tokens
(the baseline's `generate` has one generator per batch, hf_sampling one per row), so they must agree
on the number of completion tokens within 15%, and the ratio compares seconds per 1000 of them.
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

from arms import same_work, tiny_model  # noqa: E402

from agentdata.agent.config import CollectConfig, LoopConfig  # noqa: E402
from agentdata.agent.rundir import RunDir  # noqa: E402
from agentdata.agent.runner import collect  # noqa: E402
from agentdata.engines import hf_batch, hf_generate, load_engine  # noqa: E402
from agentdata.sandbox import open_sandbox  # noqa: E402
from agentdata.synth.builtin import default_problems  # noqa: E402

SHARED_MIN = hf_generate.MIN_SHARED_PREFIX  # the engine's own threshold; the baseline raises it out of reach


def switch_prefix(engine, on: bool) -> None:
    hf_generate.MIN_SHARED_PREFIX = SHARED_MIN if on else 10**9


def switch_finished_rows(engine, on: bool) -> None:
    whole_batches(engine)
    hf_batch.DROP_FINISHED_ROWS = on


def switch_streaming(engine, on: bool) -> None:
    getattr(engine, "inner", engine).set_streaming(on)  # smollm2-tir wraps the model's engine


def whole_batches(engine) -> None:
    getattr(engine, "inner", engine).set_streaming(False)


SWITCHES = {
    "prefix": (switch_prefix, "shared prompt prefix vs every row prefilling its whole prompt"),
    "finished-rows": (switch_finished_rows, "finished rows leave the batch vs generate padding them to the longest"),
    "streaming": (switch_streaming, "requests join the running batch vs whole batches whose finished rows leave"),
}


def one_collect(problems, config, engine, sandbox, switch, on: bool) -> tuple[float, list[str], object]:
    switch(engine, on)
    with tempfile.TemporaryDirectory() as out:
        started = time.perf_counter()
        summary = collect(problems, out, config, engine=engine, sandbox=sandbox)
        elapsed = time.perf_counter() - started
        texts = sorted(json.dumps(t.messages, sort_keys=True) for t in RunDir(out).trajectories())
    return elapsed, texts, summary


def per_thousand_tokens(seconds: float, tokens: int) -> float:
    return 1000 * seconds / max(tokens, 1)


def speedup(baseline: float, switched_on: float) -> float | None:
    """How many times cheaper the switched-on arm was; None where it cost nothing measurable."""
    return round(baseline / switched_on, 2) if switched_on > 0 else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--temperature", type=float, default=0.0, help="0: greedy, the same tokens on both arms")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--switch", choices=sorted(SWITCHES), default="prefix", help="which saving to time")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.problems, args.rounds, args.max_new_tokens = 2, 1, 12
    problems = default_problems(args.problems)
    # --smoke: a random tiny model instead of SmolLM2 (every code path, in seconds)
    spec = f"hf:{tiny_model(Path(tempfile.mkdtemp()) / 'tiny')}" if args.smoke else "smollm2-tir"
    config = CollectConfig(
        model=spec,
        concurrency=args.concurrency,
        samples=args.samples,
        loop=LoopConfig(
            temperature=args.temperature, max_new_tokens=args.max_new_tokens, max_tool_calls=2, protocol="codeblock"
        ),
    )
    engine = load_engine(spec)
    sandbox = open_sandbox("local")
    switch, described = SWITCHES[args.switch]
    times: dict[bool, list[float]] = {False: [], True: []}
    tokens: dict[bool, list[int]] = {False: [], True: []}
    texts: dict[bool, list[str]] = {}
    loads = [os.getloadavg()[0]]
    try:
        one_collect(problems[:2], config, engine, sandbox, switch, on=True)  # start-up costs before the clock
        for _ in range(args.rounds):  # alternate, so both arms see the same machine load
            for on in (False, True):
                elapsed, texts[on], summary = one_collect(problems, config, engine, sandbox, switch, on)
                times[on].append(elapsed)  # unrounded: a smoke run's collect can take under 0.05 s
                tokens[on].append(summary.completion_tokens)
                loads.append(os.getloadavg()[0])
    finally:
        sandbox.close()
        asyncio.run(engine.aclose())
    if args.temperature == 0:  # greedy on both arms: the same trajectories, token for token
        same_work("bench_prefix", "trajectories (greedy)", texts[True], texts[False])
    else:
        same_work("bench_prefix", "completion tokens", sum(tokens[True]), sum(tokens[False]), tolerance=0.15)
    cost = {on: [per_thousand_tokens(t, n) for t, n in zip(times[on], tokens[on])] for on in (False, True)}
    result = {
        "benchmark": f"collect on {spec} (temperature {args.temperature}), {described}",
        "trajectories": summary.total,
        "tool_calls": summary.tool_calls,
        "correct": summary.correct,
        "completion_tokens": {"baseline": tokens[False], "switched_on": tokens[True]},
        "baseline_s": [round(t, 1) for t in times[False]],
        "switched_on_s": [round(t, 1) for t in times[True]],
        "s_per_1000_tokens": {
            arm: [round(c, 2) for c in cost[on]] for arm, on in (("baseline", False), ("switched_on", True))
        },
        "speedup_per_round": [speedup(off, on) for off, on in zip(cost[False], cost[True])],
        "same_trajectories": texts[False] == texts[True],
        "load_average_1min": [round(load, 2) for load in loads],
        "threads": os.environ.get("OMP_NUM_THREADS"),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
