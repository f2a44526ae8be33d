"""Rewards for GRPO, built on `is_correct` so training and evaluation agree on "correct".

Scalar helpers take plain numbers; `make_*` build TRL reward functions with the signature
`(prompts, completions, **kwargs) -> list[float | None]`. A completion is either a string
or a list of chat messages (TRL's conversational and tool-calling format); the gold answer
comes from the dataset's `answer` column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from agentdata.verify.check import DEFAULT_TIMEOUT_S, is_correct

RewardFunction = Callable[..., list[float | None]]

# Text markers of one tool round for completions that are plain strings.
_TEXT_TOOL_ROUND = re.compile(r"<tool_call>|```output")


# --------------------------------------------------------------------------- scalar helpers

def correctness_score(correct: bool, correct_reward: float = 1.0, wrong_reward: float = -1.0) -> float:
    return correct_reward if correct else wrong_reward


def tool_call_reward(correct: bool, tool_rounds: int, correct_reward: float = 1.0) -> float:
    """Open-AgentRL's TCR: a wrong answer after k tool rounds scores min(-0.6, -1 + 0.1 k).

    Trying the tool is worth a little even when the answer is wrong, capped at -0.6 so a
    wrong answer never approaches a right one; a right answer gets no tool bonus.
    """
    if correct:
        return correct_reward
    return min(-0.6, -1.0 + 0.1 * max(0, tool_rounds))


def extra_call_penalty(tool_calls: int, free_calls: int, penalty_per_call: float) -> float:
    """-penalty_per_call for each call beyond free_calls (a push toward few, purposeful calls)."""
    return -penalty_per_call * max(0, tool_calls - free_calls)


def overlong_penalty(model_tokens: int, max_len: int, buffer: int, penalty: float = 1.0) -> float:
    """DAPO soft overlong shaping: 0 up to max_len - buffer, then falling linearly to -penalty.

    For L model tokens: 0 if L <= max_len - buffer; (max_len - buffer - L) / buffer * penalty
    inside the buffer; -penalty at or past max_len.
    """
    if buffer <= 0 or max_len <= 0:
        raise ValueError("overlong shaping needs max_len > 0 and buffer > 0")
    expected = max_len - buffer
    if model_tokens <= expected:
        return 0.0
    return max(-penalty, (expected - model_tokens) / buffer * penalty)


# --------------------------------------------------------------------------- reading completions

def completion_text(completion: str | Sequence[dict[str, Any]]) -> str:
    """The model's own text: assistant turns only, never tool output."""
    if isinstance(completion, str):
        return completion
    return "\n".join(
        str(message.get("content") or "") for message in completion if message.get("role") == "assistant"
    )


def tool_rounds(completion: str | Sequence[dict[str, Any]]) -> int:
    """Assistant turns that called the tool (a turn with several calls is one round)."""
    if isinstance(completion, str):
        return len(_TEXT_TOOL_ROUND.findall(completion))
    return sum(1 for message in completion if message.get("role") == "assistant" and message.get("tool_calls"))


def tool_calls(completion: str | Sequence[dict[str, Any]]) -> int:
    if isinstance(completion, str):
        return tool_rounds(completion)
    return sum(len(message.get("tool_calls") or []) for message in completion if message.get("role") == "assistant")


# --------------------------------------------------------------------------- TRL reward functions

@dataclass
class CorrectnessReward:
    """Correctness reward with optional tool-call reward (TCR) and extra-call penalty.

    Reads the gold answer from kwargs[answer_field]. Returns None for rows without gold,
    which TRL ignores for that reward.
    """

    correct_reward: float = 1.0
    wrong_reward: float = -1.0
    use_tool_call_reward: bool = False
    free_calls: int = 0
    penalty_per_extra_call: float = 0.0
    answer_field: str = "answer"
    timeout_s: float = DEFAULT_TIMEOUT_S
    name: str = "correctness"

    def __post_init__(self) -> None:
        self.__name__ = self.name  # TRL logs each reward under its function's __name__
        if self.use_tool_call_reward and (self.correct_reward, self.wrong_reward) != (1.0, -1.0):
            raise ValueError("the tool-call reward is defined on the +1/-1 scale: leave correct/wrong at 1/-1")
        if self.penalty_per_extra_call < 0 or self.free_calls < 0:
            raise ValueError("free_calls and penalty_per_extra_call must be >= 0")

    def score(self, completion: str | Sequence[dict[str, Any]], gold: Any) -> float | None:
        if gold is None or str(gold).strip() == "":
            return None
        correct = is_correct(completion_text(completion), str(gold), timeout_s=self.timeout_s)
        if self.use_tool_call_reward:
            reward = tool_call_reward(correct, tool_rounds(completion), self.correct_reward)
        else:
            reward = correctness_score(correct, self.correct_reward, self.wrong_reward)
        if self.penalty_per_extra_call:
            reward += extra_call_penalty(tool_calls(completion), self.free_calls, self.penalty_per_extra_call)
        return reward

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        golds = kwargs.get(self.answer_field)
        if golds is None:
            raise ValueError(f"the reward needs the gold answers in the dataset column {self.answer_field!r}")
        return [self.score(completion, gold) for completion, gold in zip(completions, golds, strict=True)]


@dataclass
class OverlongReward:
    """DAPO soft overlong penalty, counting model tokens only (tool output excluded).

    Token counts come, in order of preference, from kwargs["model_token_counts"] (given by
    the rollout code that knows the tool mask), from `tokenizer` applied to the assistant
    text, or from len(completion_ids) (which includes tool tokens: an upper bound).
    """

    max_len: int
    buffer: int
    penalty: float = 1.0
    tokenizer: Any = None
    name: str = "overlong"

    def __post_init__(self) -> None:
        self.__name__ = self.name
        if not 0 < self.buffer <= self.max_len:
            raise ValueError(f"need 0 < buffer <= max_len, got buffer={self.buffer}, max_len={self.max_len}")

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        counts = self._token_counts(completions, kwargs)
        return [overlong_penalty(count, self.max_len, self.buffer, self.penalty) for count in counts]

    def _token_counts(self, completions: list[Any], kwargs: dict[str, Any]) -> list[int]:
        if kwargs.get("model_token_counts") is not None:
            return [int(count) for count in kwargs["model_token_counts"]]
        if self.tokenizer is not None:
            texts = [completion_text(completion) for completion in completions]
            return [len(self.tokenizer(text, add_special_tokens=False)["input_ids"]) for text in texts]
        if kwargs.get("completion_ids") is not None:
            return [len(ids) for ids in kwargs["completion_ids"]]
        raise ValueError("overlong shaping needs model_token_counts, a tokenizer, or completion_ids")
