"""`agentdata eval`'s report over a finished run: 1M responses (250k problems × k=4), nothing to generate.

The eval folder holds a complete run of the model on the benchmark (as after a long eval, or a
rerun to redraw the report), so the command reads the benchmark, plans the resume (nothing to
do), scores every response (avg@k, pass@k, maj@k with answer equivalence, tool use, lengths) and
writes report.json and the plot. Measured as a user runs it (`agentdata eval` in a child
process: wall time and peak RSS), with a same-run baseline: the same command from another
checkout (`--baseline-ref`, e.g. the commit before the speed-ups), alternating, on the same
files; both reports must hold the same numbers (else the bench stops).

    python bench/bench_eval.py --problems 250000 --baseline-ref 8ec58c5 [--profile 15]
    python bench/bench_eval.py --smoke
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from arms import compare_checkouts, load, run_child, same_work  # noqa: E402
from bench_curate import synthetic_questions  # noqa: E402
from bench_filter import problem_hash  # noqa: E402

from agentdata.records import MESSAGES_TYPE, Trajectory, arrow_schema  # noqa: E402

CACHE = Path(tempfile.gettempdir()) / "agentdata-bench-eval"  # TMPDIR moves it
MODEL = "openai:http://127.0.0.1:9/v1"  # never called: every response is in the run dir
K = 4


def run_dir_of(out: Path, benchmark: Path) -> Path:
    """Where `agentdata eval MODEL BENCHMARK --out OUT --k K` keeps its run (the command's own rule)."""
    from agentdata.evaluation.config import EvalConfig
    from agentdata.evaluation.runner import benchmark_names, benchmark_run_dir, parse_model_specs

    config = EvalConfig(samples=K)
    [model] = parse_model_specs([MODEL])
    [name] = benchmark_names([benchmark])
    return benchmark_run_dir(out, model, name, config.collect_config(MODEL, config.tool_call_budgets[0]))


def synthetic_eval(problems: int, shard_rows: int = 200_000) -> tuple[Path, Path]:
    """(benchmark JSONL, an eval folder holding a complete run of k responses per problem), cached. Each
    problem has its own solve rate; a wrong response gives one of three wrong answers of its own problem (so
    votes split), written as a number, a fraction or with spaces (so the vote needs the equivalence of
    answers, math-verify's included)."""
    folder = CACHE / f"problems-{problems}-v2"
    benchmark, out = folder / "bench.jsonl", folder / "eval"
    if (folder / "done").exists():
        return benchmark, out
    questions = synthetic_questions(problems, seed=7)
    answers = [str(index % 97) for index in range(problems)]
    folder.mkdir(parents=True, exist_ok=True)
    with open(benchmark, "w", encoding="utf-8") as handle:
        for index, (question, answer) in enumerate(zip(questions, answers)):
            handle.write(json.dumps({"id": f"p{index}", "question": question, "answer": answer}) + "\n")
    hashes = [problem_hash(q, a) for q, a in zip(questions, answers)]
    run = run_dir_of(out, benchmark) / "trajectories"
    run.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(8)
    solve_rate = rng.random(problems)
    rows = problems * K
    for start in range(0, rows, shard_rows):
        index = np.arange(start, min(rows, start + shard_rows))
        problem, sample = index // K, index % K
        count = len(index)
        correct = rng.random(count) < solve_rate[problem]
        wrong = rng.integers(0, 3, count)
        spelled = rng.integers(0, 3, count)
        wrong_value = (problem * 7 + 100 + wrong) % 10_007  # a problem's own wrong answers, as in real runs
        final = [
            answers[p] if c else (str(v), f"{2 * v}/2", f" {v} ")[s]
            for p, c, v, s in zip(problem, correct, wrong_value, spelled)
        ]
        calls = rng.integers(0, 3, count)
        messages = [
            [{"role": "user", "content": questions[p]}]
            + [
                message
                for call in range(n)
                for message in (
                    {
                        "role": "assistant",
                        "content": "Let me compute.",
                        "tool_calls": [
                            {
                                "id": f"call_{call}",
                                "type": "function",
                                "function": {
                                    "name": "code_interpreter",
                                    "arguments": json.dumps({"code": f"print({p})"}),
                                },
                            }
                        ],
                    },
                    {"role": "tool", "content": str(p), "tool_call_id": f"call_{call}", "name": "code_interpreter"},
                )
            ]
            + [{"role": "assistant", "content": f"So \\boxed{{{answer}}}."}]
            for p, n, answer in zip(problem, calls, final)
        ]
        columns = {
            "id": [f"p{p}-{s}" for p, s in zip(problem, sample)],
            "problem_id": [f"p{p}" for p in problem],
            "question": [questions[p] for p in problem],
            "answer": [answers[p] for p in problem],
            "messages": pa.array(messages, type=MESSAGES_TYPE),
            "source": ["unknown"] * count,
            "domain": ["math"] * count,
            "tools": ["[]"] * count,
            "final_answer": final,
            "correct": correct.tolist(),
            "num_tool_calls": calls.tolist(),
            "num_tool_errors": (calls * (rng.random(count) < 0.2)).clip(0, 1).tolist(),
            "num_turns": (calls + 1).tolist(),
            "finish_reason": ["answer"] * count,
            "prompt_tokens": [60] * count,
            "completion_tokens": rng.integers(20, 400, count).tolist(),
            "teacher": [MODEL] * count,
            "format": ["hermes"] * count,
            "sampling": [json.dumps({"sample_index": int(s)}) for s in sample],
            "timings": ["{}"] * count,
            "error": [None] * count,
            "metadata": [json.dumps({"problem_hash": hashes[p]}) for p in problem],
        }
        table = pa.table(columns, schema=arrow_schema(Trajectory))
        pq.write_table(table, run / f"part-{start // shard_rows:05d}.parquet")
    (folder / "done").write_text("ok")
    return benchmark, out


def eval_arguments(benchmark: Path, out: Path) -> list[str]:
    return ["-m", "agentdata.cli.app", "eval", MODEL, str(benchmark), "--out", str(out), "--k", str(K), "--json"]


def one_eval(checkout: Path, benchmark: Path, out: Path, work: Path, profile_to: Path | None) -> dict:
    """The eval on a copy of the folder (an eval writes its report, plot and the run's stats there)."""
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(out, work)
    seconds, peak_gb, stdout = run_child(checkout, eval_arguments(benchmark, work), profile_to)
    [result] = json.loads(stdout[stdout.index("{") :])["results"]
    if result["cache"]["generated"]:
        raise SystemExit(
            f"bench_eval: eval generated {result['cache']['generated']} responses: the run is not complete"
        )
    numbers = {key: value for key, value in result.items() if key not in ("run_dir", "cache")}
    return {"seconds": round(seconds, 1), "peak_rss_gb": round(peak_gb, 2), "result": numbers, "load": load()}


def rounded(value):
    """Numbers to 9 decimals (sums taken in another order may differ in the last bits), recursively."""
    if isinstance(value, float):
        return round(value, 9)
    if isinstance(value, dict):
        return {key: rounded(item) for key, item in value.items()}
    if isinstance(value, list):
        return [rounded(item) for item in value]
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", type=int, default=250_000, help=f"problems; the run holds {K} responses each")
    parser.add_argument("--baseline-ref", help="time the same command from this commit too (e.g. 8ec58c5)")
    parser.add_argument("--rounds", type=int, default=1, help="alternating rounds of the arms")
    parser.add_argument("--profile", type=int, metavar="N", help="run each arm once more under cProfile: top N")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.problems = 300
    benchmark, out = synthetic_eval(args.problems)
    print(f"data: {args.problems:,} problems, {args.problems * K:,} responses in {out}; load {load()}", flush=True)

    def run_one(name: str, checkout: Path, profile_to: Path | None) -> dict:
        return one_eval(checkout, benchmark, out, CACHE / f"work-{name}", profile_to)

    def check(ours: dict, theirs: dict) -> None:
        ours, theirs = ours["result"], theirs["result"]
        shared = sorted(ours.keys() & theirs.keys())  # a newer report may add numbers; the shared ones must agree
        same_work(
            "bench_eval",
            "the reported numbers",
            rounded({k: ours[k] for k in shared}),
            rounded({k: theirs[k] for k in shared}),
        )

    compare_checkouts("eval", args, CACHE, run_one, check)


if __name__ == "__main__":
    main()
