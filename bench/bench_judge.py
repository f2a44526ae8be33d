"""What judging costs in curate: the LLM judge's throughput, and the rollout health checks' share of a run.

1. `judge`: `curate --judge` against an OpenAI-compatible server (bench/fake_openai_server.py, its own
   process) that answers every judge request after `--latency` seconds with a verdict; the ideal is
   `concurrency / latency` verdicts per second. Measured in the same run, alternating rounds: the
   judge step alone (transcripts, requests, verdict parsing, one journal line per verdict) on the rows
   curate hands it; `curate` with `--judge` against the same `curate` without it (the baseline), the
   judge's share of a whole run; the rerun, every verdict read back from the journal.
2. `health`: `curate` (default steps) on the synthetic run of bench_curate.py with the health checks on (the
   measures read from `metadata.health`, as collect stores them), off (`--no-health`), and on for a run
   whose trajectories carry no measures (collected before they were stored: measured from the messages),
   alternating.

    python bench/bench_judge.py judge --trajectories 512 --concurrency 64 --latency 1.0 --rounds 2
    python bench/bench_judge.py health --rows 200000 --rounds 2
    python bench/bench_judge.py smoke        # both, tiny (CI)
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

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import polars as pl  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from arms import same_work  # noqa: E402

from agentdata.agent.rundir import RunDir  # noqa: E402
from agentdata.curate import CurateConfig, curate  # noqa: E402
from agentdata.curate.messages import trajectory_batches  # noqa: E402
from agentdata.curate.shards import Shards  # noqa: E402
from agentdata.formats.health import HealthLimits  # noqa: E402
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


def judge_benchmark(args: argparse.Namespace) -> dict:
    ideal = args.concurrency / args.latency
    with tempfile.TemporaryDirectory() as folder, _server_process(args.latency, ("--script", "verdict")) as url:
        folder = Path(folder)
        run = crafted_run(folder, args.trajectories)
        shards = Shards.of([run])
        rows = [row for batch in trajectory_batches(shards, pl.Series(range(args.trajectories))) for row in batch]
        baseline_round(run, folder / "warm.parquet")  # imports and first reads before any clock
        rounds = []
        for number in range(args.rounds):  # alternate, so every arm sees the same machine load
            fresh = [{key: value for key, value in row.items() if not key.startswith("_judge")} for row in rows]
            step_s = step_round(fresh, url, args.concurrency, folder / f"step-cache-{number}")
            baseline_s = baseline_round(run, folder / f"base-{number}.parquet")
            judged = judge_round(run, url, args.concurrency, folder / f"cache-{number}", folder / f"j-{number}.parquet")
            rerun = judge_round(run, url, args.concurrency, folder / f"cache-{number}", folder / f"r-{number}.parquet")
            assert judged["counts"]["scored"] == args.trajectories and rerun["counts"]["cached"] == args.trajectories
            judge_s = judged["elapsed_s"] - baseline_s
            rounds.append(
                {
                    "whole_curate_efficiency": round(args.trajectories / judged["elapsed_s"] / ideal, 3),
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
    return {
        "benchmark": "LLM judge throughput (curate --judge, latency server)",
        "trajectories": args.trajectories,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_verdicts_per_s": ideal,
        "rounds": rounds,
        "load_average": os.getloadavg()[0],
    }


def health_benchmark(args: argparse.Namespace) -> dict:
    from bench.bench_curate import synthetic_run

    stored = synthetic_run(args.rows)
    unmeasured = stored.with_name(stored.name + "-unmeasured")  # the same rows, no stored measures
    if not (unmeasured / "done").exists():
        (unmeasured / "trajectories").mkdir(parents=True, exist_ok=True)
        for shard in RunDir(stored).shards():
            table = pq.read_table(shard)
            metadata = pa.array(["{}"] * table.num_rows, type=table.schema.field("metadata").type)
            table = table.set_column(table.schema.get_field_index("metadata"), "metadata", metadata)
            pq.write_table(table, unmeasured / "trajectories" / shard.name)
        (unmeasured / "done").write_text("ok")
    arms = {
        "health off": (stored, CurateConfig(rollout_health=HealthLimits(health=False))),
        "health on, stored measures": (stored, CurateConfig()),
        "health on, measured from messages": (unmeasured, CurateConfig()),
    }
    times: dict[str, list[float]] = {name: [] for name in arms}
    kept: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as folder:
        curate([stored], Path(folder) / "warm.parquet", arms["health off"][1])
        for _ in range(args.rounds):
            for name, (run, config) in arms.items():
                started = time.perf_counter()
                result = curate([run], Path(folder) / "out.parquet", config)
                times[name].append(time.perf_counter() - started)  # rounded only when printed
                kept[name] = result.kept_rows
                print(json.dumps({name: round(times[name][-1], 2)}), file=sys.stderr, flush=True)
    # the stored measures and the ones taken from the messages must drop the same rows (health off keeps
    # more by design: it runs fewer steps)
    same_work(
        "bench_judge health", "rows kept", kept["health on, stored measures"], kept["health on, measured from messages"]
    )
    off = min(times["health off"])
    return {
        "benchmark": "rollout health cost (curate, default steps)",
        "rows": args.rows,
        "times_s": {name: [round(t, 2) for t in values] for name, values in times.items()},
        "kept": kept,
        "best_over_off": {name: round(min(values) / off, 3) for name, values in times.items()},
        "load_average": os.getloadavg()[0],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="which", required=True)
    judge = sub.add_parser("judge")
    judge.add_argument("--trajectories", type=int, default=512)
    judge.add_argument("--concurrency", type=int, default=64)
    judge.add_argument("--latency", type=float, default=1.0)
    judge.add_argument("--rounds", type=int, default=2)
    health = sub.add_parser("health")
    health.add_argument("--rows", type=int, default=200_000)
    health.add_argument("--rounds", type=int, default=2)
    sub.add_parser("smoke", help="both at a tiny size (CI: they run and check their arms)")
    args = parser.parse_args()
    if args.which == "smoke":
        tiny = argparse.Namespace(trajectories=8, concurrency=4, latency=0.05, rounds=1, rows=2_000)
        result = {"judge": judge_benchmark(tiny), "health": health_benchmark(tiny)}
    else:
        result = judge_benchmark(args) if args.which == "judge" else health_benchmark(args)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
