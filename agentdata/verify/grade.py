"""`grade(problem, final_text, sandbox)`: the one definition of "correct" for every domain.

collect (the agent loop), filter's profiling, GRPO rewards and eval all come here:
- code problems (domain `code`, tests in `answer`): the final program runs against the
  tests in the sandbox (`verify.code`); correct = every test passes, score = the passed
  fraction; where the tests cannot judge it (a library they need is missing from the sandbox,
  the benchmark's reference solution fails) `unavailable` says why: no verdict on the model;
- everything else (math, multiple-choice science): the final answer is compared with the
  gold answer (`verify.answers.is_correct`); score = 1 or 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdata.code_tests import code_tests_of
from agentdata.records import Problem
from agentdata.verify.answers import DEFAULT_TIMEOUT_S, is_correct, settled_match
from agentdata.verify.code import CodeLimits, final_program, grade_code
from agentdata.verify.extract import extract_answer


@dataclass
class Grade:
    correct: bool
    score: float  # in [0, 1]: the passed fraction for code, 1 or 0 otherwise
    final_answer: str | None = None
    details: dict[str, Any] = field(default_factory=dict)  # code: counts, per-test results, test time
    unavailable: str = ""  # why no verdict could be reached (not the model's doing): counted apart, like a failure


def is_code_problem(problem: Problem) -> bool:
    return problem.domain == "code"


def grade(
    problem: Problem,
    final_text: str | None,
    sandbox: Any = None,
    limits: CodeLimits | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
) -> Grade:
    """Grade a model's final text for `problem`; never raises for anything the model wrote."""
    if is_code_problem(problem):
        return grade_code_problem(problem, final_text, sandbox, limits)
    answer = extract_answer(final_text)
    correct = answer is not None and is_correct(final_text, problem.answer, timeout_s=timeout_s)
    return Grade(bool(correct), float(bool(correct)), answer)


def quick_grade(problem: Problem, final_text: str | None) -> Grade | None:
    """`grade`'s verdict where it needs neither the sandbox nor math-verify (the same verdict), else None."""
    if is_code_problem(problem):
        return None
    answer = extract_answer(final_text)
    correct = False if answer is None else settled_match(answer, problem.answer)
    return None if correct is None else Grade(correct, float(correct), answer)


# A trajectory's metadata key for the text it was graded on when that is not its messages' (a harness's
# printed answer, agent/harness.py): `regrade` grades the same text again.
GRADED_TEXT_KEY = "graded_text"


def graded_text(
    messages: list[dict[str, Any]], domain: str, protocol: Any, metadata: dict[str, Any] | None = None
) -> str:
    """What a trajectory is graded on: its last reply; for a code problem, where the trajectory's protocol
    finds the program (`formats.base.Protocol.code_answer`: under codeblock, where a ```python block is a tool
    call, the whole final turn with its blocks); the text its `metadata` names (GRADED_TEXT_KEY) when it has
    one. The agent loop grades this, and so does `regrade` on stored trajectories. `protocol` is passed in
    (verify imports no protocol); None: the last reply."""
    stored = (metadata or {}).get(GRADED_TEXT_KEY)
    if isinstance(stored, str):
        return stored
    replies = [m for m in messages if m["role"] == "assistant"]
    if not replies:
        return ""
    if domain != "code" or protocol is None:
        return replies[-1]["content"]
    return protocol.code_answer(messages)


def grade_code_problem(
    problem: Problem, final_text: str | None, sandbox: Any, limits: CodeLimits | None = None
) -> Grade:
    tests = code_tests_of(problem.answer)
    if tests is None:
        raise ValueError(f"code problem {problem.id} has no readable tests in its answer")
    if sandbox is None:
        raise ValueError("grading a code problem needs a sandbox to run the program in")
    result = grade_code(tests, final_text, sandbox, limits)
    return Grade(result.correct, result.fraction, final_program(final_text), result.summary(), result.unavailable)
