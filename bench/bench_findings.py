"""Run the built-in experiment recipes one after another and record what came out, with load and time.

    python bench/bench_findings.py --out /tmp/findings [--recipes sft-data pool tool-calls zero-tir] [--threads 1]
    python bench/bench_findings.py --out /tmp/findings-seeds --recipes pool --seeds 3

Each recipe runs as `agentdata experiment NAME --out OUT/NAME` in its own process (never two at
once), with the 1-minute load average sampled every 30 s and the CPU time of the process and
everything it started. Printed per recipe: wall and CPU time, the load, each arm's avg@k with its interval, and
each paired comparison's sentence, for bench/RESULTS_findings.md. An existing OUT/NAME is resumed
(the experiment's own rule), so a run cut short can be continued with the same command.

`--seeds N` is the experiment's own (every arm N times, every seed offset): then each arm's avg@k per
seed and each comparison's difference per seed are printed too, its interval over seeds and problems.
Every GRPO arm's trend verdicts (tool calls, response length, accuracy against steps) are printed, and what
the pool changes: each GRPO arm's flat-group share and samples with a gradient per step, arm against arm.

`--threads N` sets OMP_NUM_THREADS for the recipes (torch's threads per process). On a machine
other work keeps busy, one thread does more per CPU second and per wall second than two, which
wait for each other at every operation (bench/bench_threads.py, bench/RESULTS_findings.md).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RECIPES = ("sft-data", "pool", "tool-calls", "zero-tir", "zero-tir-arithmetic")
TARGET_S = 60 * 60  # each recipe, on the embedded default, on two CPU cores


class LoadSampler(threading.Thread):
    def __init__(self, interval_s: float = 30.0):
        super().__init__(daemon=True)
        self.interval_s, self.samples, self.done = interval_s, [], threading.Event()

    def run(self) -> None:
        while not self.done.wait(self.interval_s):
            self.samples.append(os.getloadavg()[0])

    def summary(self) -> str:
        if not self.samples:
            return "-"
        return f"{min(self.samples):.1f}-{max(self.samples):.1f} (mean {sum(self.samples) / len(self.samples):.1f})"


def run_recipe(name: str, out: Path, threads: int | None = None, seeds: int | None = None) -> dict:
    command = [sys.executable, "-m", "agentdata.cli.app", "experiment", name, "--out", str(out / name), "--json"]
    command += ["--seeds", str(seeds)] if seeds else []
    sampler = LoadSampler()
    sampler.start()
    started, cpu_before = time.perf_counter(), children_cpu()
    with open(out / f"{name}.log", "w", encoding="utf-8") as log:
        env = {**os.environ, **({"OMP_NUM_THREADS": str(threads)} if threads else {})}
        process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=log, text=True, env=env)
        stdout, _ = process.communicate()
    wall, cpu = time.perf_counter() - started, children_cpu() - cpu_before
    sampler.done.set()
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError:
        report = None
    return {
        "recipe": name,
        "exit": process.returncode,
        "wall_s": wall,
        "load": sampler.summary(),
        "report": report,
        "cpu_s": cpu,
        "threads": env.get("OMP_NUM_THREADS", "torch's default"),
    }


def children_cpu() -> float:
    """User + system time of the finished child processes (the recipe and everything it started)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def describe(result: dict) -> str:
    lines = [
        f"## {result['recipe']}: exit {result['exit']}, {result['wall_s']:.0f} s wall, {result['cpu_s']:.0f} s CPU, "
        f"load {result['load']}, torch threads {result['threads']}"
    ]
    report = result["report"]
    if report is None:
        return "\n".join([*lines, "(no report: see the log)"])
    totals = report["totals"]
    lines.append(f"stages: {totals['wall_s']:.0f} s wall, {totals['cpu_s']:.0f} s CPU")
    for arm in report["arms"]:
        if "avg" in arm:
            interval = arm["avg_ci"]
            lines.append(
                f"- {arm['arm']}: avg@{totals['k']} {arm['avg']:.1%} [{interval['low']:.1%}, {interval['high']:.1%}], "
                f"{arm['tool_calls']:.2f} calls/response, {arm['response_tokens']:.0f} tokens{_per_seed(arm)}"
            )
        else:
            lines.append(f"- {arm['arm']}: failed {arm['failures']}")
    for comparison in report["comparisons"]:
        if comparison["metric"].startswith("avg@"):
            per_seed = comparison.get("per_seed")
            seeds = f" (per seed: {', '.join(f'{100 * d:+.1f}' for d in per_seed)} pts)" if per_seed else ""
            lines.append(f"- {comparison['sentence']}{seeds}")
    lines += [
        f"- trend {t['arm']} {t['series']} ({t['source']}, {t['points']} points): {t['verdict']}, "
        f"slope {t['slope']:+.4f} [{t['low']:+.4f}, {t['high']:+.4f}] per step"
        for t in report.get("trends", [])
    ]
    lines += [
        f"- mechanism {m['arm']} − {m['vs']} {m['series']}: {m['mean']:+.3f} [{m['low']:+.3f}, {m['high']:+.3f}], "
        f"{m['verdict']} ({m['steps']} steps x {m['seeds']} seeds)"
        for m in (report.get("mechanism") or {}).get("differences", [])
    ]
    return "\n".join(lines)


def _per_seed(arm: dict) -> str:
    spread = arm.get("spread") or {}
    if not spread.get("sd"):
        return ""
    return f"; per seed {', '.join(f'{value:.1%}' for value in spread['avg_per_seed'])} (sd {spread['sd']:.1%})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--recipes", nargs="+", default=list(RECIPES), choices=RECIPES)
    parser.add_argument("--threads", type=int, help="OMP_NUM_THREADS for the recipes (default: as set, else torch's)")
    parser.add_argument("--seeds", type=int, help="the experiment's --seeds: every arm N times (default: the recipe's)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.recipes:
        result = run_recipe(name, args.out, args.threads, args.seeds)
        print(describe(result), flush=True)
        print(f"target under {TARGET_S // 60} min: {'met' if result['wall_s'] < TARGET_S else 'not met'}\n", flush=True)


if __name__ == "__main__":
    main()
