"""Evaluating the policy while it trains: a transformers `TrainerCallback` that runs `eval`'s runner.

At each evaluation the in-memory policy answers every held-out problem `eval_k` times through
the agent loop (`evaluation.runner.run_benchmark`: a collect run dir under
`OUT/eval/step-NNNNNN`, kept so `agentdata inspect` shows what the policy wrote), the responses
are scored by `evaluation.metrics.benchmark_metrics` (one definition of avg@k and pass@k), and one
record goes to the stage's `metrics.jsonl` (keys: `evaluation/validation.py`). An evaluation
step also sets `control.should_save`, so its checkpoint is kept and can be re-evaluated later.

Training is left as it was: the engine puts the model in eval mode and generates under
`torch.inference_mode` (hf engine), the train mode is restored after, and the global torch RNG
is forked around the evaluation, so a run with validation takes the same steps as one without.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from agentdata.agent.config import CollectConfig, LoopConfig, all_in_flight
from agentdata.evaluation.metrics import BenchmarkMetrics, benchmark_metrics
from agentdata.evaluation.runner import run_benchmark
from agentdata.evaluation.validation import EVAL_PREFIX, ValidationConfig
from agentdata.events import Event, emit
from agentdata.records import Problem
from agentdata.training.metrics import append_record

EVAL_DIR = "eval"

PolicyProvider = Callable[[], AbstractContextManager[Any]]  # yields an engine generating with the current weights


def load_eval_problems(settings: ValidationConfig) -> list[Problem]:
    """The held-out problems, each once (a duplicate would count twice in avg@k)."""
    from agentdata.agent.resume import unique_problems
    from agentdata.errors import UserError
    from agentdata.problems import load_problems

    problems = unique_problems(load_problems(settings.eval_problems), settings.eval_problems)
    if not problems:
        raise UserError(f"{settings.eval_problems}: no eval problems")
    return problems


def validation_record(step: int, metrics: BenchmarkMetrics, k: int, seconds: float) -> dict[str, Any]:
    """One metrics.jsonl record of an evaluation: avg@k (and its 95% interval), pass@k with the real k in the key."""
    interval = metrics.avg_at_k_ci
    return {
        "step": step,
        f"{EVAL_PREFIX}avg@{k}": metrics.avg_at_k,
        f"{EVAL_PREFIX}avg@{k}/low": interval.low if interval else None,
        f"{EVAL_PREFIX}avg@{k}/high": interval.high if interval else None,
        f"{EVAL_PREFIX}pass@{k}": metrics.pass_at_k.get(k, metrics.pass_at_samples),
        f"{EVAL_PREFIX}maj@{k}": metrics.maj_at_k,
        f"{EVAL_PREFIX}tools/call_frequency": metrics.mean_tool_calls,
        f"{EVAL_PREFIX}tools/error_rate": metrics.tool_error_rate,
        f"{EVAL_PREFIX}completions/model_tokens": metrics.mean_response_tokens,
        f"{EVAL_PREFIX}rollouts/failed": metrics.failed_responses,
        f"{EVAL_PREFIX}seconds": seconds,
    }


class ValidationCallback(TrainerCallback):
    """Evaluates the policy at step 0 (`at_start`), every `every` steps and after the last step."""

    def __init__(
        self,
        settings: ValidationConfig,
        loop: LoopConfig,
        out_dir: Path,
        policy: PolicyProvider,
        task: str,
        every: int | None,
        at_start: bool,
        sandbox: Any = None,
        seed: int = 0,
        trackers: Callable[[], list[Any]] | None = None,
    ):
        self.settings = settings
        self.problems = load_eval_problems(settings)
        self.loop = loop
        self.out_dir = Path(out_dir)
        self.policy = policy
        self.task = task
        self.every = every
        self.at_start = at_start
        self.sandbox = sandbox  # None: each evaluation opens (and closes) `loop.sandbox`
        self.seed = seed
        self.evaluated: dict[int, dict[str, Any]] = {}
        self.trackers = trackers  # the trainer's experiment-tracker callbacks (--report-to), called at each record

    def on_train_begin(self, args, state, control, **kwargs):
        if self.at_start and state.global_step == 0:  # a resumed run was evaluated when its checkpoint was saved
            self.report(args, state, control, self.evaluate(0, state.is_world_process_zero))

    def on_step_end(self, args, state, control, **kwargs):
        step = state.global_step
        due = bool(self.every and step % self.every == 0) or step >= state.max_steps
        if due and step not in self.evaluated:
            self.report(args, state, control, self.evaluate(step, state.is_world_process_zero))
            control.should_save = True  # every evaluated policy keeps its checkpoint
        return control

    def report(self, args, state, control, record: dict[str, Any]) -> None:
        """The record to the run's trackers, as `eval_*` logs (TensorBoard and wandb show them as `eval/*`)."""
        if not self.trackers or not state.is_world_process_zero:
            return
        logs = {
            f"eval_{key.removeprefix(EVAL_PREFIX)}": value
            for key, value in record.items()
            if key.startswith(EVAL_PREFIX) and isinstance(value, (int, float))
        }
        for tracker in self.trackers():
            tracker.on_log(args, state, control, logs=logs)

    def evaluate(self, step: int, write: bool = True) -> dict[str, Any]:
        """Evaluate the current policy; the record is appended to metrics.jsonl by the main process."""
        started = time.perf_counter()
        run_dir = self.out_dir / EVAL_DIR / f"step-{step:06d}"
        shutil.rmtree(run_dir, ignore_errors=True)  # responses of older weights (an earlier run) are no answer now
        config = CollectConfig(
            model=f"policy@step-{step}",
            samples=self.settings.eval_k,
            seed=self.seed,
            concurrency=all_in_flight(len(self.problems) * self.settings.eval_k),
            loop=self.loop,
        )
        with untouched_training_state(), self.policy() as engine:
            responses, _ = run_benchmark(self.problems, run_dir, config, engine, self.sandbox)
        record = validation_record(
            step, benchmark_metrics(responses), self.settings.eval_k, time.perf_counter() - started
        )
        self.evaluated[step] = record
        if write:
            append_record(self.out_dir / "metrics.jsonl", record)
            emit(Event("log", self.task, message=eval_line(record)))
        return record


def eval_line(record: dict[str, Any]) -> str:
    """`eval step 4: avg@4=0.25 [0.1, 0.42]  pass@4=...`: each number once, avg@k with its interval."""
    shown = []
    for key, value in record.items():
        if not key.startswith(EVAL_PREFIX) or not isinstance(value, (int, float)) or key.endswith(("/low", "/high")):
            continue
        text = f"{key.removeprefix(EVAL_PREFIX)}={value:.4g}"
        low, high = record.get(f"{key}/low"), record.get(f"{key}/high")
        shown.append(text + (f" [{low:.3g}, {high:.3g}]" if low is not None and high is not None else ""))
    return f"eval step {record['step']}: {'  '.join(shown)}"


@contextmanager
def untouched_training_state() -> Iterator[None]:
    """The global torch RNG is as before (the engine reseeds it per batch to sample), so a run with
    validation takes the same training steps as one without; the engine restores the model's mode."""
    import torch

    devices = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=devices):
        yield


@contextmanager
def model_engine(model: Any, tokenizer: Any) -> Iterator[Any]:
    """An hf `ModelEngine` over a live model (SFT's); the engine itself puts the model in eval mode for
    each batch and back in train mode after it."""
    from agentdata.engines.hf import ModelEngine

    engine = ModelEngine(model, tokenizer, spec="policy")
    try:
        yield engine
    finally:
        engine.wait_idle()  # training resumes next: the generating thread must be out of the model
