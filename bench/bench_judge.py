"""LLM-judge throughput: `curate --judge` against an OpenAI-compatible server that answers in a fixed latency.

The server (bench/fake_openai_server.py, its own process) answers every judge request after
`--latency` seconds with a verdict; the ideal is `concurrency / latency` verdicts per second.
Measured, in the same run and alternating rounds:

- the judge step alone (transcripts, requests, verdict parsing, one journal line per verdict), on the
  rows curate hands it;
- `curate` with `--judge` against the same `curate` without it (the baseline): the judge's share of
  a whole run, steps and writing included;
- the rerun: every verdict read back from the journal, no request sent.

    python bench/bench_judge.py --trajectories 512 --concurrency 64 --latency 1.0 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import polars as pl  # noqa: E402

from agentdata.agent.rundir import shard_paths  # noqa: E402
from agentdata.curate import CurateConfig, curate  # noqa: E402
from agentdata.curate.messages import trajectory_batches  # noqa: E402
from agentdata.judge.config import ScoringConfig  # noqa: E402
from agentdata.judge.steps import judge_step  # noqa: E402
from bench.bench_collect import _server_process  # noqa: E402
from tests.curate_fixtures import trajectory, write_run  # noqa: E402

WORDS = "apple river stone cloud maple tiger violet ember harbor quartz lantern meadow falcon copper willow".split()


def crafted_run(folder: Path, count: int) -> Path:
    """`count` correct trajectories with distinct questions (no step drops them before the judge)."""
    rng = random.Random(0)
    rows = []
    for number in range(count):
        words = " ".join(rng.choice(WORDS) for _ in range(12))
        question = f"Problem {number}: {words}; how many letters are there in all?"
        rows.append(trajectory(f"t{number}", problem_id=f"p{number}", question=question))
    return write_run(folder / "run", rows, per_shard=256)


def judge_round(run: Path, url: str, concurrency: int, cache: Path, out: Path) -> dict:
    scoring = ScoringConfig(
        judge=f"openai:{url}",
        min_judge=0.5,
        judge_concurrency=concurrency,
        judge_options={"model": "fake-model", "concurrency": concurrency},
        score_cache=str(cache),
    )
    started = time.perf_counter()
    result = curate([run], out, CurateConfig(scoring=scoring))
    return {"elapsed_s": time.perf_counter() - started, "kept": result.kept_rows, "counts": result.scoring["judge"]}


def step_round(rows: list[dict], url: str, concurrency: int, cache: Path) -> float:
    scoring = ScoringConfig(
        judge=f"openai:{url}",
        judge_concurrency=concurrency,
        judge_options={"model": "fake-model", "concurrency": concurrency},
        score_cache=str(cache),
    )
    step = judge_step(CurateConfig(scoring=scoring))
    started = time.perf_counter()
    step.score_batches([rows], len(rows))
    assert step.counts.scored == len(rows), step.counts
    return time.perf_counter() - started


def baseline_round(run: Path, out: Path) -> float:
    started = time.perf_counter()
    curate([run], out, CurateConfig())
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trajectories", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    ideal = args.concurrency / args.latency
    with tempfile.TemporaryDirectory() as folder, _server_process(args.latency, ("--script", "verdict")) as url:
        folder = Path(folder)
        run = crafted_run(folder, args.trajectories)
        paths = shard_paths([run])
        rows = [row for batch in trajectory_batches(paths, pl.Series(range(args.trajectories))) for row in batch]
        rounds = []
        for number in range(args.rounds):  # alternate, so every arm sees the same machine load
            step_s = step_round(rows, url, args.concurrency, folder / f"step-cache-{number}")
            baseline_s = baseline_round(run, folder / f"base-{number}.parquet")
            judged = judge_round(run, url, args.concurrency, folder / f"cache-{number}", folder / f"j-{number}.parquet")
            rerun = judge_round(run, url, args.concurrency, folder / f"cache-{number}", folder / f"r-{number}.parquet")
            assert judged["counts"]["scored"] == args.trajectories and rerun["counts"]["cached"] == args.trajectories
            judge_s = judged["elapsed_s"] - baseline_s
            rounds.append(
                {
                    "step_s": round(step_s, 2),
                    "step_efficiency": round(args.trajectories / step_s / ideal, 3),
                    "curate_without_judge_s": round(baseline_s, 2),
                    "curate_with_judge_s": round(judged["elapsed_s"], 2),
                    "curate_judge_efficiency": round(args.trajectories / judge_s / ideal, 3),
                    "rerun_s": round(rerun["elapsed_s"], 2),
                    "rerun_over_baseline": round(rerun["elapsed_s"] / baseline_s, 2),
                }
            )
            print(json.dumps(rounds[-1]), file=sys.stderr, flush=True)
    print(
        json.dumps(
            {
                "benchmark": "LLM judge throughput (curate --judge, latency server)",
                "trajectories": args.trajectories,
                "concurrency": args.concurrency,
                "latency_s": args.latency,
                "ideal_verdicts_per_s": ideal,
                "rounds": rounds,
                "load_average": os.getloadavg()[0],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
