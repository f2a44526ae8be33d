"""Benchmark: curate's polars steps against a plain pandas/Python implementation of the same steps.

Measured in one run on the same data:
  1. rule filters + exact dedup over N trajectory rows (default 1M), read from Parquet shards;
  2. near-dedup over M questions (default 200k): vectorised MinHash + datasketch LSH
     against per-text datasketch MinHash.update in Python + the same LSH;
  3. the whole `curate` (default steps) over the N rows, shards to SFT Parquet.

The synthetic run dir is generated once, vectorised, and cached under /tmp.
Run: python bench/bench_curate.py [--rows 1000000] [--questions 200000]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.formats.health import HEALTH_KEY, measure_health  # noqa: E402
from agentdata.records import CODE_TOOL, MESSAGES_TYPE, Trajectory, arrow_schema

CACHE = Path("/tmp/agentdata-bench-curate")
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


def synthetic_run(rows: int, shard_rows: int = 100_000) -> Path:
    """A run dir of `rows` trajectories (4 per problem), built with Arrow arrays, cached."""
    run = CACHE / f"run-{rows}-v2"  # v2: the health measures collect stores on every trajectory
    if (run / "done").exists():
        return run
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
            "format": ["hermes"] * count,
            "sampling": ["{}"] * count,
            "timings": ["{}"] * count,
            "error": [None] * count,
            # what collect stores on each trajectory (every synthetic row has the same shape: the same measures)
            "metadata": [json.dumps({HEALTH_KEY: measure_health(messages[0], "hermes").as_dict()})] * count,
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
    from agentdata.curate.sft import run_curate_steps
    from agentdata.steps import DedupConfig

    config = CurateConfig(dedup=DedupConfig(near_dup_threshold=None), max_per_problem=None)
    return run_curate_steps(sorted((run / "trajectories").glob("*.parquet")), config)[1].kept.height


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


def timed(function, *args):
    started = time.perf_counter()
    value = function(*args)
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=200_000)
    args = parser.parse_args()
    run, build_s = timed(synthetic_run, args.rows)
    print(f"data: {args.rows:,} rows in {run} (built/cached in {build_s:.1f}s)")

    fast_kept, fast_s = timed(polars_rules_and_dedup, run)
    slow_kept, slow_s = timed(pandas_rules_and_dedup, run)
    print(
        f"rules+exact dedup: polars {fast_s:.1f}s, pandas {slow_s:.1f}s, ratio {slow_s / fast_s:.1f}x "
        f"(kept {fast_kept:,} vs {slow_kept:,})"
    )

    questions = synthetic_questions(args.questions, seed=3)
    fast_dropped, near_fast_s = timed(polars_near_dedup, questions)
    slow_dropped, near_slow_s = timed(datasketch_near_dedup, questions)
    print(
        f"near-dedup {args.questions:,} questions: vectorised {near_fast_s:.1f}s, per-text {near_slow_s:.1f}s, "
        f"ratio {near_slow_s / near_fast_s:.1f}x (dropped {fast_dropped:,} vs {slow_dropped:,})"
    )

    from agentdata.curate import curate

    result, curate_s = timed(curate, [run], CACHE / "sft.parquet")
    print(
        f"full curate (default steps) over {args.rows:,} rows: {curate_s:.1f}s, kept {result.kept_rows:,}; "
        f"dropped {result.counts}"
    )


if __name__ == "__main__":
    main()
