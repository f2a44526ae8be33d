"""Code-grading throughput: tests run per second, agentdata's sandbox grader against plain subprocesses.

    python bench/bench_grading.py --programs 1000 --tests 10 --baseline-programs 200

Each program is a small stdin program (a few templates with different constants, so every
program text differs) graded against `--tests` stdin tests:
- agentdata: `verify.grade_code` in the local sandbox, all isolation on (own uid, private
  /tmp, no network), the tests of a program batched into one isolated call;
- baseline, in the same run: every test as its own plain `python prog.py < input`
  subprocess with a time limit (the style of LiveCodeBench's and most RL harnesses'
  per-test execution), outputs compared by the same rule.
Both use the same number of concurrent graders. Prints a Markdown table with the ratio.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

from arms import same_work  # noqa: E402

from agentdata.code_tests import CodeTests  # noqa: E402
from agentdata.sandbox import Sandbox  # noqa: E402
from agentdata.verify.code import CodeLimits, grade_code, outputs_match  # noqa: E402

TEMPLATES = (
    ("n = int(input())\nprint(n * {k} + {c})", lambda n, k, c: n * k + c),
    (
        "import sys\nvalues = [int(x) for x in sys.stdin.read().split()]\nprint(sum(values) * {k} - {c})",
        lambda n, k, c: n * k - c,
    ),
    (
        "n = int(input())\ntotal = 0\nfor i in range(n % 50 + {k}):\n    total += i\nprint(total + {c})",
        lambda n, k, c: sum(range(n % 50 + k)) + c,
    ),
    (
        "def main():\n    n = int(input())\n    print(max(n, {k}) - min(n, {c}))\n\n"
        "if __name__ == '__main__':\n    main()",
        lambda n, k, c: max(n, k) - min(n, c),
    ),
)


def make_programs(count: int, tests: int) -> list[tuple[str, CodeTests]]:
    programs = []
    for index in range(count):
        source, expected = TEMPLATES[index % len(TEMPLATES)]
        k, c = index // len(TEMPLATES) + 1, index % 7
        cases = [
            {"input": f"{n}\n", "output": f"{expected(n, k, c)}\n", "testtype": "stdin", "public": False}
            for n in range(1, tests + 1)
        ]
        programs.append((source.format(k=k, c=c), CodeTests(cases)))
    return programs


def run_agentdata(programs, workers: int, limits: CodeLimits) -> tuple[float, int, dict]:
    with Sandbox(workers=workers, prefork=workers) as sandbox:
        grade_code(programs[0][1], f"```python\n{programs[0][0]}\n```", sandbox, limits)  # warm-up, not timed
        started = time.perf_counter()
        with ThreadPoolExecutor(workers * 2) as pool:
            grades = list(pool.map(lambda p: grade_code(p[1], f"```python\n{p[0]}\n```", sandbox, limits), programs))
        elapsed = time.perf_counter() - started
        isolation = sandbox.isolation
    return elapsed, sum(g.passed for g in grades), isolation


def run_baseline(programs, workers: int, timeout_s: float, python: list[str]) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for index, (source, _) in enumerate(programs):
            path = Path(folder) / f"prog{index}.py"
            path.write_text(source)
            paths.append(path)
        jobs = [(path, test) for path, (_, tests) in zip(paths, programs) for test in tests.tests]
        started = time.perf_counter()
        with ThreadPoolExecutor(workers * 2) as pool:
            passed = sum(pool.map(lambda job: _one_subprocess(python, job[0], job[1], timeout_s), jobs))
        return time.perf_counter() - started, passed


def _one_subprocess(python: list[str], path: Path, test: dict, timeout_s: float) -> bool:
    try:
        done = subprocess.run(
            [*python, str(path)], input=test["input"], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0 and outputs_match(done.stdout, test["output"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--programs", type=int, default=1000)
    parser.add_argument("--tests", type=int, default=10)
    parser.add_argument(
        "--baseline-programs",
        type=int,
        default=200,
        help="Programs the baseline runs (its rate is per test, so a subset measures it).",
    )
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--baseline-python",
        default=sys.executable,
        help="The interpreter (and flags) of the baseline, e.g. '/usr/bin/python3 -I -S'.",
    )
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.programs, args.tests, args.baseline_programs = 8, 2, 4
    limits = CodeLimits(test_timeout_s=6.0, total_timeout_s=120.0)
    programs = make_programs(args.programs, args.tests)
    ours_s, ours_passed, isolation = run_agentdata(programs, args.workers, limits)
    base_programs = programs[: args.baseline_programs]
    base_s, base_passed = run_baseline(base_programs, args.workers, limits.test_timeout_s, args.baseline_python.split())
    ours_tests, base_tests = args.programs * args.tests, len(base_programs) * args.tests
    # every program is right by construction: both graders must pass all they ran, or they ran something else
    same_work("bench_grading", "tests passed (agentdata)", ours_passed, ours_tests)
    same_work("bench_grading", "tests passed (baseline)", base_passed, base_tests)
    ours_rate, base_rate = ours_tests / ours_s, base_tests / base_s
    print(f"load average {os.getloadavg()[0]:.1f}; workers {args.workers}; isolation {isolation}")
    print("| grader | programs x tests | passed | seconds | tests/s |")
    print("|---|---|---|---|---|")
    print(
        f"| agentdata sandbox (batched, isolated) | {args.programs} x {args.tests} | {ours_passed} | {ours_s:.1f} | "
        f"{ours_rate:.0f} |"
    )
    print(
        f"| plain `{args.baseline_python}` subprocess per test | {len(base_programs)} x "
        f"{args.tests} | {base_passed} | {base_s:.1f} | "
        f"{base_rate:.0f} |"
    )
    print(f"\nratio: {ours_rate / base_rate:.1f}x")


if __name__ == "__main__":
    main()
