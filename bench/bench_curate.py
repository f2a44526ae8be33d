"""Benchmark: curate's polars steps and SFT-set writer against plain row-by-row implementations.

Measured in one run on the same data, each comparison stopping (no ratio) when the arms did not do
the same work (bench/arms.py):
  1. rule filters + exact dedup over N trajectory rows (default 1M), read from Parquet shards, against
     pandas with a Python function per row (the same rows kept);
  2. near-dedup over M questions (default 200k): vectorised MinHash + datasketch LSH against per-text
     datasketch MinHash.update in Python + the same LSH (as many dropped, within 5%);
  3. the whole `curate --for trl` (default steps) over the N rows, shards to the `hf` export, with the columnar
     writer and with the row-by-row writer it replaced (bench/rowwise_sft_writer.py; the same file);
  4. (--only memory) the whole curate in a child process: wall time and peak RSS (10M rows: bounded).

The synthetic run dir is generated once, vectorised, and cached under $TMPDIR.

    python bench/bench_curate.py [--rows 1000000] [--questions 200000] [--profile 15]
    python bench/bench_curate.py --rows 10000000 --only memory
    python bench/bench_curate.py --smoke       # CI: every arm and check, tiny
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from arms import load, profile_top, run_child, same_work  # noqa: E402

from agentdata.formats.health import HEALTH_KEY, measure_health  # noqa: E402
from agentdata.records import CODE_TOOL, MESSAGES_TYPE, Trajectory, arrow_schema  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "agentdata-bench-curate"  # TMPDIR moves it
WORDS = np.array(
    "the of a to find compute sum prime number area circle radius gas moles triangle side length "
    "integer value probability dice two three five seven eleven what how many is are".split()
)


def synthetic_questions(count: int, seed: int = 0) -> list[str]:
    """Questions of 12-30 words; about 5% are near copies (one word changed) of an earlier one."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(12, 31, count)
    words = WORDS[rng.integers(0, len(WORDS), lengths.sum())]
    splits = np.cumsum(lengths)[:-1]
    questions = [" ".join(chunk) + f" {index}?" for index, chunk in enumerate(np.split(words, splits))]
    for index in rng.choice(np.arange(1, count), count // 20, replace=False):
        source = questions[rng.integers(0, index)].split()
        source[0] = "then"
        questions[index] = " ".join(source)
    return questions


def synthetic_run(rows: int, shard_rows: int = 100_000, codeblock_share: float = 0.0) -> Path:
    """A run dir of `rows` trajectories (4 per problem), built with Arrow arrays, cached. Every
    1/`codeblock_share`-th row is a codeblock trajectory (written as plain turns), the rest hermes."""
    # v2: the health measures collect stores on every trajectory
    run = CACHE / (f"run-{rows}-v2" + (f"-codeblock{codeblock_share:g}" if codeblock_share else ""))
    if (run / "done").exists():
        return run
    every = round(1 / codeblock_share) if codeblock_share else 0
    problems = max(1, rows // 4)
    questions = np.array(synthetic_questions(problems, seed=1), dtype=object)
    rng = np.random.default_rng(2)
    for start in range(0, rows, shard_rows):
        count = min(shard_rows, rows - start)
        index = np.arange(start, start + count)
        problem = index // 4
        calls = rng.integers(0, 11, count)
        variant = rng.integers(0, 3, count)  # same variant of the same problem = exact duplicate
        code = [f"x = {p} * {v}\nprint(x)" for p, v in zip(problem, variant)]
        bad = rng.random(count) < 0.02
        arguments = [("{bad" if b else json.dumps({"code": c})) for b, c in zip(bad, code)]
        messages = [
            [
                {"role": "user", "content": questions[p], "tool_calls": None, "tool_call_id": None, "name": None},
                {
                    "role": "assistant",
                    "content": f"Let me compute it, variant {v}.",
                    "tool_call_id": None,
                    "name": None,
                    "tool_calls": [
                        {"id": "call_0", "type": "function", "function": {"name": "code_interpreter", "arguments": a}}
                    ],
                },
                {
                    "role": "tool",
                    "content": "42",
                    "tool_calls": None,
                    "tool_call_id": "call_0",
                    "name": "code_interpreter",
                },
                {
                    "role": "assistant",
                    "content": f"The answer is \\boxed{{{p % 97}}}.",
                    "tool_calls": None,
                    "tool_call_id": None,
                    "name": None,
                },
            ]
            for p, v, a in zip(problem, variant, arguments)
        ]
        correct = rng.random(count) < 0.7
        answered = rng.random(count) < 0.95
        formats = ["codeblock" if every and i % every == 0 else "hermes" for i in index]
        health = {name: json.dumps({HEALTH_KEY: measure_health(messages[0], name).as_dict()}) for name in set(formats)}
        columns = {
            "id": [f"{p}-{i % 4}" for p, i in zip(problem, index)],
            "problem_id": [f"p{p}" for p in problem],
            "question": questions[problem].tolist(),
            "answer": [str(p % 97) for p in problem],
            "messages": pa.array(messages, type=MESSAGES_TYPE),
            "source": [f"src{p % 3}" for p in problem],
            "domain": ["math"] * count,
            "tools": [json.dumps([CODE_TOOL])] * count,
            "final_answer": [str(p % 97) if a else None for p, a in zip(problem, answered)],
            "correct": (correct & answered).tolist(),
            "num_tool_calls": calls.tolist(),
            "num_tool_errors": rng.integers(0, 3, count).clip(0, calls).tolist(),
            "num_turns": (calls + 1).tolist(),
            "finish_reason": ["answer"] * count,
            "prompt_tokens": rng.integers(50, 400, count).tolist(),
            "completion_tokens": rng.integers(100, 40_000, count).tolist(),
            "teacher": ["bench"] * count,
            "format": formats,
            "sampling": ["{}"] * count,
            "timings": ["{}"] * count,
            "error": [None] * count,
            # what collect stores on each trajectory (the synthetic rows of a format share one shape: one measure)
            "metadata": [health[name] for name in formats],
        }
        table = pa.table(columns, schema=arrow_schema(Trajectory))
        (run / "trajectories").mkdir(parents=True, exist_ok=True)
        pq.write_table(table, run / "trajectories" / f"part-{start // shard_rows:05d}.parquet")
    (run / "done").write_text("ok")
    return run


# --------------------------------------------------------------------------- pandas baseline


def _normalise(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def _malformed(messages) -> int:
    bad = 0
    for message in messages:
        for call in message["tool_calls"] if message["tool_calls"] is not None else ():
            try:
                arguments = json.loads(call["function"]["arguments"])
                ok = isinstance(arguments, dict) and isinstance(arguments.get("code"), str)
            except (json.JSONDecodeError, TypeError):
                ok = False
            bad += (not ok) or call["function"]["name"] != "code_interpreter"
    return bad


def _text(question: str, messages) -> str:
    parts = [m["content"] for m in messages if m["role"] == "assistant"]
    parts += [c["function"]["arguments"] for m in messages if m["tool_calls"] is not None for c in m["tool_calls"]]
    return _normalise(question + "\n" + "\n".join(parts))


def pandas_rules_and_dedup(run: Path) -> int:
    frame = pd.concat(
        [pd.read_parquet(path) for path in sorted((run / "trajectories").glob("*.parquet"))], ignore_index=True
    )
    frame = frame[frame["final_answer"].notna() & (frame["final_answer"].str.strip() != "")]
    frame = frame[frame["correct"]]
    frame = frame[frame["messages"].apply(_malformed) == 0]
    calls = frame["num_tool_calls"]
    frame = frame[(calls == 0) | (frame["num_tool_errors"] / calls.where(calls > 0, 1) <= 0.5)]
    frame = frame[(frame["num_tool_calls"] >= 1) & (frame["num_tool_calls"] <= 8)]
    frame = frame[frame["prompt_tokens"] + frame["completion_tokens"] <= 32768]
    keys = [_text(q, m) for q, m in zip(frame["question"], frame["messages"])]
    frame = frame.assign(_key=keys).drop_duplicates("_key")
    return len(frame)


def polars_rules_and_dedup(run: Path) -> int:
    from agentdata.curate import CurateConfig
    from agentdata.curate.passes import run_curate_steps
    from agentdata.curate.shards import Shards
    from agentdata.steps import DedupConfig

    config = CurateConfig(dedup=DedupConfig(near_dup_threshold=None), max_per_problem=None)
    return run_curate_steps(Shards.of([run]), config)[1].kept.height


def datasketch_near_dedup(questions: list[str], threshold: float = 0.8, ngram: int = 5) -> int:
    """The usual way: one datasketch MinHash per text, updated shingle by shingle in Python."""
    from datasketch import MinHash, MinHashLSH

    index = MinHashLSH(threshold=threshold, num_perm=128)
    dropped = 0
    for row, question in enumerate(questions):
        words = re.findall(r"\w+", question.lower())
        grams = {" ".join(words[i : i + ngram]) for i in range(max(1, len(words) - ngram + 1))}
        sketch = MinHash(num_perm=128)
        sketch.update_batch([gram.encode() for gram in grams])
        if any(
            sketch.jaccard(index_sketch) >= threshold for index_sketch in (sketches[key] for key in index.query(sketch))
        ):
            dropped += 1
            continue
        sketches[row] = sketch
        index.insert(row, sketch, check_duplication=False)
    return dropped


sketches: dict = {}


def polars_near_dedup(questions: list[str]) -> int:
    from agentdata.steps import NearDuplicateFilter

    keep = NearDuplicateFilter(text="question").keep(pl.DataFrame({"question": questions}))
    return int((~keep).sum())


def timed(function, *args, **kwargs):
    started = time.perf_counter()
    value = function(*args, **kwargs)
    return value, time.perf_counter() - started


def cpu_seconds() -> float:
    """CPU time of this process so far, every thread's (polars runs on several): on a shared machine the
    wall time is mostly the load, this is the work."""
    times = os.times()
    return times.user + times.system


def curate_with(writer: str, run: Path, out: Path) -> tuple[object, float, float, float]:
    """The whole `curate` (default steps) with the columnar writer or the row-by-row one it replaced;
    returns (result, seconds in all, seconds in the writer, CPU seconds in all)."""
    from rowwise_sft_writer import write_hf as rowwise_hf

    import agentdata.curate.sft as sft
    from agentdata.curate import CurateConfig, curate

    columnar = sft.write_sft_form
    writer_s = []

    def measured(source, target, *args, **kwargs):
        started = time.perf_counter()
        try:
            return rowwise_hf(source, target) if writer == "rowwise" else columnar(source, target, *args, **kwargs)
        finally:
            writer_s.append(time.perf_counter() - started)

    sft.write_sft_form = measured
    cpu = cpu_seconds()
    try:
        result, seconds = timed(curate, [run], out, CurateConfig(target="trl"))  # the export the writers make
    finally:
        sft.write_sft_form = columnar
    return result, seconds, writer_s[-1], cpu_seconds() - cpu


def profiled(entries: int, writer: str, run: Path, out: Path) -> str:
    """The top entries of a cProfile of the whole curate with `writer`, by cumulative time."""
    import cProfile

    stats = CACHE / f"curate-{writer}.prof"
    profiler = cProfile.Profile()
    profiler.runcall(curate_with, writer, run, out)
    profiler.dump_stats(stats)
    return profile_top(stats, entries)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=200_000)
    parser.add_argument("--codeblock-share", type=float, default=0.0, help="share of codeblock trajectories")
    parser.add_argument("--no-baseline-writer", action="store_true", help="skip the row-by-row writer's curate")
    parser.add_argument("--only", choices=("steps", "near-dedup", "curate", "memory"), action="append")
    parser.add_argument("--profile", type=int, metavar="N", help="print the top N entries of each writer's profile")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI: every arm runs, in seconds")
    parser.add_argument("--curate-only", type=Path, help=argparse.SUPPRESS)  # the child of the memory run
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.curate_only:
        from agentdata.curate import curate

        result = curate([args.curate_only], args.out)
        print(json.dumps({"kept": result.kept_rows, "input": result.input_rows, "cpu_s": round(cpu_seconds(), 1)}))
        return
    if args.smoke:
        args.rows, args.questions = 2_000, 400
    only = set(args.only or ("steps", "near-dedup", "curate"))
    run, build_s = timed(synthetic_run, args.rows, codeblock_share=args.codeblock_share)
    print(f"data: {args.rows:,} rows in {run} (built/cached in {build_s:.1f}s); load {load()}")

    if "steps" in only:
        fast_kept, fast_s = timed(polars_rules_and_dedup, run)
        slow_kept, slow_s = timed(pandas_rules_and_dedup, run)
        same_work("bench_curate", "rows kept by rules + exact dedup", fast_kept, slow_kept)
        print(
            f"rules+exact dedup: polars {fast_s:.1f}s, pandas {slow_s:.1f}s, ratio {slow_s / fast_s:.1f}x "
            f"(kept {fast_kept:,} by both)"
        )

    if "near-dedup" in only:
        questions = synthetic_questions(args.questions, seed=3)
        fast_dropped, near_fast_s = timed(polars_near_dedup, questions)
        slow_dropped, near_slow_s = timed(datasketch_near_dedup, questions)
        # MinHash estimates differ by permutation scheme: the arms agree within 5% of what they drop
        same_work(
            "bench_curate", "questions dropped by near-dedup", fast_dropped, slow_dropped, tolerance=0.05, at_least=5
        )
        print(
            f"near-dedup {args.questions:,} questions: vectorised {near_fast_s:.1f}s, per-text {near_slow_s:.1f}s, "
            f"ratio {near_slow_s / near_fast_s:.1f}x (dropped {fast_dropped:,} vs {slow_dropped:,})"
        )

    if "curate" in only:
        ours, ours_s, ours_writer_s, ours_cpu = curate_with("columnar", run, CACHE / "sft.parquet")
        print(
            f"full curate (default steps), columnar writer: {ours_s:.1f}s, of which the writer {ours_writer_s:.1f}s; "
            f"{ours_cpu:.1f}s of CPU; kept {ours.kept_rows:,} of {ours.input_rows:,}; load {load()}"
        )
        if not args.no_baseline_writer:
            theirs, theirs_s, theirs_writer_s, theirs_cpu = curate_with("rowwise", run, CACHE / "sft-rowwise.parquet")
            same_work("bench_curate", "the SFT sets written", pq.read_table(ours.output), pq.read_table(theirs.output))
            print(
                f"full curate, row-by-row writer (before): {theirs_s:.1f}s, of which the writer "
                f"{theirs_writer_s:.1f}s; {theirs_cpu:.1f}s of CPU; the same file; ratio {theirs_s / ours_s:.1f}x "
                f"in all, {theirs_writer_s / ours_writer_s:.1f}x the writer, {theirs_cpu / ours_cpu:.1f}x CPU; "
                f"load {load()}"
            )
        if args.profile:
            for writer in ("columnar",) + (() if args.no_baseline_writer else ("rowwise",)):
                top = profiled(args.profile, writer, run, CACHE / f"sft-{writer}.parquet")
                print(f"--- profile of the whole curate, {writer} writer\n{top}")

    if "memory" in only:
        arguments = [__file__, "--curate-only", str(run), "--out", str(CACHE / "sft-memory.parquet")]
        seconds, peak_gb, stdout = run_child(ROOT, arguments)
        result = {"seconds": round(seconds, 1), "peak_rss_gb": round(peak_gb, 2), **json.loads(stdout.splitlines()[-1])}
        print(f"memory: the whole curate of {args.rows:,} rows in a child process: {json.dumps(result)}; load {load()}")


if __name__ == "__main__":
    main()
