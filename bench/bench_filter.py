"""`agentdata filter` building its pool from a full profile: 1M student rollouts (250k problems × k=4).

The profile run dir is complete (every rollout cached, as on a rerun with another band or after
a profiling job on a cluster), so the command generates nothing: it reads the problems file,
plans the resume, computes the pass rates, runs the pool steps (band, exact and near dedup), the
diverse selection (TF-IDF embedding, k-means) and writes the pool, its report and plot. Measured
as a user runs it (`agentdata filter` in a child process: wall time and peak RSS), with a
same-run baseline: the same command from another checkout (`--baseline-ref`, e.g. the commit
before the speed-ups), alternating, both on the same files; the two pools must hold the same
problems with the same pass rates and drop counts (else the bench stops; the cluster labels may
differ, k-means being fitted on a sample above 20k problems).

    python bench/bench_filter.py --problems 250000 --baseline-ref 8ec58c5 [--profile 15]
    python bench/bench_filter.py --smoke
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from arms import compare_checkouts, load, run_child, same_work  # noqa: E402
from bench_curate import synthetic_questions  # noqa: E402

from agentdata.records import MESSAGES_TYPE, Trajectory, arrow_schema  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "agentdata-bench-filter"  # TMPDIR moves it
STUDENT = "openai:http://127.0.0.1:9/v1"  # never called: every rollout is in the profile
K = 4


def problem_hash(question: str, answer: str) -> str:
    """agentdata.agent.resume.problem_hash of a math problem with no metadata, as collect stores it."""
    return hashlib.sha1(json.dumps([question, answer, "math", {}], sort_keys=True).encode()).hexdigest()[:16]


def synthetic_profile(problems: int, shard_rows: int = 200_000) -> tuple[Path, Path]:
    """(problems JSONL, profile run dir with k rollouts each), cached. Each problem has its own solve
    rate, so pass rates spread over [0, 1]. None ended in an error (filter would retry it)."""
    folder = CACHE / f"problems-{problems}"
    problems_file, profile = folder / "problems.jsonl", folder / "profile"
    if (folder / "done").exists():
        return problems_file, profile
    questions = synthetic_questions(problems, seed=5)
    answers = [str(index % 97) for index in range(problems)]
    sources = [f"src{index % 3}" for index in range(problems)]
    folder.mkdir(parents=True, exist_ok=True)
    with open(problems_file, "w", encoding="utf-8") as handle:
        for index, (question, answer, source) in enumerate(zip(questions, answers, sources)):
            handle.write(json.dumps({"id": f"p{index}", "question": question, "answer": answer, "source": source}))
            handle.write("\n")
    hashes = [problem_hash(q, a) for q, a in zip(questions, answers)]
    rng = np.random.default_rng(6)
    solve_rate = rng.random(problems)
    rows = problems * K
    (profile / "trajectories").mkdir(parents=True, exist_ok=True)
    for start in range(0, rows, shard_rows):
        index = np.arange(start, min(rows, start + shard_rows))
        problem, sample = index // K, index % K
        count = len(index)
        errored = np.zeros(count, dtype=bool)
        correct = (rng.random(count) < solve_rate[problem]) & ~errored
        columns = {
            "id": [f"p{p}-{s}" for p, s in zip(problem, sample)],
            "problem_id": [f"p{p}" for p in problem],
            "question": [questions[p] for p in problem],
            "answer": [answers[p] for p in problem],
            "messages": pa.array(
                [
                    [
                        {"role": "user", "content": questions[p]},
                        {"role": "assistant", "content": f"So \\boxed{{{answers[p] if c else 'x'}}}."},
                    ]
                    for p, c in zip(problem, correct)
                ],
                type=MESSAGES_TYPE,
            ),
            "source": [sources[p] for p in problem],
            "domain": ["math"] * count,
            "tools": ["[]"] * count,
            "final_answer": [answers[p] if c else "x" for p, c in zip(problem, correct)],
            "correct": correct.tolist(),
            "num_tool_calls": [0] * count,
            "num_tool_errors": [0] * count,
            "num_turns": [1] * count,
            "finish_reason": ["error" if e else "answer" for e in errored],
            "prompt_tokens": [50] * count,
            "completion_tokens": [20] * count,
            "teacher": [STUDENT] * count,
            "format": ["codeblock"] * count,
            "sampling": [json.dumps({"sample_index": int(s)}) for s in sample],
            "timings": ["{}"] * count,
            "error": ["engine failed" if e else None for e in errored],
            "metadata": [json.dumps({"problem_hash": hashes[p]}) for p in problem],
        }
        table = pa.table(columns, schema=arrow_schema(Trajectory))
        pq.write_table(table, profile / "trajectories" / f"part-{start // shard_rows:05d}.parquet")
    (folder / "done").write_text("ok")
    return problems_file, profile


def filter_arguments(problems_file: Path, profile: Path, out: Path) -> list[str]:
    # TF-IDF embeddings, from a settings file: older checkouts (a --baseline-ref) read one as this one does
    settings = out.parent / "filter.yaml"
    settings.write_text("embedding: tfidf\n")
    flags = ["--out", str(out), "--profile-dir", str(profile), "--student", STUDENT, "--k", str(K)]
    return ["-m", "agentdata.cli.app", "filter", str(problems_file), *flags, "--config", str(settings), "--json"]


def one_filter(checkout: Path, problems_file: Path, profile: Path, out: Path, profile_to: Path | None) -> dict:
    shutil.rmtree(out.parent, ignore_errors=True)
    out.parent.mkdir(parents=True)
    seconds, peak_gb, stdout = run_child(checkout, filter_arguments(problems_file, profile, out), profile_to)
    report = json.loads(stdout[stdout.index("{") :])
    if report["generated"]:
        raise SystemExit(f"bench_filter: filter generated {report['generated']} rollouts: the profile is not complete")
    return {
        "seconds": round(seconds, 1),
        "peak_rss_gb": round(peak_gb, 2),
        "selected": report["selected"],
        "dropped": report["dropped"],
        "pool": pl.read_parquet(out),
        "load": load(),
    }


INTERVAL_COLUMNS = ("pass_rate_low", "pass_rate_high")


def kept(pool: pl.DataFrame) -> pl.DataFrame:
    """The pool without its clusters (k-means on a sample may label them otherwise), by problem; the Wilson
    bounds to 4 decimals (46895db took z = 1.959964 for 1.96: the bounds moved by about 1e-5)."""
    present = [column for column in INTERVAL_COLUMNS if column in pool.columns]
    return pool.drop("cluster").with_columns(pl.col(present).round(4)).sort("problem_id")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=250_000, help=f"problems; the profile holds {K} rollouts each")
    parser.add_argument("--baseline-ref", help="time the same command from this commit too (e.g. 8ec58c5)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of the arms")
    parser.add_argument("--profile", type=int, metavar="N", help="run each arm once more under cProfile: top N")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.problems = 500
    problems_file, profile = synthetic_profile(args.problems)
    print(f"data: {args.problems:,} problems, {args.problems * K:,} rollouts in {profile}; load {load()}", flush=True)

    def run_one(name: str, checkout: Path, profile_to: Path | None) -> dict:
        return one_filter(checkout, problems_file, profile, CACHE / f"out-{name}" / "pool.parquet", profile_to)

    def check(ours: dict, theirs: dict) -> None:
        # the same problems with the same pass rates; clusters (and so the order) may differ where one arm
        # fits k-means on a sample
        same_work("bench_filter", "the pools written", kept(ours["pool"]), kept(theirs["pool"]))
        same_work("bench_filter", "the drop counts", ours["dropped"], theirs["dropped"])

    compare_checkouts("filter", args, CACHE, run_one, check, hidden=("pool",))


if __name__ == "__main__":
    main()
