"""Final-answer extraction and checking (math-verify), code tests run in the sandbox, and the rewards
built on them. `grade(problem, final_text, sandbox)` is the one definition of "correct"."""

from agentdata.verify.answers import DEFAULT_TIMEOUT_S, answers_match, gold_answer, is_correct
from agentdata.verify.code import CodeGrade, CodeLimits, final_program, grade_code, outputs_match
from agentdata.verify.extract import extract_answer, last_boxed
from agentdata.verify.grade import Grade, grade, is_code_problem
from agentdata.verify.rewards import (
    CorrectnessReward,
    OverlongReward,
    correctness_score,
    extra_call_penalty,
    overlong_penalty,
    tool_call_reward,
)
from agentdata.verify.workers import VerifierPool, shared_pool

__all__ = [
    "CodeGrade",
    "CodeLimits",
    "Grade",
    "final_program",
    "grade",
    "grade_code",
    "is_code_problem",
    "outputs_match",
    "CorrectnessReward",
    "OverlongReward",
    "correctness_score",
    "extra_call_penalty",
    "overlong_penalty",
    "tool_call_reward",
    "DEFAULT_TIMEOUT_S",
    "VerifierPool",
    "answers_match",
    "extract_answer",
    "gold_answer",
    "is_correct",
    "last_boxed",
    "shared_pool",
]
