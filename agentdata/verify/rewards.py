"""Rewards for GRPO, built on the agent loop's verdict (`verify.grade`) so training and evaluation agree.

Scalar helpers take plain numbers; `CorrectnessReward` and `OverlongReward` are TRL reward
functions with the signature `(prompts, completions, **kwargs) -> list[float | None]`. A
completion is either a string or a list of chat messages (TRL's conversational and
tool-calling format); the gold answer comes from the dataset's `answer` column. When the
agent loop produced the completions (agentdata's GRPO rollouts), it already judged each with
`verify.grade` and counted its tool calls and model tokens: those arrive as the extra columns
`correct`, `passed_fraction` (code problems), `num_tool_calls` and `model_token_counts`, and are used
instead of re-reading text that also holds tool output. Completions from elsewhere (no `correct`
column) are checked against the gold answer with `verify.answers.is_correct`, the answer half of
`grade`. One definition of each reward, whoever calls it.

Rewards are registered by name in `REWARDS`; `build_reward(name, settings)` turns a name or a
plug-in path (`mypkg.rewards:brevity`, `rewards.py:brevity`) into a reward function. A plain
function is used as it is; a class is built with `from_settings(settings)` when it has one
(returning None turns the reward off for those settings), else with no arguments.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentdata.errors import UserError
from agentdata.registry import PluginError, Registry, call_plugin, is_builtin
from agentdata.verify.answers import DEFAULT_TIMEOUT_S, is_correct

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
    return "\n".join(str(message.get("content") or "") for message in completion if message.get("role") == "assistant")


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
    fraction: bool = False  # a code rollout scores -1 + 2 x its passed-test fraction instead of +1/-1

    def __post_init__(self) -> None:
        self.__name__ = self.name  # TRL logs each reward under its function's __name__
        if self.use_tool_call_reward and (self.correct_reward, self.wrong_reward) != (1.0, -1.0):
            raise ValueError("the tool-call reward is defined on the +1/-1 scale: leave correct/wrong at 1/-1")
        if self.penalty_per_extra_call < 0 or self.free_calls < 0:
            raise ValueError("free_calls and penalty_per_extra_call must be >= 0")

    @classmethod
    def from_settings(cls, settings: Any) -> CorrectnessReward:
        """From GRPO settings: `tool_call_reward`, `extra_call_penalty`, `free_calls`."""
        return cls(
            use_tool_call_reward=settings.tool_call_reward,
            penalty_per_extra_call=settings.extra_call_penalty,
            free_calls=settings.free_calls,
            fraction=getattr(settings, "code_reward", "binary") == "fraction",
        )

    def reward(self, correct: bool, rounds: int, calls: int, passed_fraction: float | None = None) -> float:
        """The reward of a judged completion with `rounds` tool rounds and `calls` tool calls;
        `passed_fraction` (code problems) is used when the reward is `fraction`."""
        if self.fraction and passed_fraction is not None:
            reward = -1.0 + 2.0 * float(passed_fraction)
        elif self.use_tool_call_reward:
            reward = tool_call_reward(correct, rounds, self.correct_reward)
        else:
            reward = correctness_score(correct, self.correct_reward, self.wrong_reward)
        if self.penalty_per_extra_call:
            reward += extra_call_penalty(calls, self.free_calls, self.penalty_per_extra_call)
        return reward

    def score(self, completion: str | Sequence[dict[str, Any]], gold: Any) -> float | None:
        if gold is None or str(gold).strip() == "":
            return None
        correct = is_correct(completion_text(completion), str(gold), timeout_s=self.timeout_s)
        return self.reward(correct, tool_rounds(completion), tool_calls(completion))

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        judged = kwargs.get("correct")
        if judged is not None:  # the agent loop already judged these rollouts with verify.grade
            counts = kwargs.get("num_tool_calls") or [tool_calls(completion) for completion in completions]
            # The loop counts calls, not rounds: TCR's k is the number of calls run, as in training so far.
            fractions = kwargs.get("passed_fraction") or [None] * len(judged)
            return [
                self.reward(bool(ok), int(calls), int(calls), fraction)
                for ok, calls, fraction in zip(judged, counts, fractions, strict=True)
            ]
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

    @classmethod
    def from_settings(cls, settings: Any) -> OverlongReward | None:
        """From GRPO settings: `max_new_tokens` (of its `loop`), `overlong_buffer` (0 turns shaping off),
        `overlong_penalty`."""
        if not settings.overlong_buffer:
            return None
        loop = getattr(settings, "loop", settings)  # GRPO composes the agent-loop settings
        return cls(max_len=loop.max_new_tokens, buffer=settings.overlong_buffer, penalty=settings.overlong_penalty)

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


# --------------------------------------------------------------------------- the registry

REWARDS: Registry[Any] = Registry("reward")
REWARDS.register("correctness", CorrectnessReward)
REWARDS.register("overlong", OverlongReward)
DEFAULT_REWARDS = ("correctness", "overlong")


def build_reward(name: str, settings: Any = None) -> RewardFunction | None:
    """The reward function `name` gives (see the module doc), or None when it is off for `settings`.
    A plug-in's is wrapped so that what it raises or returns wrongly is named as its fault."""
    entry = REWARDS.get(name)
    if isinstance(entry, type):
        configurable = settings is not None and hasattr(entry, "from_settings")
        build, called_as = (entry.from_settings, "from_settings(settings)") if configurable else (entry, "Class()")
        entry = call_plugin(name, "reward class", called_as, build, *([settings] if configurable else []))
        if entry is None:
            return None
    if not callable(entry):
        raise UserError(f"reward {name!r} is not callable: a reward is a function (prompts, completions, **kwargs)")
    if not hasattr(entry, "__name__"):  # TRL logs each reward under its __name__
        entry.__name__ = name.rpartition(":")[2] or name
    if is_builtin(entry):
        return entry
    return (AsyncCheckedReward if _is_async(entry) else CheckedReward)(name, entry)


def _is_async(function: Any) -> bool:
    """An async function, or an instance whose `__call__` is async (as TRL's is_async_callable reads it)."""
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(type(function).__call__)


class CheckedReward:
    """A plug-in reward as TRL calls it; an exception, or anything but one number (or None) per completion,
    is a PluginError naming the reward, instead of a crash deep in the trainer (or counts that silently
    misalign with the completions)."""

    def __init__(self, spec: str, function: RewardFunction):
        self.spec, self.function = spec, function
        self.__name__ = function.__name__

    def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        try:
            values = self.function(prompts=prompts, completions=completions, **kwargs)
        except UserError:
            raise
        except Exception as error:
            problem = f"raised {type(error).__name__}: {error} on a batch of {len(completions)}"
            raise PluginError(self.spec, problem) from None
        return self.checked(values, completions)

    def checked(self, values: Any, completions: list[Any]) -> list[float | None]:
        if not isinstance(values, (list, tuple)):
            raise PluginError(
                self.spec, f"returned {type(values).__name__}; a reward returns a list, one per completion"
            )
        if len(values) != len(completions):
            raise PluginError(
                self.spec, f"returned {len(values)} rewards for {len(completions)} completions; give one per completion"
            )
        for index, value in enumerate(values):
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value != value):
                raise PluginError(
                    self.spec, f"reward {index} is {value!r}; each reward is a number (not NaN) or None (no opinion)"
                )
        return list(values)


class AsyncCheckedReward(CheckedReward):
    """`CheckedReward` for an async reward (TRL awaits it, in parallel with the other async ones)."""

    async def __call__(self, prompts: list[Any], completions: list[Any], **kwargs: Any) -> list[float | None]:
        try:
            values = await self.function(prompts=prompts, completions=completions, **kwargs)
        except UserError:
            raise
        except Exception as error:
            problem = f"raised {type(error).__name__}: {error} on a batch of {len(completions)}"
            raise PluginError(self.spec, problem) from None
        return self.checked(values, completions)


def build_rewards(names: Sequence[str], settings: Any = None) -> list[RewardFunction]:
    """The reward functions `names` give, in order, leaving out those off for `settings`."""
    rewards = [build_reward(name, settings) for name in names]
    if not any(reward is not None for reward in rewards):
        raise UserError(f"rewards {list(names)}: none is on; GRPO needs at least one reward")
    return [reward for reward in rewards if reward is not None]
