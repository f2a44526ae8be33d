"""The GRPO stage: build the trainer around agentdata's rollouts, train, save, plot."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PrinterCallback, TrainerCallback

from agentdata.agent.loop import config_tools
from agentdata.engines.demonstrated import demonstrated_policy
from agentdata.engines.trained import TrainedPrompt, write_trained_prompt
from agentdata.errors import UserError
from agentdata.evaluation.curves import SCALING_PLOT, scaling_plot
from agentdata.records import Problem
from agentdata.rl.config import GRPOStageConfig
from agentdata.rl.rewards import reward_functions
from agentdata.rl.rollout import AgentRollout
from agentdata.rl.rollout_engines import RolloutPlan, attach_rollout_engine, plan_rollouts
from agentdata.rl.trainer import AgentGRPOTrainer
from agentdata.rl.validation import validation_callback
from agentdata.training.memory import ReleaseMemoryCallback
from agentdata.training.metrics import MetricsFileCallback, ProgressCallback, read_metrics
from agentdata.training.model import load_model, load_tokenizer, resolve_model_dir, resume_path, save_trained
from agentdata.training.trl_settings import trl_arguments, write_trl_settings


@dataclass
class GRPOResult:
    model_dir: Path
    steps: int
    seconds: float
    metrics_file: Path
    plots: list[Path] = field(default_factory=list)
    history: list[dict[str, Any]] = field(default_factory=list)
    step_times: list[dict[str, float]] = field(default_factory=list)
    rollouts: str = "policy"  # where they came from: policy, trl (TRL's vLLM) or file-push (vLLM fed by files)
    weight_pushes: int = 0  # file-push: how many times the weights went to vLLM


def load_pool(config: GRPOStageConfig) -> list[Problem]:
    """The RL pool's problems (agentdata or verl layout), or the default problems (the `compute` ladder)."""
    if config.rl_pool:
        from agentdata.problems import load_problems

        problems = load_problems(config.rl_pool)
    else:
        from agentdata.synth.builtin import default_problems

        problems = default_problems()
    problems = problems[: config.limit] if config.limit else problems
    if not problems:
        raise UserError(f"{config.rl_pool or 'default problems'}: the RL pool is empty")
    return filled_to_a_step(problems, config.prompts_per_step)


def filled_to_a_step(problems: list[Problem], prompts_per_step: int) -> list[Problem]:
    """A pool smaller than one step's prompts, its problems repeated until a step is full: TRL's sampler drops
    an incomplete batch, so 1 problem with prompts_per_step 2 trained 0 steps without a word (the quickstart's
    band kept 1 of 8 once)."""
    if len(problems) >= prompts_per_step:
        return problems
    from agentdata.events import note

    note(
        "GRPO",
        f"the RL pool has {len(problems)} problem(s), fewer than prompts_per_step {prompts_per_step}: "
        "each step repeats them",
    )
    return [problems[index % len(problems)] for index in range(prompts_per_step)]


def pool_dataset(problems: list[Problem]) -> Any:
    import datasets

    return datasets.Dataset.from_list(
        [
            {"prompt": [{"role": "user", "content": p.question}], "answer": p.answer, "problem_id": p.id}
            for p in problems
        ]
    )


def trl_grpo_config(config: GRPOStageConfig, out_dir: Path, use_vllm: bool) -> Any:
    """TRL's GRPOConfig: what the stage's settings give, with the `trl` fields the user set on top."""
    from trl import GRPOConfig

    return trl_arguments(GRPOConfig, grpo_arguments(config, out_dir, use_vllm), config.trl)


def grpo_arguments(config: GRPOStageConfig, out_dir: Path, use_vllm: bool) -> dict[str, Any]:
    sampling = config.loop.rollout_sampling()  # TRL's own generation samples as the agent loop's rollouts do
    return dict(
        output_dir=str(out_dir / "checkpoints"),
        max_steps=config.max_steps,
        learning_rate=config.optimiser.learning_rate,
        # One micro-batch is one group; a step accumulates prompts_per_step groups.
        per_device_train_batch_size=config.num_generations,
        gradient_accumulation_steps=config.prompts_per_step,
        num_generations=config.num_generations,
        max_completion_length=sampling.max_new_tokens,
        temperature=sampling.temperature,
        top_p=sampling.top_p,
        epsilon=config.epsilon,
        epsilon_high=config.epsilon_high,
        beta=config.beta,
        loss_type=config.loss_type,
        use_vllm=use_vllm,
        vllm_mode="server" if config.vllm_server else "colocate",
        vllm_server_base_url=config.vllm_server or None,
        logging_steps=1,
        save_steps=config.save_steps,
        save_total_limit=config.save_total_limit,
        bf16=config.bf16,
        activation_checkpointing=config.gradient_checkpointing,  # transformers' new name (v5)
        seed=config.seed,
        **config.tracking.trl_arguments(out_dir, "grpo"),
        # TRL's table of sampled rollouts per logged step (prompt, completion, rewards, our tool columns),
        # sent to wandb / trackio and written to checkpoints/completions/: only when a tracker is on.
        log_completions=bool(config.tracking.report_to),
        disable_tqdm=True,
    )


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
    rollout = AgentRollout(
        problems,
        None,
        sandbox,
        config.loop,
        config.num_generations,
        seed=config.seed,
        online_band=config.online_band,
        online_band_rounds=config.online_band_rounds,
    )
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
    validation = validation_callback(config, trainer, rollout, sandbox)
    if validation is not None:  # at step 0, every eval_every steps and after the last; saves a checkpoint each time
        trainer.add_callback(validation)
    return trainer, rollout, step_times


def start_rollout_server(config: GRPOStageConfig) -> Any:
    """vLLM's server on the policy's starting checkpoint, with the endpoints that take weight pushes."""
    from agentdata.engines.vllm_server import ServerSettings, VLLMServer
    from agentdata.events import note

    model_dir = resolve_model_dir(config.model)
    note("GRPO", f"rollouts from vLLM: starting its server on {model_dir} (the weights pushed after every step)")
    return VLLMServer(ServerSettings(model=str(model_dir), dev_mode=True, seed=config.seed)).start()


def run_grpo(config: GRPOStageConfig) -> GRPOResult:
    """Train with GRPO, save the model in config.out, plot (progress as `agentdata.events`)."""
    import os

    if config.mode == "async":  # TRL's AsyncGRPOTrainer, rollouts ahead of training (rl/async_stage.py)
        from agentdata.rl.async_stage import run_async_grpo

        return run_async_grpo(config)

    from agentdata.sandbox import open_sandbox

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL; we pin the version
    config = config.for_run()  # the start model's protocol and prompt where none is set
    out_dir = Path(config.out)
    started = time.perf_counter()
    plan = plan_rollouts(config.use_vllm, config.vllm_server)
    sandbox = open_sandbox(config.loop.sandbox, max_rps=config.loop.sandbox_max_rps)
    server = trainer = None
    try:
        if plan.kind == "file-push" and not plan.server_url:
            server = start_rollout_server(config)
            plan = RolloutPlan("file-push", server.base_url)
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
    history = read_metrics(out_dir / "metrics.jsonl")
    plots = [scaling_plot(history, out_dir / "plots" / SCALING_PLOT)] if config.plots else []
    return GRPOResult(
        out_dir,
        trainer.state.global_step,
        time.perf_counter() - started,
        out_dir / "metrics.jsonl",
        plots,
        history,
        step_times.steps,
        rollouts=plan.kind,
        weight_pushes=getattr(getattr(trainer, "weight_push", None), "pushes", 0),
    )
