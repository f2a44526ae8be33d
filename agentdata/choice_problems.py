"""Multiple-choice problems (science): GPQA's raw columns and MMLU-Pro / SuperGPQA's `options` lists.

- GPQA (`Question`, `Correct Answer`, `Incorrect Answer 1..3`): the four answers are shuffled
  into lettered choices, deterministically per problem (the order depends only on the seed
  and the question), and the gold answer is the letter the correct one landed on;
- MMLU-Pro / SuperGPQA (`question`, `options` list, and a letter in `answer_letter` or
  `answer`, or the index in `answer_index`, or the correct option's text in `answer`).

The question lists the choices as "A) ...", one per line, and asks for the letter in
\\boxed{}; `verify` compares letters. Such problems carry `metadata.multiple_choice = True`
so `eval` reports them as multiple choice.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.inputs import kind_of
from agentdata.records import Problem, normalise_question

LETTERS = "ABCDEFGHIJKLMNOP"
GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1")
INSTRUCTION = "Answer with the letter of the correct choice, as \\boxed{LETTER}."
DEFAULT_SEED = 0


def choice_layout(columns: set[str]) -> str | None:
    if all(column in columns for column in GPQA_COLUMNS):
        return "gpqa"
    if "options" in columns and ("question" in columns or "Question" in columns):
        return "options"
    return None


def choice_problem(
    path: Path, number: int, row: dict[str, Any], layout: str, seed: int = DEFAULT_SEED, **fields: str
) -> Problem:
    if layout == "gpqa":
        question, choices, answer = _gpqa(path, number, row, seed)
    else:
        question, choices, answer = _options(path, number, row)
    text = lettered_question(question, choices)
    metadata = {"multiple_choice": True, "choices": len(choices)}
    for key in ("category", "discipline", "field", "subfield", "High-level domain", "Subdomain", "difficulty"):
        if row.get(key) not in (None, ""):
            metadata[key] = row[key]
    return Problem(
        question=text,
        answer=answer,
        id=fields.get("id") or _choice_id(text, answer),
        source=fields.get("source") or path.stem,
        domain=fields.get("domain") or "science",
        metadata=metadata,
    )


def lettered_question(question: str, choices: list[str]) -> str:
    lines = "\n".join(f"{LETTERS[index]}) {choice}" for index, choice in enumerate(choices))
    return f"{question.strip()}\n\n{lines}\n\n{INSTRUCTION}"


def shuffled_choices(
    question: str, correct: str, incorrect: list[str], seed: int = DEFAULT_SEED
) -> tuple[list[str], str]:
    """The choices in an order fixed by (seed, question), and the letter of the correct one."""
    choices = [correct, *incorrect]
    key = hashlib.sha256(f"{seed}\0{normalise_question(question)}".encode()).hexdigest()
    random.Random(key).shuffle(choices)
    return choices, LETTERS[choices.index(correct)]


def _gpqa(path: Path, number: int, row: dict[str, Any], seed: int) -> tuple[str, list[str], str]:
    question = _text(path, number, row, "Question")
    correct = _text(path, number, row, "Correct Answer")
    incorrect = [
        _text(path, number, row, f"Incorrect Answer {index}")
        for index in range(1, 10)
        if f"Incorrect Answer {index}" in row
    ]
    choices, letter = shuffled_choices(question, correct, incorrect, seed)
    return question, choices, letter


def _options(path: Path, number: int, row: dict[str, Any]) -> tuple[str, list[str], str]:
    question = row.get("question") or row.get("Question")
    if question is not None and not isinstance(question, str):
        raise InputFileError(path, f"the question in column 'question' is {kind_of(question)}, not text", row=number)
    if not question or not question.strip():
        raise InputFileError(path, "empty or missing question in column 'question'", row=number)
    options = row.get("options")
    if isinstance(options, str):
        try:
            options = json.loads(options)
        except json.JSONDecodeError:
            options = None
    if not isinstance(options, list) or not 2 <= len(options) <= len(LETTERS):
        raise InputFileError(path, f"column 'options' must be a list of 2 to {len(LETTERS)} choices", row=number)
    options = [str(option) for option in options]
    return question, options, _gold_letter(path, number, row, options)


def _gold_letter(path: Path, number: int, row: dict[str, Any], options: list[str]) -> str:
    letters = LETTERS[: len(options)]
    for key in ("answer_letter", "answer"):
        value = str(row.get(key) or "").strip().strip("()").upper()
        if len(value) == 1 and value in letters:
            return value
    if isinstance(row.get("answer_index"), int) and 0 <= row["answer_index"] < len(options):
        return letters[row["answer_index"]]
    answer = str(row.get("answer") or "").strip()
    if answer in options:
        return letters[options.index(answer)]
    raise InputFileError(
        path,
        f"no gold choice: 'answer' / 'answer_letter' must be one of {', '.join(letters)}, "
        "'answer_index' an index, or 'answer' an option's text",
        row=number,
    )


def _text(path: Path, number: int, row: dict[str, Any], column: str) -> str:
    value = row.get(column)
    if value is None or not str(value).strip():
        raise InputFileError(path, f"empty or missing {column!r}", row=number)
    return str(value).strip()


def _choice_id(question: str, answer: str) -> str:
    return hashlib.sha1(f"{normalise_question(question)}\0{answer}".encode()).hexdigest()[:16]
