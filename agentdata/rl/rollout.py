"""The bridge from agentdata's agent loop to TRL's GRPOTrainer (`rollout_func`).

TRL hands over the prompts of one generation batch (each already repeated once per rollout
of its group). For each, `solve` runs the real multi-turn loop — the policy generates,
code runs in agentdata's sandbox, the output goes back — exactly as `collect` does. The
trajectory is rendered in its protocol and tokenized with the SFT masking, so the
completion holds model text *and* tool output while `env_mask` zeroes the tool-output and
template tokens: TRL keeps them out of the loss. Per-rollout facts (correct, tool calls,
model tokens) travel to the reward functions as extra fields, and `rollout_failed` marks a
rollout that ended in an engine or sandbox error: the trainer masks it out of its group
(`AgentGRPOTrainer`) instead of scoring it as a wrong answer.

With an online band (ZeroTIR's dynamic filtering), a group whose pass rate falls outside it
is dropped here and replaced by the group of a fresh prompt from the pool, until every group
is in the band or the rounds run out. TRL trains on the prompt and completion ids this
function returns, so a replaced group trains on its own prompt; its gold answer travels as the
extra field `answer`, which replaces the dataset's for the reward functions.
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass, field
from typing import Any

from agentdata.agent.loop import LoopConfig, solve
from agentdata.formats import get_protocol
from agentdata.records import Problem, Trajectory
from agentdata.settings import Band
from agentdata.training.masking import tokenize_conversation
from agentdata.training.trackers import rollout_columns, rollout_failed


@dataclass
class RolloutTokens:
    prompt_ids: list[int]
    completion_ids: list[int]
    env_mask: list[int]  # 1 on tokens the model wrote, 0 on tool output and template text


def trajectory_tokens(trajectory: Trajectory, tokenizer: Any, protocol_name: str) -> RolloutTokens:
    """Split a rendered trajectory at its first assistant token into prompt and masked completion."""
    plain = get_protocol(protocol_name).to_plain_messages(trajectory.messages)
    conversation = tokenize_conversation(tokenizer, plain)
    encoded_offsets = tokenizer(conversation.text, add_special_tokens=False, return_offsets_mapping=True)[
        "offset_mapping"
    ]
    prompt_length = sum(1 for start, _ in encoded_offsets if start < conversation.prompt_chars)
    ids, mask = conversation.input_ids, conversation.assistant_masks
    last_trained = max((i for i, bit in enumerate(mask) if bit), default=prompt_length - 1)
    end = last_trained + 1  # drop the template's trailing newline so the completion ends at end of turn
    if trajectory.finish_reason == "max_tokens" and end > prompt_length and ids[end - 1] == tokenizer.eos_token_id:
        end -= 1  # the model ran out of budget: it never wrote the end-of-turn token the template adds
    return RolloutTokens(ids[:prompt_length], ids[prompt_length:end], mask[prompt_length:end])


def question_of(prompt: Any) -> str:
    """The question in a prompt: a string, or the last user message of chat messages."""
    if isinstance(prompt, str):
        return prompt
    users = [message["content"] for message in prompt if message.get("role") == "user"]
    if not users:
        raise ValueError("a prompt has no user message")
    return users[-1]


@dataclass
class RolloutStats:
    """Timings of the last rollout batch, for the step-time breakdown."""

    rollout_s: float = 0.0
    generation_s: float = 0.0
    sandbox_s: float = 0.0
    history: list[dict[str, float]] = field(default_factory=list)


class AgentRollout:
    """`rollout_func` for GRPOTrainer: agentdata's loop and sandbox produce every completion."""

    def __init__(
        self,
        problems: list[Problem],
        engine: Any,
        sandbox: Any,
        loop_config: LoopConfig,
        num_generations: int,
        seed: int = 0,
        online_band: Band | None = None,
        online_band_rounds: int = 4,
    ):
        self.problems = list(problems)
        self.problems_by_question = {problem.question: problem for problem in problems}
        self.online_band = online_band
        self.online_band_rounds = online_band_rounds
        self.fresh_draws = random.Random(seed)
        self.engine = engine
        self.sandbox = sandbox
        self.loop_config = loop_config
        self.num_generations = num_generations
        self.seed = seed
        self.calls = 0
        self.stats = RolloutStats()
        self.last_trajectories: list[Trajectory] = []

    def problem_for(self, prompt: Any) -> Problem:
        question = question_of(prompt)
        problem = self.problems_by_question.get(question)
        if problem is None:
            raise KeyError(f"prompt not in the RL pool: {question[:80]!r}")
        return problem

    async def _solve_all(self, prompts: list[Any]) -> list[Trajectory]:
        jobs = [
            solve(
                self.problem_for(prompt),
                self.engine,
                self.sandbox,
                self.loop_config,
                sample_index=index % self.num_generations,
                seed=self.seed + 100_000 * self.calls + 1_000 * index,
            )
            for index, prompt in enumerate(prompts)
        ]
        self.calls += 1  # the next batch (or replacement round) gets seeds of its own
        return list(await asyncio.gather(*jobs))

    def __call__(self, prompts: list[Any], trainer: Any) -> dict[str, Any]:
        started = time.perf_counter()
        generation_before = getattr(self.engine, "generation_s", 0.0)
        trajectories = self._run(prompts, trainer)
        if self.online_band:
            trajectories = self._fill_band(trajectories, trainer)
        self.last_trajectories = trajectories
        tokens = [trajectory_tokens(t, trainer.processing_class, self.loop_config.protocol) for t in trajectories]
        self._record_time(started, generation_before, trajectories)
        log_rollout_metrics(trainer, trajectories, tokens)
        if getattr(trainer, "log_completions", False):
            log_rollout_table(trainer, trajectories)
        return {
            "prompt_ids": [t.prompt_ids for t in tokens],
            "completion_ids": [t.completion_ids for t in tokens],
            "logprobs": None,  # retokenized text: the loop's sampling logprobs do not align, so none are claimed
            "env_mask": [t.env_mask for t in tokens],
            "correct": [t.correct for t in trajectories],
            "passed_fraction": [passed_fraction(t) for t in trajectories],
            "num_tool_calls": [t.num_tool_calls for t in trajectories],
            "num_tool_errors": [t.num_tool_errors for t in trajectories],
            "model_token_counts": [sum(t.env_mask) for t in tokens],
            "rollout_failed": [rollout_failed(t) for t in trajectories],
            "answer": [t.answer for t in trajectories],  # a replaced group's gold, for rewards that read it
        }

    def _fill_band(self, trajectories: list[Trajectory], trainer: Any) -> list[Trajectory]:
        """Replace each group outside the online band by a fresh prompt's group, round after round."""
        size = self.num_generations
        groups = [trajectories[start : start + size] for start in range(0, len(trajectories), size)]
        used = {group[0].problem_id for group in groups}
        resampled = 0
        for _ in range(self.online_band_rounds):
            outside = [
                slot for slot, group in enumerate(groups) if not self.online_band.contains(group_pass_rate(group))
            ]
            fresh = self._fresh_problems(len(outside), used)
            if not fresh:
                break
            redone = self._run([problem.question for problem in fresh for _ in range(size)], trainer)
            for slot, start in zip(outside, range(0, len(redone), size)):
                groups[slot] = redone[start : start + size]
            resampled += len(fresh)
        unfilled = sum(1 for group in groups if not self.online_band.contains(group_pass_rate(group)))
        metrics = trainer._metrics["train" if trainer.model.training else "eval"]
        metrics["online_band/resampled_groups"].append(float(resampled))
        metrics["online_band/unfilled_groups"].append(float(unfilled))
        return [trajectory for group in groups for trajectory in group]

    def _fresh_problems(self, count: int, used: set[str]) -> list[Problem]:
        """Up to `count` pool problems not yet in this step's batch, drawn at random (seeded)."""
        candidates = [problem for problem in self.problems if problem.id not in used]
        fresh = self.fresh_draws.sample(candidates, min(count, len(candidates)))
        used.update(problem.id for problem in fresh)
        return fresh

    def _run(self, prompts: list[Any], trainer: Any) -> list[Trajectory]:
        from trl.models import unwrap_model_for_generation

        if not hasattr(self.engine, "model"):  # a served engine (vLLM, OpenAI-compatible): nothing to unwrap
            return asyncio.run(self._solve_all(prompts))
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator) as model:
            self.engine.model = model
            trajectories = asyncio.run(self._solve_all(prompts))
            self.engine.wait_idle()  # the trainer's forward comes next: the generating thread must be out
            return trajectories

    def _record_time(self, started: float, generation_before: float, trajectories: list[Trajectory]) -> None:
        rollout_s = time.perf_counter() - started
        generation_s = getattr(self.engine, "generation_s", 0.0) - generation_before
        # The sandbox runs while other rollouts generate; its own wall share is what is left
        # of the rollout after generation (tokenizing and answer checks are a small part of it).
        self.stats = RolloutStats(rollout_s, generation_s, max(0.0, rollout_s - generation_s), self.stats.history)
        self.stats.history.append(
            {
                "rollout_s": rollout_s,
                "generation_s": generation_s,
                "sandbox_and_loop_s": max(0.0, rollout_s - generation_s),
                "tool_s_summed": sum(t.timings.get("tool_s", 0.0) for t in trajectories),
            }
        )


def group_pass_rate(group: list[Trajectory]) -> float | None:
    """Share correct among the group's valid rollouts; None when every one failed."""
    valid = [t for t in group if not rollout_failed(t)]
    return sum(t.correct for t in valid) / len(valid) if valid else None


def passed_fraction(trajectory: Trajectory) -> float | None:
    """A code rollout's fraction of tests passed (None for problems graded right/wrong only)."""
    tests = trajectory.metadata.get("tests")
    return float(tests["fraction"]) if isinstance(tests, dict) and "fraction" in tests else None


def log_rollout_table(trainer: Any, trajectories: list[Trajectory]) -> None:
    """Our columns of TRL's table of sampled rollouts (`log_completions`: sent to wandb / trackio, written to
    checkpoints/completions/): the question, the whole conversation, the code each call ran, the verdict.
    Through `GRPOTrainer._log_completion_extra`, TRL 1.16's hook for extra columns (the version is pinned)."""
    for column, values in rollout_columns(trajectories).items():
        trainer._log_completion_extra(column, values)


def log_rollout_metrics(trainer: Any, trajectories: list[Trajectory], tokens: list[RolloutTokens]) -> None:
    """Agentic metrics next to TRL's own, under namespaced keys."""
    metrics = trainer._metrics["train" if trainer.model.training else "eval"]
    for key, value in rollout_metrics(trajectories, tokens).items():
        metrics[key].append(value)


def rollout_metrics(trajectories: list[Trajectory], tokens: list[RolloutTokens]) -> dict[str, float]:
    """A batch's agentic metrics: the failed share, then everything over the valid rollouts only (the asynchronous
    stage logs the same, rl/async_worker.py)."""
    metrics = {"rollouts/failed_ratio": sum(map(rollout_failed, trajectories)) / max(1, len(trajectories))}
    # Tokens first (they pair with the trajectories), then everything over the valid rollouts only.
    tokens = [token for token, t in zip(tokens, trajectories) if not rollout_failed(t)]
    trajectories = [t for t in trajectories if not rollout_failed(t)]
    count = max(1, len(trajectories))
    calls = sum(t.num_tool_calls for t in trajectories)
    metrics["accuracy"] = sum(t.correct for t in trajectories) / count
    metrics["tools/call_frequency"] = calls / count
    metrics["tools/error_rate"] = sum(t.num_tool_errors for t in trajectories) / calls if calls else 0.0
    metrics["tools/responses_with_call"] = sum(1 for t in trajectories if t.num_tool_calls) / count
    metrics["completions/boxed_ratio"] = sum(1 for t in trajectories if t.final_answer is not None) / count
    metrics["completions/model_tokens"] = sum(sum(t.env_mask) for t in tokens) / count
    return metrics
