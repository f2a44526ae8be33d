"""Time the quickstart end to end (examples/quickstart/run.sh) and record the machine's load.

    python bench/bench_quickstart.py --out /tmp/quickstart-bench [--threads 1]

Runs the script from scratch (the output folder is emptied first), samples the 1-minute load
average every 10 s, and prints a Markdown table of step times plus what each step produced,
for bench/RESULTS_quickstart.md. The whole log is kept as OUT/quickstart.log.
The target: the whole pipeline, install included (measured apart), in under 15 minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_S = 15 * 60  # install included: the run itself must leave room for `bash scripts/install.sh`


class LoadSampler(threading.Thread):
    """The 1-minute load average every `interval_s` seconds while the run goes on."""

    def __init__(self, interval_s: float = 10.0):
        super().__init__(daemon=True)
        self.interval_s, self.samples, self.stopped = interval_s, [], threading.Event()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.samples.append(os.getloadavg()[0])
            self.stopped.wait(self.interval_s)


def read_json(path: Path) -> dict:
    return json.loads(path.read_text()) if path.exists() else {}


def parquet_rows(path: Path) -> int | None:
    import polars as pl

    return pl.read_parquet(path).height if path.exists() else None


def sft_rows_by_teacher(path: Path) -> dict:
    """Curated rows per origin: the teacher's real trajectories against the stitched ones."""
    import polars as pl

    if not path.exists():
        return {}
    table = pl.read_parquet(path)
    column = next((name for name in ("teacher", "source") if name in table.columns), None)
    return dict(table[column].value_counts().iter_rows()) if column else {}


def outcomes(out: Path) -> dict:
    """A few numbers per step, read from what the steps wrote."""
    collect = read_json(out / "collect" / "stats.json")
    metrics = out / "train" / "rl" / "metrics.jsonl"
    rl_steps = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    report = read_json(out / "eval" / "report.json")
    return {
        "collect": {
            key: collect.get(key)
            for key in ("total", "accuracy", "mean_tool_calls", "completion_tokens", "tokens_per_s", "finish_reasons")
            if key in collect
        }
        or collect,
        "sft_rows": parquet_rows(out / "sft.parquet"),
        "sft_rows_by_teacher": sft_rows_by_teacher(out / "sft.parquet"),
        # GRPO learns only from groups whose rewards differ: TRL's share of flat groups and the reward spread per step
        "grpo_groups": [
            {key: step.get(key) for key in ("step", "frac_reward_zero_std", "reward_std", "reward")}
            for step in rl_steps
            if "reward" in step
        ],
        "pool_rows": parquet_rows(out / "pool.parquet"),
        "grpo_last": {
            key: value
            for key, value in next((s for s in reversed(rl_steps) if "accuracy" in s), {}).items()
            if key in ("step", "reward", "accuracy", "tools/call_frequency", "completions/model_tokens")
        },
        "eval": [
            {key: result.get(key) for key in ("model", "benchmark", "num_responses", "mean_tool_calls")}
            | {k: v for k, v in result.items() if k.startswith("avg@")}
            for result in report.get("results", [])
        ],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/quickstart-bench"))
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="OMP_NUM_THREADS for the run (1 on a machine shared with other heavy jobs)",
    )
    parser.add_argument(
        "--install-s",
        type=int,
        default=210,
        help="seconds `bash scripts/install.sh` takes on a fresh clone (CI's log: about 3.5 min), "
        "counted against the target",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="CI: the script with --dry-run (every step's command printed, none run), parsed as a real run is",
    )
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    args.out.mkdir(parents=True)
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    sampler = LoadSampler()
    sampler.start()
    started = time.monotonic()
    log_path = args.out.parent / f"{args.out.name}.log"
    with open(log_path, "w") as log:
        returncode = subprocess.call(
            ["bash", str(REPO / "examples/quickstart/run.sh"), "--out", str(args.out), *(["--dry-run"] * args.smoke)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
        )
    total_s = time.monotonic() - started
    sampler.stopped.set()
    shutil.move(log_path, args.out / "quickstart.log")

    if args.smoke:  # a dry run times nothing: the steps it would run, at 0 s
        log = (args.out / "quickstart.log").read_text()
        steps = [[line.split()[-1], "0"] for line in log.splitlines() if line.startswith("━━ step ")]
        if returncode or not steps:
            raise SystemExit(
                f"bench_quickstart: the dry run failed (exit {returncode}) or printed no step:\n{log[-2000:]}"
            )
    else:
        steps = [line.split("\t") for line in (args.out / "timings.tsv").read_text().splitlines()]
    loads = sampler.samples or [os.getloadavg()[0]]
    result = {
        "returncode": returncode,
        "total_s": round(total_s),
        "target_s": TARGET_S,
        "cpus": os.cpu_count(),
        "omp_num_threads": env.get("OMP_NUM_THREADS"),
        "load_1min": {"min": min(loads), "mean": round(sum(loads) / len(loads), 2), "max": max(loads)},
        "steps": {name: int(seconds) for name, seconds in steps},
        "outcomes": outcomes(args.out),
    }
    (args.out / "bench.json").write_text(json.dumps(result, indent=2))

    print("| step | seconds |\n|---|---:|")
    for name, seconds in result["steps"].items():
        print(f"| {name} | {seconds} |")
    verdict = "met" if returncode == 0 and total_s + args.install_s < TARGET_S else "NOT met"
    verdict = "not checked (a dry run)" if args.smoke else verdict
    print(f"| **total** (exit {returncode}) | **{result['total_s']}** |")
    print(
        f"\n{os.cpu_count()} CPUs, OMP_NUM_THREADS={result['omp_num_threads']}, 1-min load during the run: "
        f"min {result['load_1min']['min']:.1f} / mean {result['load_1min']['mean']:.1f} / max "
        f"{result['load_1min']['max']:.1f}; "
        f"with install ({args.install_s} s) {round(total_s) + args.install_s} s; target under "
        f"{TARGET_S // 60} min: {verdict}"
    )
    print(json.dumps(result["outcomes"], indent=2))


if __name__ == "__main__":
    main()
