"""agentdata's agent loop as the rollout worker of TRL's `AsyncGRPOTrainer` (its `RolloutWorkerProtocol`).

A thread of its own produces one generation batch after another — `prompts_per_step` groups of `num_generations`
rollouts, the synchronous stage's batch — with the synchronous stage's own rollout function (`rl.rollout.
AgentRollout`: the agent loop, the sandbox, the protocol's re-rendering with tool output masked, the online band)
and its reward functions; scores each group (the synchronous stage's group baseline and scale, a failed rollout
left out), and puts every rollout on TRL's queue as a `RolloutSample` tagged with the policy version the batch
started from. TRL's trainer takes samples from the queue, drops and counts those more than `max_staleness`
versions old (`sample/dropped_stale_total`), and logs each one's staleness (`sample/staleness_mean|max`).

The worker itself keeps within the bound rather than generating what would be thrown away: batch b (counted
from the start) begins only once the policy has moved to version start + b - max_staleness, so with
max_staleness 1 the next step's rollouts run while this step trains, with 2 two steps ahead. The time it waits
for that is the engine's idle time, `async/engine_wait_s`; the trainer's wait for samples is TRL's
`perf/rollout_wait_s`.

What the synchronous stage logs per step is logged per batch through TRL's metrics queue (`accuracy`,
`tools/*`, `completions/*`, `rollouts/failed_ratio`, `groups/flat_share`, `online_band/*`,
`dynamic_sampling/kept_group_ratio`) or per sample, averaged by TRL's collator (`reward`, `rewards/NAME/mean`).
Dynamic sampling leaves the flat groups of a batch out of the queue — DAPO's way, the queue is refilled by the
next batches — unless every group of the batch is flat (then the batch goes in: the trainer never starves).
"""

from __future__ import annotations

import math
import queue
import random
import threading
import time
from collections import defaultdict
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch

from agentdata.records import Problem, Trajectory
from agentdata.rl.rollout import AgentRollout
from agentdata.rl.trainer import flat_group_share
from agentdata.training.trackers import rollout_failed

ENGINE_WAIT_KEY = "async/engine_wait_s"
STOP_JOIN_S = 30.0  # how long stop() waits for a batch in flight before leaving the (daemon) thread behind


class GroupStream:
    """The pool's problems, one per group, in a seeded order reshuffled each pass: group g is always the same
    problem, so a resumed run goes on from the first group it had not trained."""

    def __init__(self, problems: list[Problem], seed: int):
        self.problems = problems
        self.seed = seed

    def problem(self, group_id: int) -> Problem:
        passes, index = divmod(group_id, len(self.problems))
        order = list(range(len(self.problems)))
        random.Random(self.seed + passes).shuffle(order)
        return self.problems[order[index]]


class RolloutSink:
    """What `AgentRollout` reads of a trainer: the tokenizer, the metric lists it appends to, train mode."""

    def __init__(self, tokenizer: Any):
        self.processing_class = tokenizer
        self._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        self.model = SimpleNamespace(training=True)
        self.log_completions = False

    def drain(self) -> dict[str, float]:
        """The metrics appended since the last drain, each averaged."""
        metrics = {key: float(np.mean(values)) for key, values in self._metrics["train"].items() if values}
        self._metrics["train"].clear()
        return metrics


class AgentRolloutWorker:
    """TRL's `RolloutWorkerProtocol` over agentdata's rollouts (see the module's docstring)."""

    def __init__(
        self,
        rollout: AgentRollout,
        tokenizer: Any,
        reward_funcs: list[Any],
        scorer: Any,
        *,
        prompts_per_batch: int,
        max_staleness: int,
        dynamic_sampling: bool = False,
        seed: int = 0,
        first_group: int = 0,
        cancel: Any = None,
    ):
        self.rollout = rollout
        self.tokenizer = tokenizer
        self.reward_funcs = reward_funcs
        self.reward_names = [getattr(func, "__name__", type(func).__name__) for func in reward_funcs]
        self.scorer = scorer  # score(token id lists) -> per-token log-probabilities under the engine's weights
        self.stream = GroupStream(rollout.problems, seed)
        self.prompts_per_batch = prompts_per_batch
        self.max_staleness = max_staleness
        self.dynamic_sampling = dynamic_sampling
        self.next_group = first_group
        self.cancel = cancel  # called by stop(): cuts a batch in flight short (training is over, nobody takes it)
        self.sink = RolloutSink(tokenizer)
        self.rollout_buffer: queue.Queue = queue.Queue()
        self.metrics_queue: queue.Queue = queue.Queue()
        self.batches = 0
        self.engine_wait_s = 0.0
        self._version = 0
        self._version_moved = threading.Condition()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._heartbeat = time.monotonic()

    # --- TRL's RolloutWorkerProtocol

    def start(self) -> None:
        self._heartbeat = time.monotonic()
        self._thread = threading.Thread(target=self._run, name="agentdata-rollout-worker", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        with self._version_moved:
            self._version_moved.notify_all()
        if self.cancel is not None:
            self.cancel()
        if self._thread is not None:
            self._thread.join(timeout=STOP_JOIN_S)

    def update_model_version(self, model_version: int) -> None:
        with self._version_moved:
            self._version = model_version
            self._version_moved.notify_all()

    def check_health(self, stale_after_s: float) -> None:
        if self._error is not None:
            raise RuntimeError(f"the rollout worker failed: {type(self._error).__name__}: {self._error}") from (
                self._error
            )
        if self._thread is not None and not self._thread.is_alive() and not self._stopping.is_set():
            raise RuntimeError("the rollout worker stopped producing without an error")
        if time.monotonic() - self._heartbeat > stale_after_s:
            raise RuntimeError(f"the rollout worker produced nothing for {stale_after_s:.0f}s")

    # --- the worker's thread

    def _run(self) -> None:
        try:
            start_version = self._version
            while not self._stopping.is_set():
                waited = self._wait_for_version(start_version + self.batches - self.max_staleness)
                if self._stopping.is_set():
                    return
                self._produce(self._version, waited)
                self.batches += 1
        except BaseException as error:  # check_health raises it in the trainer's thread
            self._error = error

    def _wait_for_version(self, version: int) -> float:
        """Block until the policy is at `version` or later (or the worker stops); the seconds waited."""
        started = time.perf_counter()
        with self._version_moved:
            while self._version < version and not self._stopping.is_set():
                self._heartbeat = time.monotonic()  # waiting on the trainer is no hang of ours
                self._version_moved.wait(timeout=1.0)
        waited = time.perf_counter() - started
        self.engine_wait_s += waited
        return waited

    def _produce(self, version: int, waited_s: float) -> None:
        group_ids = list(range(self.next_group, self.next_group + self.prompts_per_batch))
        self.next_group += self.prompts_per_batch
        samples, metrics = self.generate_batch(group_ids, version)
        if self._stopping.is_set():  # the batch that ran past the end of training
            return
        for sample in samples:
            sample.enqueued_at = time.time()
            self.rollout_buffer.put(sample)
        self.metrics_queue.put({**metrics, ENGINE_WAIT_KEY: waited_s})
        self._heartbeat = time.monotonic()

    def generate_batch(self, group_ids: list[int], version: int) -> tuple[list[Any], dict[str, float]]:
        """One batch's rollouts as scored RolloutSamples, and the batch's metrics."""
        size = self.rollout.num_generations
        questions = [self.stream.problem(group_id).question for group_id in group_ids for _ in range(size)]
        fields = self.rollout(questions, self.sink)  # the synchronous stage's rollout function, band included
        trajectories = self.rollout.last_trajectories
        rewards, per_func = self.score(trajectories, fields)
        advantages = group_advantages(rewards, size)
        metrics = self.sink.drain()
        metrics["groups/flat_share"] = flat_group_share(rewards, size)
        keep = self._kept_groups(advantages, trajectories, size, metrics)
        chosen = [row for row, t in enumerate(trajectories) if keep[row // size] and not rollout_failed(t)]
        sequences = {row: fields["prompt_ids"][row] + fields["completion_ids"][row] for row in chosen}
        logprobs = self.scorer.score([sequences[row] for row in chosen]) if chosen else []
        samples = [
            self._sample(row, group_ids[row // size], version, fields, sequences[row], row_logprobs)
            for row, row_logprobs in zip(chosen, logprobs)
        ]
        for sample, row in zip(samples, chosen):
            sample.advantage = float(advantages[row])
            sample.metrics = {"reward": float(rewards[row])}
            sample.metrics.update(
                {f"rewards/{name}/mean": float(value) for name, value in zip(self.reward_names, per_func[row])}
            )
        return samples, metrics

    def score(self, trajectories: list[Trajectory], fields: dict[str, Any]) -> tuple[torch.Tensor, torch.Tensor]:
        """The rewards (summed over the reward functions, NaN for a failed rollout) and each function's, as the
        synchronous trainer computes them: the same functions, given the same extra fields."""
        decoded = [self.tokenizer.decode(ids) for ids in fields["completion_ids"]]
        completions = [[{"role": "assistant", "content": text}] for text in decoded]
        extra = {key: value for key, value in fields.items() if key not in ("prompt_ids", "completion_ids", "logprobs")}
        extra["problem_id"] = [trajectory.problem_id for trajectory in trajectories]
        prompts = [[{"role": "user", "content": trajectory.question}] for trajectory in trajectories]
        columns = [
            func(prompts=prompts, completions=completions, completion_ids=fields["completion_ids"], **extra)
            for func in self.reward_funcs
        ]
        per_func = torch.tensor(
            [[math.nan if value is None else float(value) for value in column] for column in columns],
            dtype=torch.float32,
        ).T.reshape(len(trajectories), len(self.reward_funcs))
        failed = torch.tensor([rollout_failed(trajectory) for trajectory in trajectories])
        per_func[failed] = math.nan  # a failure is no wrong answer: left out of its group
        total = per_func.nansum(dim=1)
        total[per_func.isnan().all(dim=1)] = math.nan
        return total, per_func

    def _kept_groups(self, advantages: torch.Tensor, trajectories: list[Trajectory], size: int, metrics: dict) -> list:
        """Which groups go on the queue: all, or with dynamic sampling the ones with a signal (all if none has)."""
        groups = len(trajectories) // size
        if not self.dynamic_sampling:
            return [True] * groups
        signal = [bool((advantages[g * size : (g + 1) * size].abs() > 1e-6).any()) for g in range(groups)]
        metrics["dynamic_sampling/kept_group_ratio"] = sum(signal) / max(1, groups)
        return signal if any(signal) else [True] * groups

    def _sample(self, row: int, group_id: int, version: int, fields: dict, sequence: list, logprobs: list) -> Any:
        """One rollout as TRL's RolloutSample (through its TrainingSequence: tokens, loss mask, old log-probs)."""
        from trl.experimental.async_grpo.async_rollout_worker import RolloutSample, TrainingSequence

        prompt_ids, completion_ids = fields["prompt_ids"][row], fields["completion_ids"][row]
        training = TrainingSequence(
            input_ids=sequence,
            completion_mask=[0] * len(prompt_ids) + list(fields["env_mask"][row]),
            old_log_probs=logprobs,
            rollout_id=f"{group_id}-{row}",
        )
        return RolloutSample(
            prompt=[{"role": "user", "content": self.tokenizer.decode(prompt_ids)}],
            completion=[{"role": "assistant", "content": self.tokenizer.decode(completion_ids)}],
            input_ids=np.asarray(training.input_ids, dtype=np.int64),
            completion_mask=np.asarray(training.completion_mask, dtype=np.int64),
            old_log_probs=np.asarray(training.old_log_probs, dtype=np.float32),
            advantage=0.0,
            model_version=version,
            group_id=group_id,
            metrics={},
        )


def group_advantages(rewards: torch.Tensor, group_size: int) -> torch.Tensor:
    """The synchronous GRPOTrainer's advantages under its default `scale_rewards: group`: each reward minus its
    group's mean, over the group's std (+1e-4); NaN rewards (failed rollouts) are left out and get 0."""
    from trl.trainer.utils import nanstd

    grouped = rewards.view(-1, group_size)
    mean = torch.nanmean(grouped, dim=1, keepdim=True)
    std = nanstd(grouped, dim=1).unsqueeze(1)
    return torch.nan_to_num(((grouped - mean) / (std + 1e-4)).flatten(), nan=0.0)
