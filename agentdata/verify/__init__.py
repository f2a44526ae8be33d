"""Final-answer extraction and checking (math-verify), and the rewards built on it."""

from agentdata.verify.check import DEFAULT_TIMEOUT_S, answers_match, gold_answer, is_correct
from agentdata.verify.extract import extract_answer, last_boxed
from agentdata.verify.pool import VerifierPool, shared_pool
from agentdata.verify.rewards import (
    CorrectnessReward,
    OverlongReward,
    correctness_score,
    extra_call_penalty,
    overlong_penalty,
    tool_call_reward,
)

__all__ = [
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
