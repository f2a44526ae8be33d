"""Does a seed reproduce a collect? The same `agentdata collect` twice, each in a process of its own, per engine.

Each engine runs the same sampled collect (smollm2-tir's worked examples, the codeblock protocol, temperature
1.0 as GRPO's rollouts sample) twice, first with `--concurrency` trajectories in flight and then with one:
the seeds are the same (each trajectory's from the run seed, the problem and the sample index; each turn's
from the trajectory's), what differs is which requests share a batch, as it differs between two runs of a
recipe whose sandbox calls end at other moments. Printed per engine: how many trajectories came out the
same (their messages), the first that did not and where, and each run's wall time and tokens per second.

    python bench/bench_seed_repro.py --out /tmp/seed_repro --problems 12 --samples 2 \
        --engines hf vllm-bfloat16 vllm-float32

Engines: `hf` (transformers, AGENTDATA_VLLM=off), `vllm` (the managed vLLM server as it comes), `vllm-DTYPE`
(the same server with `--dtype DTYPE`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLI = "import sys; from agentdata.cli.app import main; sys.exit(main())"


def collect_command(engine: str, problems: Path, out: Path, args: argparse.Namespace, concurrency: int) -> list[str]:
    teacher = ["--teacher", "smollm2-tir"]
    if engine.startswith("vllm-"):  # an option would send the bare smollm2-tir to transformers: name vLLM outright
        teacher = ["--teacher", "tir:vllm:smollm2", "--engine-option", f"dtype={engine.partition('-')[2]}"]
    return [
        *(sys.executable, "-c", CLI, "collect", str(problems), "--out", str(out)),
        *teacher,
        *("--samples", str(args.samples), "--concurrency", str(concurrency), "--seed", str(args.seed)),
        *("--temperature", "1.0", "--max-new-tokens", str(args.max_new_tokens), "--max-tool-calls", "2"),
        "--json",
    ]


def run_once(engine: str, problems: Path, out: Path, args: argparse.Namespace, concurrency: int) -> dict:
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    if engine == "hf":
        env["AGENTDATA_VLLM"] = "off"
    else:
        env.pop("AGENTDATA_VLLM", None)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    done = subprocess.run(collect_command(engine, problems, out, args, concurrency), env=env, capture_output=True)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{engine}: collect failed ({done.returncode}): {done.stderr.decode()[-2000:]}")
    summary = json.loads(done.stdout.decode())
    tokens = summary.get("completion_tokens") or 0
    return {
        "concurrency": concurrency,
        "wall_s": round(wall, 1),
        "completion_tokens": tokens,
        "tokens_per_wall_s": round(tokens / wall, 2),
        "load_1min": [round(load, 1), round(os.getloadavg()[0], 1)],
    }


def trajectories(out: Path) -> dict[str, list[dict]]:
    from agentdata.agent.rundir import RunDir

    return {t.id: t.messages for t in RunDir(out).trajectories()}


def compare(first: dict[str, list[dict]], second: dict[str, list[dict]]) -> dict:
    """How many trajectories are the same, and where the first that is not parts."""
    ids = sorted(set(first) & set(second))
    differing = [tid for tid in ids if first[tid] != second[tid]]
    found: dict = {"same": len(ids) - len(differing), "of": len(ids)}
    if differing:
        tid = differing[0]
        turn = next(i for i, (a, b) in enumerate(zip(first[tid], second[tid])) if a != b) if first[tid] else 0
        found["first_differing"] = {"id": tid, "message": turn}
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--problems", type=int, default=12)
    parser.add_argument("--kinds", nargs="+", default=["compute", "chain"])
    parser.add_argument("--samples", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-new-tokens", type=int, default=160)
    parser.add_argument("--engines", nargs="+", default=["hf", "vllm-bfloat16", "vllm-float32"])
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    args.out.mkdir(parents=True, exist_ok=True)
    problems = args.out / "problems.jsonl"  # the ladder's tuning seed, never a recipe's training or held-out one
    kinds = [part for kind in args.kinds for part in ("--kinds", kind)]
    synth = [sys.executable, "-c", CLI, "synth", "problems", "--out", str(problems), "--n", str(args.problems)]
    env = os.environ | {"PYTHONPATH": str(ROOT)}
    subprocess.run([*synth, "--seed", "7", *kinds], check=True, capture_output=True, env=env)
    results = []
    for engine in args.engines:
        runs = []
        for label, concurrency in (("a", args.concurrency), ("b", 1)):
            runs.append(run_once(engine, problems, args.out / f"{engine}-{label}", args, concurrency))
        same = compare(trajectories(args.out / f"{engine}-a"), trajectories(args.out / f"{engine}-b"))
        results.append({"engine": engine, "trajectories": same, "runs": runs})
        print(json.dumps(results[-1]), flush=True)
    print(json.dumps({"benchmark": "the same seeded collect twice, concurrency N then 1", "results": results}))


if __name__ == "__main__":
    main()
