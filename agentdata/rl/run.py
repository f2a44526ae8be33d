"""The GRPO stage: build the trainer around agentdata's rollouts, train, save, plot."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, TrainerCallback

from agentdata.agent.loop import config_tools
from agentdata.engines.demonstrated import demonstrated_policy
from agentdata.engines.trained import TrainedPrompt, write_trained_prompt
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.rewards import reward_functions
from agentdata.rl.rollout import AgentRollout
from agentdata.rl.rollout_engines import RolloutPlan, attach_rollout_engine, plan_rollouts
from agentdata.rl.stage_inputs import (
    GRPOResult,
    load_pool,
    pool_dataset,
    stage_result,
    stage_rollout,
    start_rollout_server,
    trl_grpo_config,
)
from agentdata.rl.trainer import AgentGRPOTrainer
from agentdata.rl.validation import policy_engine, validation_callback
from agentdata.training.memory import ReleaseMemoryCallback
from agentdata.training.metrics import MetricsFileCallback, ProgressCallback
from agentdata.training.model import load_model, load_tokenizer, resolve_model_dir, resume_path, save_trained
from agentdata.training.trl_settings import write_trl_settings


class StepTimeCallback(TrainerCallback):
    """Where a step's time goes: generation, sandbox + loop, and the rest (scoring and optimisation)."""

    def __init__(self, rollout: AgentRollout):
        self.rollout = rollout
        self.started = 0.0
        self.steps: list[dict[str, float]] = []

    def on_step_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, **kwargs):
        total = time.perf_counter() - self.started
        stats = self.rollout.stats
        self.steps.append(
            {
                "step": state.global_step,
                "step_s": total,
                "generation_s": stats.generation_s,
                "sandbox_and_loop_s": stats.sandbox_s,
                "scoring_and_optimisation_s": max(0.0, total - stats.rollout_s),
            }
        )


def build_grpo_trainer(config: GRPOStageConfig, sandbox: Any, plan: RolloutPlan | None = None):
    """The trainer, its rollout and step timer; `plan` (default: plan_rollouts of the settings) says where
    rollouts come from, and a `file-push` plan must carry its server's URL (run_grpo starts one)."""
    config = config.for_run()
    out_dir = Path(config.out)
    rewards = reward_functions(config)  # a broken reward plug-in is named before the model loads
    config_tools(config.loop)  # and so is a broken tool
    model_dir = resolve_model_dir(config.model)
    tokenizer = load_tokenizer(model_dir, config.prompt_template)
    problems = load_pool(config)
    plan = plan or plan_rollouts(config.use_vllm, config.vllm_server)
    rollout = stage_rollout(config, problems, None, sandbox)
    step_times = StepTimeCallback(rollout)
    trainer = AgentGRPOTrainer(
        model=load_model(model_dir, bf16=config.bf16),
        reward_funcs=rewards,
        args=trl_grpo_config(config, out_dir, plan.trl_vllm),
        train_dataset=pool_dataset(problems),
        processing_class=tokenizer,
        peft_config=config.optimiser.peft_config(),
        rollout_func=rollout,
        callbacks=[
            MetricsFileCallback(out_dir / "metrics.jsonl", "GRPO"),
            ProgressCallback("GRPO"),
            step_times,
            ReleaseMemoryCallback(),  # the rollout thread's and the step's freed memory, back between steps
        ],
        dynamic_sampling=config.dynamic_sampling,
    )
    trainer.remove_callback(PrinterCallback)  # our callback prints one line per step instead
    attach_rollout_engine(trainer, rollout, tokenizer, plan)
    rollout.engine = demonstrated_policy(config.model, rollout.engine)
    validation = validation_callback(config, trainer, lambda: policy_engine(trainer, rollout), sandbox)
    if validation is not None:  # at step 0, every eval_every steps and after the last; saves a checkpoint each time
        trainer.add_callback(validation)
    return trainer, rollout, step_times


def run_grpo(config: GRPOStageConfig, rollout_server: Any = None) -> GRPOResult:
    """Train with GRPO, save the model in config.out, plot (progress as `agentdata.events`).

    `rollout_server`: the vLLM server the stage would start itself (`stage_starts_server`), started by the caller on
    the start model (`start_rollout_server`) and stopped by it (`train`'s closed loop profiled on it first)."""
    import os

    if config.mode == "async":  # TRL's AsyncGRPOTrainer, rollouts ahead of training (rl/async_stage.py)
        from agentdata.rl.async_stage import run_async_grpo

        return run_async_grpo(config, rollout_server)

    from agentdata.sandbox import open_sandbox

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL; we pin the version
    config = config.for_run()  # the start model's protocol and prompt where none is set
    out_dir = Path(config.out)
    started = time.perf_counter()
    plan = plan_rollouts(config.use_vllm, config.vllm_server)
    sandbox = open_sandbox(config.loop.sandbox, max_rps=config.loop.sandbox_max_rps)
    server = trainer = None  # server: the one started here
    try:
        if plan.kind == "file-push" and not plan.server_url:
            if rollout_server is None:
                rollout_server = server = start_rollout_server(config)
            plan = RolloutPlan("file-push", rollout_server.base_url, server_has_start_weights=True)
        trainer, _, step_times = build_grpo_trainer(config, sandbox, plan)
        write_trl_settings(trainer.args, out_dir)  # what TRL actually ran with, after its own defaults
        trainer.train(resume_from_checkpoint=resume_path(config.resume_from_checkpoint, out_dir / "checkpoints"))
        save_trained(trainer.model, trainer.processing_class, out_dir)
        # what later runs of the model default to: the protocol and prompt it was rolled out in
        write_trained_prompt(out_dir, TrainedPrompt(config.loop.protocol, config.loop.system_prompt, "rl"))
    finally:
        sandbox.close()
        if server is not None:
            server.stop()
        if (pusher := getattr(trainer, "weight_push", None)) is not None:
            pusher.close()
    pushes = getattr(getattr(trainer, "weight_push", None), "pushes", 0)
    return stage_result(config, trainer.state.global_step, started, step_times.steps, plan.kind, pushes)
