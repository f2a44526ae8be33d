"""Code grading in the real sandbox: every verdict, LiveCodeBench's comparison, functional tests,
the agent loop's trajectory and the GRPO reward on a code problem."""

import asyncio
import json
import socket
import threading

import pytest

from agentdata.agent.loop import LoopConfig, solve
from agentdata.code_tests import parse_tests
from agentdata.engines.base import Engine, Generation
from agentdata.records import Problem
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.rollout import passed_fraction
from agentdata.sandbox import Sandbox
from agentdata.verify import CodeLimits, CorrectnessReward, final_program, grade, grade_code, outputs_match

LIMITS = CodeLimits(test_timeout_s=1.0, total_timeout_s=20.0, output_limit_mb=1.0)
SQUARES = parse_tests(
    json.dumps(
        [
            {"input": "2\n", "output": "4\n", "testtype": "stdin", "public": True},
            {"input": "3\n", "output": "9\n", "testtype": "stdin"},
            {"input": "10\n", "output": "100\n", "testtype": "stdin"},
        ]
    )
)
ONE = parse_tests(json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]))
ADD = parse_tests(
    json.dumps(
        [
            {"input": "1\n2", "output": "3", "testtype": "functional", "public": True},
            {"input": "[1, 2]\n3", "output": "[4, 5]", "testtype": "functional"},
        ]
    ),
    "add",
)


def answer(code):
    return f"Here is my program.\n```python\n{code}\n```\n"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=2, prefork=1) as box:
        yield box


def statuses(text, sandbox, tests=SQUARES):
    return [result.status for result in grade_code(tests, text, sandbox, LIMITS).results]


def test_right_program_passes_every_test(sandbox):
    result = grade_code(SQUARES, answer("n = int(input())\nprint(n * n)"), sandbox, LIMITS)
    assert result.correct and result.fraction == 1.0 and result.test_s > 0


def test_stdin_readers_and_main_guard(sandbox):
    code = (
        "import sys\ndef main():\n    n = int(sys.stdin.buffer.readline())\n    sys.stdout.write(f'{n*n}\\n')\n"
        "if __name__ == '__main__':\n    main()"
    )
    assert statuses(answer(code), sandbox) == ["passed"] * 3
    assert statuses(answer("print(int(open(0).read()) ** 2)"), sandbox) == ["passed"] * 3


def test_wrong_program_and_public_only_pass(sandbox):
    assert statuses(answer("print(4)"), sandbox) == ["passed", "wrong", "wrong"]
    result = grade_code(SQUARES, answer("print(4)"), sandbox, LIMITS)
    assert not result.correct and result.fraction == pytest.approx(1 / 3)
    assert [r.public for r in result.results] == [True, False, False]


def test_last_python_block_of_the_final_answer_is_graded(sandbox):
    text = answer("print(0)") + "Better:\n" + answer("print(int(input()) ** 2)")
    assert final_program(text).strip() == "print(int(input()) ** 2)"
    assert grade_code(SQUARES, text, sandbox, LIMITS).correct


def test_crash_and_syntax_error(sandbox):
    assert statuses(answer("raise ValueError('no')"), sandbox) == ["error"] * 3
    result = grade_code(SQUARES, answer("def (:"), sandbox, LIMITS)
    assert result.reason.startswith("compile error") and result.passed == 0


def test_no_code_fails_without_running(sandbox):
    result = grade_code(SQUARES, "The answer is \\boxed{4}.", sandbox, LIMITS)
    assert result.reason == "no code" and not result.correct


@pytest.mark.parametrize(
    "code",
    [
        "while True:\n    pass",
        "import time\ntime.sleep(60)",
        "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass",
    ],
)
def test_loops_and_sleeps_time_out(sandbox, code):
    assert statuses(answer(code), sandbox, ONE) == ["timeout"]


def test_output_flood_fails(sandbox):
    assert statuses(answer("while True:\n    print('x' * 4096)"), sandbox, ONE) == ["output_limit"]


def test_fork_bomb_fails_and_the_next_program_still_runs(sandbox):
    assert not grade_code(ONE, answer("import os\nwhile True:\n    os.fork()"), sandbox, LIMITS).correct
    assert grade_code(SQUARES, answer("print(int(input()) ** 2)"), sandbox, LIMITS).correct


def test_a_hard_crash_fails_only_its_own_test(sandbox):
    code = "import ctypes\nn = int(input())\nif n == 3:\n    ctypes.string_at(0)\nprint(n * n)"
    assert statuses(answer(code), sandbox) == ["passed", "crash", "passed"]


def test_network_attempt_fails_and_reaches_nothing(sandbox):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.settimeout(0.5)
    port = listener.getsockname()[1]
    accepted = []
    thread = threading.Thread(target=lambda: _accept(listener, accepted))
    thread.start()
    code = (
        f"import socket\nsocket.create_connection(('127.0.0.1', {port}), "
        f"timeout=0.5).sendall(b'x')\nprint(int(input()) ** 2)"
    )
    try:
        assert statuses(answer(code), sandbox, ONE) == ["error"]
    finally:
        thread.join()
        listener.close()
    assert accepted == []


def _accept(listener, accepted):
    try:
        accepted.append(listener.accept())
    except OSError:
        pass


def test_whitespace_tolerance_like_livecodebench():
    assert outputs_match("4  \r\n\n\n", "4\n")
    assert outputs_match("  1 2\n3\n", "1 2\n3")
    assert outputs_match("1.0 2", "1.00 2")  # LiveCodeBench compares differing lines as decimals
    assert not outputs_match("1 2", "12")
    assert not outputs_match("4\n5", "4")
    assert not outputs_match("Yes", "yes")


def test_functional_tests_compare_values(sandbox):
    method = (
        "class Solution:\n    def add(self, a, b):\n        return [x + b for x in a] if isinstance(a, list) else a + b"
    )
    plain = "def add(a, b):\n    return tuple(x + b for x in a) if isinstance(a, list) else a + b"
    assert statuses(answer(method), sandbox, ADD) == ["passed", "passed"]
    assert statuses(answer(plain), sandbox, ADD) == ["passed", "passed"]  # a tuple equals the JSON list
    assert statuses(answer("def add(a, b):\n    return str(a)"), sandbox, ADD) == ["wrong", "wrong"]


# --------------------------------------------------------------------------- everywhere a problem is graded

PROBLEM = Problem("Print n squared.", SQUARES.to_answer(), domain="code", source="unit")


class ProgramEngine(Engine):
    spec = "program"

    def __init__(self, code):
        self.code = code

    async def generate(self, request):
        return Generation(answer(self.code), None, "stop", 10, 20)


def test_grade_entry_point_for_code_and_math(sandbox):
    verdict = grade(PROBLEM, answer("print(4)"), sandbox, LIMITS)
    assert not verdict.correct and verdict.score == pytest.approx(1 / 3)
    assert verdict.details["passed"] == 1 and verdict.details["total"] == 3
    assert grade(Problem("1+1?", "2"), "\\boxed{2}").correct


def test_agent_loop_records_correct_and_per_test_results(sandbox):
    trajectory = asyncio.run(solve(PROBLEM, ProgramEngine("print(int(input()) ** 2)"), sandbox, LoopConfig()))
    assert trajectory.correct and trajectory.final_answer.strip() == "print(int(input()) ** 2)"
    tests = trajectory.metadata["tests"]
    assert tests["passed"] == 3 and [r["status"] for r in tests["results"]] == ["passed"] * 3
    assert trajectory.timings["test_s"] > 0


def test_grpo_reward_on_a_code_problem(sandbox):
    trajectory = asyncio.run(solve(PROBLEM, ProgramEngine("print(4)"), sandbox, LoopConfig()))
    fraction = passed_fraction(trajectory)
    assert fraction == pytest.approx(1 / 3) and not trajectory.correct
    binary = CorrectnessReward()
    partial = CorrectnessReward(fraction=True)
    kwargs = {"correct": [trajectory.correct], "num_tool_calls": [0], "passed_fraction": [fraction]}
    assert binary([None], [None], **kwargs) == [-1.0]
    assert partial([None], [None], **kwargs) == [pytest.approx(-1 / 3)]
    math_row = {"correct": [True], "num_tool_calls": [0], "passed_fraction": [None]}
    assert partial([None], [None], **math_row) == [1.0]
    assert CorrectnessReward.from_settings(GRPOStageConfig(code_reward="fraction")).fraction
    assert not CorrectnessReward.from_settings(GRPOStageConfig()).fraction


def test_builtin_code_problems_are_solvable(sandbox):
    from agentdata.synth.code_builtin import builtin_code_problems

    problems = {p.metadata["task"]: p for p in builtin_code_problems()}
    solutions = {
        "sum_two": "a, b = map(int, input().split())\nprint(a + b)",
        "fizzbuzz": "n = int(input())\nfor k in range(1, n + 1):\n"
        "    print('FizzBuzz' if k % 15 == 0 else 'Fizz' if k % 3 == 0 else 'Buzz' if k % 5 == 0 else k)",
        "two_sum": "class Solution:\n    def two_sum(self, nums, target):\n        seen = {}\n"
        "        for i, x in enumerate(nums):\n            if target - x in seen:\n"
        "                return [seen[target - x], i]\n            seen[x] = i",
    }
    for task, code in solutions.items():
        assert grade(problems[task], answer(code), sandbox, LIMITS).correct, task


def test_eval_scores_code_benchmarks_in_their_layouts_without_flags(sandbox, tmp_path):
    from agentdata.evaluation.runner import EvalConfig, run_eval

    lcb = tmp_path / "lcb.jsonl"
    lcb.write_text(
        json.dumps(
            {
                "question_content": "Print n squared.",
                "starter_code": "",
                "question_id": "q1",
                "public_test_cases": json.dumps([{"input": "2\n", "output": "4\n", "testtype": "stdin"}]),
                "private_test_cases": json.dumps([{"input": "5\n", "output": "25\n", "testtype": "stdin"}]),
                "metadata": "{}",
            }
        )
        + "\n"
    )
    taco = tmp_path / "taco.jsonl"
    taco.write_text(
        json.dumps(
            {
                "question": "Print n squared.",
                "input_output": json.dumps({"inputs": ["3\n", "4\n"], "outputs": ["9\n", "17\n"]}),
            }
        )
        + "\n"
    )  # the second test expects a wrong value
    report = run_eval(
        ["squares"],
        [lcb, taco],
        tmp_path / "eval",
        EvalConfig(samples=2, tool_call_budgets=[0]),
        engine_factory=lambda spec: ProgramEngine("print(int(input()) ** 2)"),
        sandbox=sandbox,
    )
    by_name = {result.benchmark: result.metrics for result in report.results}
    assert by_name["lcb"].kind == "code" and by_name["lcb"].avg_at_k == 1.0 and by_name["lcb"].maj_at_k == 1.0
    assert by_name["taco"].avg_at_k == 0.0 and by_name["taco"].mean_passed_fraction == 0.5
    assert by_name["lcb"].mean_test_s > 0
