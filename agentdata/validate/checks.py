"""The checks of one problem, each a named finding: what makes a problem broken before any model sees it.

- `gold_unparseable`: math-verify reads nothing in the gold (plain numbers and letters, which the
  quick rules settle, always read); for a code problem, its tests cannot be read or there are none;
- `trivial_gold`: a response that says nothing (empty, an empty box) or only repeats the question is
  graded correct (the question gives the answer away);
- `choice_not_listed`: a letter gold the question's lettered choices do not hold (or past the
  number of choices the problem says it has);
- `empty_program_passes`: a program that does nothing passes every code test;
- `reference_fails`: the problem's own reference solution fails its tests;
- `ungradable`: the sandbox cannot run the tests (a library they import is missing there).

Grading is verify's (`is_correct`, `grade_code`), so the checks judge exactly what training and
evaluation will reward.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agentdata.code_tests import code_tests_of
from agentdata.records import Problem
from agentdata.verify.answers import DEFAULT_TIMEOUT_S, gold_answer, is_correct
from agentdata.verify.code import CodeGrade, grade_code
from agentdata.verify.quick import choice_letter, normalise, parse_number
from agentdata.verify.workers import shared_pool

_LISTED_CHOICE = re.compile(r"^\s*\(?([A-P])[).:]\s", re.MULTILINE)
LETTERS = "ABCDEFGHIJKLMNOP"
EMPTY_PROGRAMS = (("an empty program", "pass"), ("a program that prints nothing but a newline", "print()"))
# Columns other code datasets keep a reference solution in (TACO and APPS: a JSON list of programs).
REFERENCE_COLUMNS = ("reference_solution", "solutions", "solution")


@dataclass
class Finding:
    check: str
    detail: str


def problem_findings(problem: Problem, row: dict[str, Any], sandbox: Any) -> list[Finding]:
    """Every finding for one problem (its raw row gives a reference solution, if it has one)."""
    if problem.domain == "code":
        return code_findings(problem, reference_solution(problem, row), sandbox)
    return answer_findings(problem)


def answer_findings(problem: Problem) -> list[Finding]:
    findings = []
    gold = gold_answer(problem.answer)
    if not verifier_reads(gold):
        findings.append(Finding("gold_unparseable", f"math-verify reads nothing in the gold {_clip(gold)!r}"))
    for description, response in (
        ("an empty response", ""),
        ("an empty box", "\\boxed{}"),
        ("a response that only repeats the question", problem.question),
    ):
        if is_correct(response, problem.answer):
            findings.append(Finding("trivial_gold", f"{description} is graded correct"))
            break
    letter = choice_letter(gold)
    listed = listed_choices(problem)
    if letter is not None and listed and letter not in listed:
        findings.append(Finding("choice_not_listed", f"the gold {letter} is not among the choices {''.join(listed)}"))
    return findings


def verifier_reads(gold: str) -> bool:
    """Whether the grader can read the gold: a number or a letter (settled by the quick rules), else math-verify
    matching the gold with itself (it reads nothing in a broken expression, and then matches nothing)."""
    if not gold.strip():
        return False
    if parse_number(normalise(gold)) is not None or choice_letter(gold) is not None:
        return True
    return shared_pool().check(gold, gold, DEFAULT_TIMEOUT_S)


def listed_choices(problem: Problem) -> str:
    """The letters the question lists as choices ("A) ...", "(B) ...", "C. ..."), or the first N letters when the
    problem says it has N choices; "" when it lists none."""
    count = problem.metadata.get("choices") if isinstance(problem.metadata, dict) else None
    if isinstance(count, int) and not isinstance(count, bool) and 0 < count <= len(LETTERS):
        return LETTERS[:count]
    return "".join(dict.fromkeys(_LISTED_CHOICE.findall(problem.question)))


def code_findings(problem: Problem, reference: str | None, sandbox: Any) -> list[Finding]:
    tests = code_tests_of(problem.answer)
    if tests is None or not tests.tests:
        return [Finding("gold_unparseable", "its code tests cannot be read" if tests is None else "it has no tests")]
    findings = []
    for description, program in EMPTY_PROGRAMS:
        graded = grade_code(tests, _fenced(program), sandbox)
        if graded.unavailable:  # the tests judge no program here: nothing more to learn from running them
            return [no_verdict(graded)]
        if graded.correct:
            findings.append(Finding("empty_program_passes", f"{description} passes all {len(tests.tests)} tests"))
            break
    if reference:
        graded = grade_code(tests, _fenced(reference), sandbox)
        if graded.unavailable:
            findings.append(no_verdict(graded))
        elif not graded.correct:
            why = f" ({graded.reason})" if graded.reason else ""
            findings.append(
                Finding(
                    "reference_fails", f"its reference solution passes {graded.passed}/{len(tests.tests)} tests{why}"
                )
            )
    return findings


def no_verdict(graded: CodeGrade) -> Finding:
    """Why the tests could judge no program: the sandbox lacks a library they import (`ungradable`: every
    rollout of it would be counted apart, never graded), or the benchmark's own reference, whose answers the
    tests compare with, failed (EvalPlus: `reference_fails`)."""
    if any(result.status == "missing_library" for result in graded.results):
        return Finding("ungradable", f"the sandbox cannot grade it ({graded.unavailable})")
    return Finding("reference_fails", graded.unavailable)


def reference_solution(problem: Problem, row: dict[str, Any]) -> str | None:
    """The problem's own solution program: `metadata.reference_solution`, else where its benchmark keeps one
    (`metadata.benchmark`, set by the code layouts), else a column datasets commonly keep one in (TACO's
    `solutions` list, `reference_solution`, `solution`)."""
    metadata = problem.metadata if isinstance(problem.metadata, dict) else {}
    given = _program(metadata.get("reference_solution"))
    if given:
        return given
    reader = BENCHMARK_REFERENCES.get(str(metadata.get("benchmark") or ""))
    if reader is not None:
        return reader(row)
    return next((program for column in REFERENCE_COLUMNS if (program := _program(row.get(column)))), None)


def _after(prompt_column: str, solution_column: str):
    """A benchmark whose solution is the body its prompt opens (HumanEval's `prompt`, BigCodeBench's
    `code_prompt`): the program is the two joined."""

    def read(row: dict[str, Any]) -> str | None:
        body = _program(row.get(solution_column))
        return f"{row.get(prompt_column) or ''}{body}" if body else None

    return read


def _codecontests_reference(row: dict[str, Any]) -> str | None:
    """CodeContests' `solutions` is {language: [...], solution: [...]}: the first Python 3 one (the sandbox runs
    Python 3; its Python 2, C++ and Java solutions cannot be run here)."""
    solutions = row.get("solutions")
    if not isinstance(solutions, dict):
        return None
    pairs = zip(solutions.get("language") or [], solutions.get("solution") or [])
    return next(
        (program for language, solution in pairs if language == PYTHON3 and (program := _program(solution))), None
    )


def _program(value: Any) -> str | None:
    """A program from a column: text (a JSON list given as text read as the list), or the first text of a list."""
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            pass
    if isinstance(value, list):
        value = next((item for item in value if isinstance(item, str) and item.strip()), None)
    return value if isinstance(value, str) and value.strip() else None


PYTHON3 = 3  # CodeContests' language code for Python 3
# Where each benchmark layout (agentdata/code_benchmarks.py, code_problems.py) keeps its reference solution.
# EvalPlus's release grades against its canonical solution, so there that check can only fail by crashing.
BENCHMARK_REFERENCES = {
    "humaneval": _after("prompt", "canonical_solution"),
    "evalplus": _after("prompt", "canonical_solution"),
    "bigcodebench": _after("code_prompt", "canonical_solution"),
    "mbpp": lambda row: _program(row.get("code")),
    "kodcode": lambda row: _program(row.get("solution")),
    "codecontests": _codecontests_reference,
}


def _fenced(program: str) -> str:
    return f"```python\n{program}\n```"


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
