"""Code problems in the layouts people have, recognised by their columns (used by problems.py).

- LiveCodeBench `code_generation_lite`: `question_content`, `starter_code`,
  `public_test_cases`, `private_test_cases` (plain or compressed), `metadata.func_name`;
- CodeContests (deepmind/code_contests): `description`, `public_tests`, `private_tests`,
  `generated_tests` (each `{input: [...], output: [...]}`), compared by its own token rule;
- TACO / APPS: `question` + `input_output` (`inputs`, `outputs`, optional `fn_name`);
- DeepCoder / PRIME / verl: `tests`, or `reward_model.ground_truth` holding such tests as
  JSON on a row whose `ability` / `domain` is code (or whose gold is plainly a test list);
- HumanEval(+), EvalPlus, MBPP(+), BigCodeBench, KodCode, whose tests are code: see code_benchmarks.

Each becomes a Problem with domain `code`, the question followed by LiveCodeBench's answer
format (the program in a ```python block), and `answer` = the tests (see code_tests). Its id
hashes the question and the tests, so two problems that differ only in tests stay apart.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from agentdata.code_benchmarks import BENCHMARK_LAYOUTS, benchmark_layout, benchmark_problem
from agentdata.code_tests import BadTestsError, CodeTests, parse_tests
from agentdata.errors import InputFileError
from agentdata.records import Problem, normalise_question

CODE_DOMAINS = ("code", "coding", "codegen", "programming")
LIVECODEBENCH_COLUMNS = ("question_content", "public_test_cases")
CODECONTESTS_COLUMNS = ("description", "public_tests", "private_tests")
CODECONTESTS_TESTS = {"public_tests": True, "private_tests": False, "generated_tests": False}  # column -> shown
CODECONTESTS_TIME_LIMIT_S = 10.0  # its tester's default execution limit (execution/tester_sandboxer.h)
__all__ = ["BENCHMARK_LAYOUTS", "benchmark_problem", "code_layout", "code_problem", "is_code_row"]

STDIN_FORMAT = (
    "Read the inputs from stdin, solve the problem and write the answer to stdout. "
    "Give your final program in one ```python code block at the end of your answer."
)
FUNCTION_FORMAT = (
    "Write the function `{func_name}` (a plain function, or a method of `class Solution`) and give your "
    "final program in one ```python code block at the end of your answer."
)
STARTER_FORMAT = (
    "Use the starter code below and give your final program (the complete class or function) "
    "in one ```python code block at the end of your answer."
)


def code_layout(columns: set[str]) -> str | None:
    """Which code layout a file's columns show, or None for a file of other problems."""
    benchmark = benchmark_layout(columns)
    if benchmark:
        return benchmark
    if all(column in columns for column in CODECONTESTS_COLUMNS):
        return "codecontests"
    if all(column in columns for column in LIVECODEBENCH_COLUMNS):
        return "livecodebench"
    if "input_output" in columns:
        return "taco"
    if "tests" in columns:
        return "tests"
    return None


def is_code_row(row: dict[str, Any], gold: Any, domain: Any) -> bool:
    """A row of a mixed (verl-style) file that is a code problem: by its domain, else by its gold's shape."""
    if str(domain or "").strip().lower() in CODE_DOMAINS:
        return True
    if not isinstance(gold, str) or not gold.lstrip().startswith(("{", "[")):
        return False
    try:
        data = json.loads(gold)
    except json.JSONDecodeError:
        return False
    if isinstance(data, dict):
        return "inputs" in data and "outputs" in data or isinstance(data.get("tests"), (list, str))
    return bool(data) and isinstance(data, list) and all(isinstance(i, dict) and "input" in i for i in data)


def code_problem(
    path: Path,
    number: int,
    row: dict[str, Any],
    layout: str,
    question: str,
    tests_field: str,
    metadata: dict[str, Any],
    **fields: str,
) -> Problem:
    """A code Problem from one row; a test field that cannot be read is an InputFileError naming it."""
    func_name = _func_name(row, metadata)
    if layout == "livecodebench":
        tests = _livecodebench_tests(path, number, row, func_name)
    elif layout == "codecontests":
        tests = _codecontests_tests(path, number, row)
        # Its `source` column is the contest platform (an enum number), not where the problems come from.
        fields = {**fields, "id": fields.get("id") or str(row.get("name") or ""), "source": ""}
        metadata = {**metadata, "benchmark": "codecontests", "platform": row.get("source")}
    else:
        tests = _read_field(path, number, tests_field, row_value(row, tests_field), func_name)
    starter = str(row.get("starter_code") or "").strip()
    text = with_answer_format(question, starter, tests.func_name)
    if tests.func_name:
        metadata = {**metadata, "func_name": tests.func_name}
    return Problem(
        question=text,
        answer=tests.to_answer(),
        id=fields.get("id") or code_problem_id(text, tests),
        source=fields.get("source") or path.stem,
        domain="code",
        metadata=metadata,
    )


def _livecodebench_tests(path: Path, number: int, row: dict[str, Any], func_name: str | None) -> CodeTests:
    public = _read_field(path, number, "public_test_cases", row.get("public_test_cases"), func_name, public=True)
    private_value = row.get("private_test_cases")
    if private_value in (None, "", "[]", []):
        return public
    private = _read_field(path, number, "private_test_cases", private_value, public.func_name or func_name)
    return CodeTests(public.tests + private.tests, public.func_name or private.func_name)


def _codecontests_tests(path: Path, number: int, row: dict[str, Any]) -> CodeTests:
    """Public, private and generated tests, every one graded (as its tester does), by its output rule."""
    tests: list[dict[str, Any]] = []
    for column, public in CODECONTESTS_TESTS.items():
        value = row.get(column)
        if isinstance(value, str):
            try:
                value = json.loads(value) if value.strip() else None
            except json.JSONDecodeError:
                raise InputFileError(path, f"column {column!r}: not JSON", row=number) from None
        if value in (None, [], {}):
            continue
        if (
            not isinstance(value, dict)
            or not isinstance(value.get("input"), list)
            or not isinstance(value.get("output"), list)
        ):
            raise InputFileError(path, f"column {column!r}: expected {{input: [...], output: [...]}}", row=number)
        if len(value["input"]) != len(value["output"]):
            raise InputFileError(path, f"column {column!r}: as many inputs as outputs are needed", row=number)
        for given, expected in zip(value["input"], value["output"]):
            tests.append({"input": str(given), "output": str(expected), "testtype": "stdin", "public": public})
    if not tests:
        raise InputFileError(path, "a CodeContests problem without tests", row=number)
    return CodeTests(tests, compare="codecontests", time_limit_s=CODECONTESTS_TIME_LIMIT_S)


def _read_field(
    path: Path, number: int, name: str, value: Any, func_name: str | None, public: bool = False
) -> CodeTests:
    if value is None:
        raise InputFileError(path, f"code problem without tests in column {name!r}", row=number)
    try:
        return parse_tests(value, func_name, public)
    except (BadTestsError, json.JSONDecodeError) as error:
        raise InputFileError(path, f"column {name!r}: cannot read the tests: {error}", row=number) from None


def _func_name(row: dict[str, Any], metadata: dict[str, Any]) -> str | None:
    name = metadata.get("func_name") or metadata.get("fn_name") or row.get("func_name") or row.get("fn_name")
    return str(name) if name else None


def row_value(row: dict[str, Any], key: str) -> Any:
    if key in row:
        return row[key]
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def with_answer_format(question: str, starter_code: str, func_name: str | None = None) -> str:
    """The question as LiveCodeBench poses it: the task, then how to give the program (once)."""
    if "```python" in question:  # e.g. read back from an RL pool: already says how
        return question
    if starter_code:
        return f"{question.rstrip()}\n\n{STARTER_FORMAT}\n\n```python\n{starter_code}\n```"
    if func_name:
        return f"{question.rstrip()}\n\n{FUNCTION_FORMAT.format(func_name=func_name)}"
    return f"{question.rstrip()}\n\n{STDIN_FORMAT}"


def code_problem_id(question: str, tests: CodeTests) -> str:
    digest = hashlib.sha1(normalise_question(question).encode("utf-8"))
    digest.update(b"\0" + tests.to_answer().encode("utf-8"))
    return digest.hexdigest()[:16]
