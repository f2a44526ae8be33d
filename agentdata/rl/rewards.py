"""GRPO reward functions over what the rollout already knows.

The agent loop judged each rollout with `agentdata.verify.is_correct` (the same check
evaluation uses) and counted its tool calls, and the rollout bridge counted the model's
own tokens; these arrive as extra fields, so rewards reuse verify's scalar rules instead
of re-parsing completions that also hold tool output.
"""

from __future__ import annotations

from typing import Any

from agentdata.verify import correctness_score, extra_call_penalty, overlong_penalty, tool_call_reward


class RolloutCorrectnessReward:
    """+1 / -1 from `correct`; with TCR a wrong answer after k tool rounds gets min(-0.6, -1 + 0.1 k);
    an optional penalty per call beyond `free_calls`."""

    __name__ = "correctness"

    def __init__(self, use_tool_call_reward: bool = False, penalty_per_extra_call: float = 0.0, free_calls: int = 1):
        self.use_tool_call_reward = use_tool_call_reward
        self.penalty_per_extra_call = penalty_per_extra_call
        self.free_calls = free_calls

    def score(self, correct: bool, calls: int) -> float:
        reward = tool_call_reward(correct, calls) if self.use_tool_call_reward else correctness_score(correct)
        if self.penalty_per_extra_call:
            reward += extra_call_penalty(calls, self.free_calls, self.penalty_per_extra_call)
        return reward

    def __call__(self, prompts: list[Any], completions: list[Any], correct: list[bool],
                 num_tool_calls: list[int], **kwargs: Any) -> list[float]:
        return [self.score(bool(ok), int(calls)) for ok, calls in zip(correct, num_tool_calls, strict=True)]


class RolloutOverlongReward:
    """DAPO soft overlong shaping on the model's own tokens (tool output excluded)."""

    __name__ = "overlong"

    def __init__(self, max_len: int, buffer: int, penalty: float = 1.0):
        self.max_len, self.buffer, self.penalty = max_len, buffer, penalty

    def __call__(self, prompts: list[Any], completions: list[Any], model_token_counts: list[int],
                 **kwargs: Any) -> list[float]:
        return [overlong_penalty(int(count), self.max_len, self.buffer, self.penalty) for count in model_token_counts]


def reward_functions(config: Any) -> list[Any]:
    """The rewards a GRPOStageConfig asks for."""
    rewards: list[Any] = [RolloutCorrectnessReward(config.tool_call_reward, config.extra_call_penalty, config.free_calls)]
    if config.overlong_buffer:
        rewards.append(RolloutOverlongReward(config.max_new_tokens, config.overlong_buffer, config.overlong_penalty))
    return rewards
