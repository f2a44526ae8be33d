"""The GRPO stage in its asynchronous mode (`mode: async`): rollouts of the next steps run while a step trains.

Built on TRL's `AsyncGRPOTrainer` (rl/async_trainer.py: the one subclass, so its packed-tree attention runs off
CUDA too), with agentdata's pieces in the two places TRL made for them:

- `rollout_worker`: `rl.async_worker.AgentRolloutWorker`, the synchronous stage's rollout function (agent loop,
  sandbox, protocols, tools, rewards, tool-output masking, dynamic sampling, online band) in a thread of its own;
- `weight_transfer`: where the rollouts come from (`rl.rollout_engines.plan_rollouts`, as in the synchronous
  stage): a vLLM server fed by files (rl/vllm_push.py) or, with `use_vllm: no`, a copy of the policy in this
  process (rl/async_engines.py), refreshed after every optimiser step (rl/weight_transfer.py).

TRL bounds how stale a trained sample may be (`max_staleness`, samples older dropped and counted), logs each
sample's staleness and how long the trainer waited for samples (`perf/rollout_wait_s`); the worker logs how long
the engine waited for the trainer (`async/engine_wait_s`) and everything the synchronous stage logs per step.
A killed run resumes from its last checkpoint (`--resume last`): TRL restores the optimiser and the step, the
worker goes on from the group after the last one trained (`agentdata_rollout_state.json` in the checkpoint).
"""

from __future__ import annotations

import contextlib
import json
import time
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, TrainerCallback

from agentdata.errors import UserError
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.validation import validation_callback

ROLLOUT_STATE_FILE = "agentdata_rollout_state.json"
HEARTBEAT_STALE_S = 1800.0  # a CPU batch of agentic rollouts can take minutes: TRL's 300 s would call it hung


def async_grpo_arguments(config: GRPOStageConfig, out_dir: Path) -> Any:
    """TRL's AsyncGRPOConfig: the synchronous stage's arguments where TRL's asynchronous trainer has them."""
    from trl.experimental.async_grpo import AsyncGRPOConfig

    from agentdata.rl.stage_inputs import grpo_arguments
    from agentdata.training.trl_settings import trl_arguments

    shared = grpo_arguments(config, out_dir, use_vllm=False)
    for only_sync in ("beta", "loss_type", "use_vllm", "vllm_mode", "vllm_server_base_url"):
        shared.pop(only_sync)  # checked in GRPOStageConfig (beta 0, dapo); the engine is the worker's
    computed = dict(
        shared,
        gradient_checkpointing=config.gradient_checkpointing,  # AsyncGRPOConfig's default is on
        token_budget=0,  # a fixed count per micro-batch (one group), as the synchronous stage; unset asks vLLM
        max_staleness=config.max_staleness,
        heartbeat_stale_after_s=HEARTBEAT_STALE_S,
    )
    return trl_arguments(AsyncGRPOConfig, computed, config.trl)


def check_async_engine(config: GRPOStageConfig) -> None:
    """What the engine the stage would roll out with cannot do, one line before any work (train checks it before
    SFT): vLLM's prompt log-probabilities, the behaviour policy's in the loss, are at temperature 1.0."""
    from agentdata.rl.rollout_engines import plan_rollouts

    if plan_rollouts(config.use_vllm, config.vllm_server).kind == "policy" or config.loop.temperature == 1.0:
        return
    raise UserError(
        f"mode async with vLLM rollouts: temperature {config.loop.temperature} — the trainer's log-probabilities "
        "are at the sampling temperature and vLLM's prompt log-probabilities at 1.0; use temperature 1.0 "
        "or use_vllm no"
    )


def start_engine(
    config: GRPOStageConfig, tokenizer: Any, model_dir: Path, rollout_server: Any = None
) -> tuple[Any, Any, Any, Any, str]:
    """The rollout engine, what scores its tokens, the weight transfer, the server started here (or None), and
    the plan's name: a copy of the policy where the synchronous stage would roll out from the policy itself, else
    a vLLM server fed by files (`vllm_server`, a dev-mode server on this machine, `rollout_server` the caller
    started, or one started here)."""
    from agentdata.rl.rollout_engines import plan_rollouts

    plan = plan_rollouts(config.use_vllm, config.vllm_server)
    if plan.kind == "policy":
        from agentdata.rl.async_engines import CopyEngine
        from agentdata.rl.weight_transfer import CopyWeightTransfer
        from agentdata.training.model import load_model

        engine = CopyEngine(load_model(model_dir, bf16=config.bf16), tokenizer, config.loop.temperature)
        return engine, engine, CopyWeightTransfer(engine), None, "policy-copy"
    check_async_engine(config)
    from agentdata.rl.async_engines import ServerScorer
    from agentdata.rl.stage_inputs import start_rollout_server
    from agentdata.rl.vllm_completions import CompletionsClient
    from agentdata.rl.vllm_push import FileWeightPush, check_file_push_server
    from agentdata.rl.vllm_server_policy import ServerVLLMEngine
    from agentdata.rl.weight_transfer import FileWeightTransfer

    # On a GPU with vLLM installed the synchronous plan is TRL's own vLLM ("trl"); here it is a server all the same.
    given = config.vllm_server.rstrip("/") or (rollout_server.base_url if rollout_server is not None else "")
    server = None if given else start_rollout_server(config)
    url = given or server.base_url
    check_file_push_server(url)
    client = CompletionsClient(url)
    engine = ServerVLLMEngine(client, tokenizer, spec="policy-vllm-file-push")
    return engine, ServerScorer(client), FileWeightTransfer(FileWeightPush(url)), server, "file-push"


class RolloutStateCallback(TrainerCallback):
    """Writes, in every checkpoint, the group the worker resumes from: the one after the last group trained."""

    def __init__(self, trainer: Any, first_group: int):
        self.trainer = trainer
        self.first_group = first_group

    def on_save(self, args, state, control, **kwargs):
        trained = self.trainer._trained_groups  # TRL's: the group ids its collator packed (the pinned 1.16)
        state_file = Path(args.output_dir) / f"checkpoint-{state.global_step}" / ROLLOUT_STATE_FILE
        state_file.write_text(json.dumps({"next_group": max(trained, default=self.first_group - 1) + 1}))


class StepClock(TrainerCallback):
    """Each step's wall time (TRL's own `perf/step_s` skips the first step)."""

    def __init__(self):
        self.last = 0.0
        self.steps: list[dict[str, float]] = []

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        now = time.perf_counter()
        self.steps.append({"step": state.global_step, "step_s": now - self.last})
        self.last = now


def resumed_group(checkpoint: str | None) -> int:
    """The group a resumed run's worker starts from (0 for a fresh run)."""
    if checkpoint is None:
        return 0
    state_file = Path(checkpoint) / ROLLOUT_STATE_FILE
    return int(json.loads(state_file.read_text())["next_group"]) if state_file.is_file() else 0


def build_async_trainer(config: GRPOStageConfig, sandbox: Any, engine_parts: tuple, first_group: int = 0):
    """The trainer, its worker and step clock, around an engine from `start_engine`."""
    from agentdata.agent.loop import config_tools
    from agentdata.engines.demonstrated import demonstrated_policy
    from agentdata.rl.async_trainer import AgentAsyncGRPOTrainer
    from agentdata.rl.async_worker import AgentRolloutWorker
    from agentdata.rl.rewards import reward_functions
    from agentdata.rl.stage_inputs import load_pool, pool_dataset, stage_rollout
    from agentdata.training.metrics import MetricsFileCallback, ProgressCallback
    from agentdata.training.model import load_tokenizer, resolve_model_dir

    engine, scorer, transfer, _, _ = engine_parts
    out_dir = Path(config.out)
    rewards = reward_functions(config)
    config_tools(config.loop)
    model_dir = resolve_model_dir(config.model)
    tokenizer = load_tokenizer(model_dir, config.prompt_template)
    problems = load_pool(config)
    rollout = stage_rollout(config, problems, demonstrated_policy(config.model, engine), sandbox)
    worker = AgentRolloutWorker(
        rollout,
        tokenizer,
        rewards,
        scorer,
        prompts_per_batch=config.prompts_per_step,
        max_staleness=config.max_staleness,
        dynamic_sampling=config.dynamic_sampling,
        seed=config.seed,
        first_group=first_group,
        cancel=getattr(engine, "cancel", None),  # the copy stops at once; a server agentdata started is stopped
    )
    clock = StepClock()
    trainer = AgentAsyncGRPOTrainer(
        str(model_dir),
        args=async_grpo_arguments(config, out_dir),
        train_dataset=pool_dataset(problems),
        processing_class=tokenizer,
        peft_config=config.optimiser.peft_config(),
        callbacks=[MetricsFileCallback(out_dir / "metrics.jsonl", "GRPO"), ProgressCallback("GRPO"), clock],
        rollout_worker=worker,
        weight_transfer=transfer,
    )
    trainer.remove_callback(PrinterCallback)  # our callback prints one line per step instead
    # Added after TRL's own callbacks, so a checkpoint and an evaluation at a step follow the step's weight sync.
    trainer.add_callback(RolloutStateCallback(trainer, first_group))
    # held out on the rollout engine, which holds the weights TRL published after the step
    validation = validation_callback(config, trainer, lambda: contextlib.nullcontext(rollout.engine), sandbox)
    if validation is not None:
        trainer.add_callback(validation)
    return trainer, worker, clock


def run_async_grpo(config: GRPOStageConfig, rollout_server: Any = None) -> Any:
    """Train with asynchronous GRPO; the same result, files and plots as the synchronous stage (rl/run.py)."""
    import os

    from agentdata.engines.trained import TrainedPrompt, write_trained_prompt
    from agentdata.events import note
    from agentdata.rl.stage_inputs import stage_result
    from agentdata.sandbox import open_sandbox
    from agentdata.training.model import load_tokenizer, resolve_model_dir, resume_path, save_trained
    from agentdata.training.trl_settings import write_trl_settings

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # trl.experimental.async_grpo; the version is pinned
    config = config.for_run()
    out_dir = Path(config.out)
    started = time.perf_counter()
    checkpoint = resume_path(config.resume_from_checkpoint, out_dir / "checkpoints")
    model_dir = resolve_model_dir(config.model)
    sandbox = open_sandbox(config.loop.sandbox, max_rps=config.loop.sandbox_max_rps)
    server = None
    try:
        tokenizer = load_tokenizer(model_dir, config.prompt_template)
        engine_parts = start_engine(config, tokenizer, model_dir, rollout_server)  # a server handed in stays up
        server = engine_parts[3]
        first_group = resumed_group(checkpoint)
        note("GRPO", f"asynchronous: rollouts up to {config.max_staleness} step(s) ahead ({engine_parts[4]})")
        trainer, worker, clock = build_async_trainer(config, sandbox, engine_parts, first_group)
        write_trl_settings(trainer.args, out_dir)
        trainer.train(resume_from_checkpoint=checkpoint)
        save_trained(trainer.model, trainer.processing_class, out_dir)
        write_trained_prompt(out_dir, TrainedPrompt(config.loop.protocol, config.loop.system_prompt, "rl"))
    finally:
        sandbox.close()
        if server is not None:
            server.stop()
    transfer = engine_parts[2]
    pushes = getattr(getattr(transfer, "pusher", transfer), "pushes", 0)
    return stage_result(config, trainer.state.global_step, started, clock.steps, f"async-{engine_parts[4]}", pushes)
