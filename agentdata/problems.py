"""Load problems from the file layouts people already have.

Recognised without flags: JSONL, JSON (a list, or {"data": [...]}), Parquet, CSV, and a
directory saved with `datasets.save_to_disk`; columns named as in the common math and
RL datasets (see QUESTION_FIELDS and ANSWER_FIELDS). A dotted name such as
`reward_model.ground_truth` reaches into nested columns. A verl-style `prompt` column of
chat messages gives its last user message as the question. Code problems (LiveCodeBench,
TACO/APPS, DeepCoder/verl tests, CodeContests; HumanEval(+), MBPP(+), BigCodeBench and KodCode, whose
tests are code) are read by `agentdata.code_problems`, multiple-choice ones (GPQA,
MMLU-Pro, SuperGPQA) by `agentdata.choice_problems`.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from agentdata.choice_problems import choice_layout, choice_problem
from agentdata.code_problems import BENCHMARK_LAYOUTS, benchmark_problem, code_layout, code_problem, is_code_row
from agentdata.errors import InputFileError
from agentdata.inputs import kind_of, read_nonempty_rows
from agentdata.records import Problem

QUESTION_FIELDS = ("question", "problem", "Problem", "Question", "prompt", "query")
ANSWER_FIELDS = ("answer", "Answer", "reward_model.ground_truth", "ground_truth", "solution", "final_answer")
ID_FIELDS = ("id", "problem_id", "question_id", "ID", "Record ID")
SOURCE_FIELDS = ("source", "data_source")
DOMAIN_FIELDS = ("domain", "ability")


def load_problems(
    path: str | os.PathLike,
    question_field: str | None = None,
    answer_field: str | None = None,
    require_answer: bool = True,
) -> list[Problem]:
    """Read every problem in `path`; raise InputFileError with file and row on bad input."""
    path = Path(path)
    return problems_from_rows(path, read_nonempty_rows(path), question_field, answer_field, require_answer)


def problems_from_rows(
    path: Path,
    rows: list[dict[str, Any]],
    question_field: str | None = None,
    answer_field: str | None = None,
    require_answer: bool = True,
) -> list[Problem]:
    """Problems from rows already read from `path` (named in errors), with the same column rules."""
    columns = columns_of(rows)
    layout = code_layout(columns) if answer_field is None else None
    if layout in BENCHMARK_LAYOUTS:  # the question is built from the benchmark's own columns
        if question_field:
            pick_column(path, columns, question_field, (), "question", "--question-field")
        return [
            benchmark_problem(path, number, row, layout, question_field, _given(row))
            for number, row in enumerate(rows, 1)
        ]
    question_key = pick_column(
        path,
        columns,
        question_field,
        ("question_content", "description", *QUESTION_FIELDS) if layout else QUESTION_FIELDS,
        "question",
        "--question-field",
    )
    if layout:
        tests_key = {"taco": "input_output", "tests": "tests"}.get(layout, "public_test_cases")
        return [_to_problem(path, number, row, question_key, tests_key, layout) for number, row in enumerate(rows, 1)]
    choices = choice_layout(columns) if answer_field is None else None
    if choices:
        return [choice_problem(path, number, row, choices, **_given(row)) for number, row in enumerate(rows, 1)]
    answer_key = pick_column(
        path, columns, answer_field, ANSWER_FIELDS, "answer", "--answer-field", required=require_answer
    )
    return [_to_problem(path, number, row, question_key, answer_key) for number, row in enumerate(rows, start=1)]


# --------------------------------------------------------------------------- columns


def get_field(row: dict[str, Any], key: str) -> Any:
    """Look up `key`, reaching into nested dicts for dotted names."""
    if key in row:
        return row[key]
    value: Any = row
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def columns_of(rows: list[dict[str, Any]]) -> set[str]:
    names: set[str] = set()
    for row in rows[:100]:
        for key, value in row.items():
            names.add(key)
            if isinstance(value, dict):
                names.update(f"{key}.{inner}" for inner in value)
    return names


def pick_column(
    path: Path,
    columns: set[str],
    chosen: str | None,
    candidates: tuple[str, ...],
    what: str,
    flag: str,
    required: bool = True,
) -> str | None:
    if chosen:
        if chosen not in columns:
            raise InputFileError(path, f"no column {chosen!r} (given by {flag}); columns are {sorted(columns)}")
        return chosen
    for name in candidates:
        if name in columns:
            return name
    if not required:
        return None
    raise InputFileError(
        path,
        f"no {what} column (looked for {', '.join(candidates)}); columns are {sorted(columns)}; name it with {flag}",
    )


def _first(row: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        value = get_field(row, name)
        if value not in (None, ""):
            return value
    return None


def _question_text(path: Path, number: int, value: Any, column: str) -> str:
    """A question may be plain text or chat messages (verl's `prompt`): take the last user turn.
    Anything else is refused saying what it is, not reported as missing."""
    if isinstance(value, list):
        user_turns = [m.get("content") for m in value if isinstance(m, dict) and m.get("role") == "user"]
        if not user_turns:
            raise InputFileError(
                path, f"the question in column {column!r} is a list with no user message (role 'user')", row=number
            )
        value = user_turns[-1]
    if value is not None and not isinstance(value, str):
        raise InputFileError(path, f"the question in column {column!r} is {kind_of(value)}, not text", row=number)
    if value is None or not value.strip():
        raise InputFileError(path, f"empty or missing question in column {column!r}", row=number)
    return value


def _answer_text(path: Path, number: int, value: Any, column: str) -> str | None:
    """A gold answer is text or a number (42 is "42"); an object, list or boolean is refused rather than
    stored as its Python repr, which no answer would ever match. None when empty."""
    if isinstance(value, float) and math.isnan(value):  # a null as pandas writes it
        return None
    if isinstance(value, (dict, list, bool)):
        raise InputFileError(
            path, f"the answer in column {column!r} is {kind_of(value)}; expected text or a number", row=number
        )
    if value is None or str(value).strip() == "":
        return None
    return str(value)


def _to_problem(
    path: Path, number: int, row: dict[str, Any], question_key: str, answer_key: str | None, code: str | None = None
) -> Problem:
    question = _question_text(path, number, get_field(row, question_key), question_key)
    answer = get_field(row, answer_key) if answer_key else ""
    if code or (answer_key and is_code_row(row, answer, _first(row, DOMAIN_FIELDS))):
        return code_problem(
            path, number, row, code or "tests", str(question), answer_key or "tests", _metadata(row), **_given(row)
        )
    answer = _answer_text(path, number, answer, answer_key) if answer_key else ""
    if answer is None:
        raise InputFileError(path, f"empty or missing answer in column {answer_key!r}", row=number)
    return Problem(
        question=str(question),
        answer=str(answer),
        id=str(_first(row, ID_FIELDS) or ""),
        source=str(_first(row, SOURCE_FIELDS) or path.stem),
        domain=str(_first(row, DOMAIN_FIELDS) or "math"),
        metadata=_metadata(row),
    )


def _given(row: dict[str, Any]) -> dict[str, str]:
    """The id, source and domain a row names itself ("" when it does not)."""
    return {
        "id": str(_first(row, ID_FIELDS) or ""),
        "source": str(_first(row, SOURCE_FIELDS) or ""),
        "domain": str(_first(row, DOMAIN_FIELDS) or ""),
    }


def _metadata(row: dict[str, Any]) -> dict[str, Any]:
    metadata = get_field(row, "extra_info") or get_field(row, "metadata") or {}
    if isinstance(metadata, str):
        try:
            metadata = json.loads(metadata)
        except json.JSONDecodeError:
            metadata = {"text": metadata}
    return metadata if isinstance(metadata, dict) else {"value": metadata}
