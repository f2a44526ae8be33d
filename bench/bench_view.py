"""Benchmark: `agentdata view` on a run dir of 1M trajectories, against a plain pandas reader of the same dir.

Measured in one run on the same data (the work a page asks the server for):
  1. open: the index of every trajectory (scalar columns, pass rate per problem, time), the facet counts
     and the first page of 50, as `agentdata view RUN` does before it prints its URL, on a run dir with no
     index beside it; then a search while nothing is kept yet (it scans the shards); then what the server
     does after the URL, in the background (the index and the search index kept in RUN/.agentdata-view/);
     then the open again (both read back) and its background work (the search index's postings read);
  2. a filter: correct = false, finish reason answer, 1-3 tool calls, sorted by length, first page;
  3. a full-text search over question, code and tool output, first page (from the search index);
  4. one trajectory opened whole (its messages read from its shard).
The baseline reads the same shards with pandas (pyarrow engine, the same columns) and does the same
work in pandas. The synthetic run dir is generated once, vectorised, and cached under /tmp.

Run: python bench/bench_view.py [--rows 1000000] [--shard-rows 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from arms import same_work  # noqa: E402

from agentdata.records import CODE_TOOL, Trajectory, arrow_schema  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "agentdata-bench-view"  # TMPDIR moves it
SYSTEM = (
    "Solve the problem. You may run Python code: write it in a ```python block and stop; its output comes "
    "back in a ```output block. Give the final answer as \\boxed{...}. " * 3
)
WORDS = np.array(
    "the of a to find compute sum prime number area circle radius gas moles triangle side length "
    "integer value probability dice two three five seven eleven what how many is are".split()
)
FINISH = np.array(["answer", "answer", "answer", "max_turns", "max_tokens", "error"])


def _message(role, content, tool_calls=None, tool_call_id=None, name=None):
    return {
        "role": role,
        "content": content,
        "reasoning_content": None,
        "tool_calls": tool_calls,
        "tool_call_id": tool_call_id,
        "name": name,
    }


def _messages(question: str, calls: int, variant: int) -> list[dict]:
    messages = [_message("system", SYSTEM), _message("user", question)]
    for index in range(calls):
        code = f"values = [n * {variant + index} for n in range({index + 10})]\nprint(sum(values))"
        call = {
            "id": f"call_{index}",
            "type": "function",
            "function": {"name": "code_interpreter", "arguments": json.dumps({"code": code})},
        }
        messages.append(_message("assistant", f"Step {index}: let me compute the sum for variant {variant}.", [call]))
        messages.append(_message("tool", f"{(variant + index) * 45 * (index + 1)}\n", None, f"call_{index}", "code"))
    messages.append(_message("assistant", f"So the total is \\boxed{{{variant * 45}}}."))
    return messages


def synthetic_run(rows: int, shard_rows: int) -> Path:
    """A collect run dir of `rows` trajectories (4 per problem) in shards of `shard_rows`, cached."""
    run = CACHE / f"run-{rows}-{shard_rows}"
    if (run / "done").exists():
        return run
    (run / "trajectories").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    schema = arrow_schema(Trajectory)
    for shard, start in enumerate(range(0, rows, shard_rows)):
        count = min(shard_rows, rows - start)
        index = np.arange(start, start + count)
        problem = index // 4
        calls = rng.integers(0, 4, count)
        variant = rng.integers(0, 1000, count)
        lengths = rng.integers(12, 30, count)
        words = WORDS[rng.integers(0, len(WORDS), lengths.sum())]
        questions = [
            " ".join(chunk) + f" (problem {p})?" for p, chunk in zip(problem, np.split(words, np.cumsum(lengths)[:-1]))
        ]
        finish = FINISH[rng.integers(0, len(FINISH), count)]
        completion = rng.integers(50, 4000, count)
        table = pa.table(
            {
                "id": [f"p{p:07d}-{i % 4}" for p, i in zip(problem, index)],
                "problem_id": [f"p{p:07d}" for p in problem],
                "question": questions,
                "answer": [str(v * 45) for v in variant],
                "messages": [_messages(q, int(c), int(v)) for q, c, v in zip(questions, calls, variant)],
                "source": np.array(["gsm8k", "math", "aime", "code"])[problem % 4],
                "domain": np.where(problem % 4 == 3, "code", "math"),
                "tools": [json.dumps([CODE_TOOL])] * count,
                "final_answer": [str(v * 45) for v in variant],
                "correct": rng.random(count) < 0.4,
                "num_tool_calls": calls,
                "num_tool_errors": (rng.random(count) < 0.1) * calls,
                "num_turns": calls + 1,
                "finish_reason": finish,
                "prompt_tokens": rng.integers(100, 400, count),
                "completion_tokens": completion,
                "teacher": np.where(problem % 2, "vllm:/models/Qwen3-8B", "openai:http://127.0.0.1:8000/v1"),
                "format": ["codeblock"] * count,
                "sampling": ['{"temperature": 1.0}'] * count,
                "timings": [json.dumps({"total_s": round(float(c) / 80, 3)}) for c in completion],
                "error": [None] * count,
                "metadata": ["{}"] * count,
            },
            schema=schema,
        )
        pq.write_table(table, run / "trajectories" / f"part-{shard:05d}.parquet")
    (run / "done").write_text("")
    return run


# --------------------------------------------------------------------------- the two arms


class Clock:
    """Wall and CPU seconds (all threads of the process) of each step: under a shared machine's load the wall
    time grows with the other work, the CPU time much less."""

    def __init__(self) -> None:
        self.times: dict[str, tuple[float, float]] = {}

    def __call__(self, step: str):
        clock = self

        class _Step:
            def __enter__(self):
                self.wall, self.cpu = time.perf_counter(), time.process_time()

            def __exit__(self, *exc):
                clock.times[step] = (time.perf_counter() - self.wall, time.process_time() - self.cpu)

        return _Step()


def agentdata_arm(run: Path) -> tuple[dict[str, tuple[float, float]], tuple[int, int]]:
    import shutil

    from agentdata.view.api import ViewerData
    from agentdata.view.catalog import open_artifacts
    from agentdata.view.index_cache import CACHE_DIR
    from agentdata.view.search_index import SEARCH_FILE

    def open_run() -> tuple[ViewerData, dict, dict]:
        data = ViewerData(open_artifacts([run]))  # what `agentdata view RUN` does before printing its URL,
        return data, data.artifacts(), data.rows("a0", {})  # then the home page's numbers, menus and first page

    shutil.rmtree(run / CACHE_DIR, ignore_errors=True)  # as a run dir collect just wrote
    clock = Clock()
    with clock("open"):
        built, built_home, built_first = open_run()
    with clock("search, before its index"):  # what a search does until the background work below is done
        scanned = built.rows("a0", {"q": NEEDLE})
    with clock("kept after the URL"):  # the server's background thread: the index, then the search index
        built.catalog.keep()
    assert (run / CACHE_DIR / SEARCH_FILE).is_file(), "the search index was not kept beside the run"
    with clock("open again"):
        data, home, first = open_run()
    with clock("read back after the URL"):  # the server's background thread: the search index checked, postings read
        data.catalog.keep()
    assert data.artifact("a0").table().search_index is not None, "the search index was not read back"
    assert first["total"] == len(data.artifact("a0").table())
    assert (home, first) == (built_home, built_first), "the index read back differs from the one built"
    query = {"correct": "false", "finish_reason": "answer", "min.num_tool_calls": "1", "max.num_tool_calls": "3"}
    with clock("filter"):
        filtered = data.rows("a0", {**query, "sort": "completion_tokens", "desc": "1"})
    with clock("search"):
        found = data.rows("a0", {"q": NEEDLE})
    assert found == scanned, "the search index and the scan found different rows"
    with clock("open one"):
        data.record("a0", filtered["rows"][0]["_row"])
    return clock.times, (filtered["total"], found["total"])


NEEDLE = "for n in range(12)"  # in the code of about a quarter of the trajectories


def pandas_arm(run: Path) -> tuple[dict[str, tuple[float, float]], tuple[int, int]]:
    import pandas as pd

    columns = [
        "id",
        "problem_id",
        "question",
        "source",
        "domain",
        "teacher",
        "format",
        "correct",
        "finish_reason",
        "num_tool_calls",
        "num_tool_errors",
        "num_turns",
        "prompt_tokens",
        "completion_tokens",
        "timings",
    ]
    shards = sorted((run / "trajectories").glob("part-*.parquet"))
    clock = Clock()
    opening = clock("open")
    opening.__enter__()
    frame = pd.concat([pd.read_parquet(shard, columns=columns) for shard in shards], ignore_index=True)
    frame = frame.drop_duplicates("id", keep="last")
    frame["total_s"] = [json.loads(text).get("total_s") for text in frame["timings"]]
    valid = frame[frame["finish_reason"] != "error"]
    frame["pass_rate"] = frame["problem_id"].map(valid.groupby("problem_id")["correct"].mean())
    {name: frame[name].value_counts() for name in ("source", "domain", "teacher", "format", "finish_reason")}
    frame.head(50)
    opening.__exit__()
    clock.times["open again"] = clock.times["open"]  # a plain reader keeps nothing: each open is the first
    clock.times["kept after the URL"] = clock.times["read back after the URL"] = (0.0, 0.0)
    filtering = clock("filter")
    filtering.__enter__()
    chosen = frame[
        (~frame["correct"]) & (frame["finish_reason"] == "answer") & frame["num_tool_calls"].between(1, 3)
    ].sort_values("completion_tokens", ascending=False)
    chosen.head(50)
    filtering.__exit__()
    searching = clock("search")
    searching.__enter__()
    needle = NEEDLE
    hits = 0
    for shard in shards:
        part = pd.read_parquet(shard, columns=["question", "messages"])
        for question, messages in zip(part["question"], part["messages"]):
            texts = [question] + [m["content"] for m in messages]
            texts += [
                c["function"]["arguments"]
                for m in messages
                for c in (m["tool_calls"] if m["tool_calls"] is not None else [])
            ]
            hits += any(needle.lower() in text.lower() for text in texts)
    searching.__exit__()
    clock.times["search, before its index"] = clock.times["search"]  # it has no index: every search scans
    one = clock("open one")
    one.__enter__()
    target = chosen.index[0]
    offsets = np.cumsum([0] + [pq.read_metadata(shard).num_rows for shard in shards])
    file_number = int(np.searchsorted(offsets, target, side="right") - 1)
    pd.read_parquet(shards[file_number]).iloc[target - offsets[file_number]]
    one.__exit__()
    return clock.times, (len(chosen), hits)


STEPS = (
    "open",
    "search, before its index",
    "kept after the URL",
    "open again",
    "read back after the URL",
    "filter",
    "search",
    "open one",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--shard-rows", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI: both arms and their check")
    args = parser.parse_args()
    if args.smoke:
        args.rows, args.shard_rows, args.repeats = 2_000, 500, 1
    started = time.perf_counter()
    run = synthetic_run(args.rows, args.shard_rows)
    print(f"run dir: {run} ({args.rows:,} rows, built/cached in {time.perf_counter() - started:.1f} s)")
    size = sum(path.stat().st_size for path in (run / "trajectories").iterdir())
    print(f"on disk: {size / 2**20:.0f} MiB in {len(list((run / 'trajectories').iterdir()))} shards")
    print(f"load before: {os.getloadavg()}")
    results: dict[str, list] = {"agentdata": [], "pandas": []}
    matches = {}
    for _ in range(args.repeats):  # alternating arms, so a burst of load hits both
        for name, arm in (("agentdata", agentdata_arm), ("pandas", pandas_arm)):
            times, matches[name] = arm(run)
            results[name].append(times)
        # the same rows found by the filter and the search, or the times compare different work
        same_work("bench_view", "rows matched (filter, search)", matches["agentdata"], matches["pandas"])
    print(f"load after: {os.getloadavg()}")
    print("| step | agentdata view: wall (cpu) | pandas: wall (cpu) | ratio (wall) | same matches |")
    print("|---|---|---|---|---|")
    for step in STEPS:
        ours = [statistics.median(r[step][i] for r in results["agentdata"]) for i in (0, 1)]
        theirs = [statistics.median(r[step][i] for r in results["pandas"]) for i in (0, 1)]
        ratio = f"{theirs[0] / ours[0]:.1f}x" if theirs[0] else "-"
        print(
            f"| {step} | {ours[0]:.2f} s ({ours[1]:.2f} s) | {theirs[0]:.2f} s ({theirs[1]:.2f} s) | "
            f"{ratio} | {matches['agentdata'] == matches['pandas']} |"
        )
    kept = run / ".agentdata-view"
    print("kept beside the run:", {path.name: f"{path.stat().st_size / 2**20:.0f} MiB" for path in kept.iterdir()})
    print("matches (filter, search):", matches)


if __name__ == "__main__":
    main()
