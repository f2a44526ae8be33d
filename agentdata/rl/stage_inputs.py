"""What both GRPO stages share (the synchronous one in rl/run.py, the asynchronous one in rl/async_stage.py): the
RL pool as problems and as a dataset, TRL's arguments from the stage's settings, vLLM's rollout server, and the
stage's result."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.evaluation.curves import SCALING_PLOT, scaling_plot
from agentdata.records import Problem
from agentdata.rl.config import GRPOStageConfig
from agentdata.training.metrics import read_metrics
from agentdata.training.model import resolve_model_dir
from agentdata.training.trl_settings import trl_arguments


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


def stage_starts_server(config: GRPOStageConfig) -> bool:
    """Whether the stage starts a vLLM server of its own for its rollouts (`start_rollout_server`): no `vllm_server`
    is given and the rollouts come from vLLM fed by files (the synchronous stage unless TRL drives vLLM in this
    process, the asynchronous one whenever it takes vLLM)."""
    from agentdata.rl.rollout_engines import plan_rollouts

    if config.vllm_server:
        return False
    kind = plan_rollouts(config.use_vllm, config.vllm_server).kind
    return kind != "policy" if config.mode == "async" else kind == "file-push"


def start_rollout_server(config: GRPOStageConfig) -> Any:
    """vLLM's server on the policy's starting checkpoint, with the endpoints that take weight pushes."""
    from agentdata.engines.vllm_server import ServerSettings, VLLMServer
    from agentdata.events import note

    model_dir = resolve_model_dir(config.model)
    note("GRPO", f"rollouts from vLLM: starting its server on {model_dir} (the weights pushed after every step)")
    return VLLMServer(ServerSettings(model=str(model_dir), dev_mode=True, seed=config.seed)).start()


def served_start_policy(config: GRPOStageConfig, server_url: str, spec: str) -> Any:
    """The engine of the stage's rollouts on the vLLM server at `server_url` before any weight push, named `spec`:
    each prompt rendered by the start model's tokenizer and sent as token ids to `/v1/completions`, as
    `rollout_engines` attaches it, shown the worked examples where GRPO's rollouts are (`demonstrated_policy`).
    `train`'s closed loop profiles the start model with it on the server the stage then trains with."""
    from agentdata.engines.demonstrated import DemonstratedEngine, rollouts_show_examples
    from agentdata.rl.vllm_completions import CompletionsClient
    from agentdata.rl.vllm_server_policy import ServerVLLMEngine
    from agentdata.training.model import load_tokenizer

    tokenizer = load_tokenizer(resolve_model_dir(config.model), config.prompt_template)
    engine = ServerVLLMEngine(CompletionsClient(server_url), tokenizer, spec=spec)
    return DemonstratedEngine(engine, spec=spec) if rollouts_show_examples(config.model) else engine


def stage_result(
    config: GRPOStageConfig, steps: int, started: float, step_times: list, rollouts: str, weight_pushes: int
) -> GRPOResult:
    """A finished stage's result, either stage's: its metrics as logged and the scaling plot drawn from them."""
    out_dir = Path(config.out)
    history = read_metrics(out_dir / "metrics.jsonl")
    plots = [scaling_plot(history, out_dir / "plots" / SCALING_PLOT)] if config.plots else []
    return GRPOResult(
        out_dir,
        steps,
        time.perf_counter() - started,
        out_dir / "metrics.jsonl",
        plots,
        history,
        step_times,
        rollouts=rollouts,
        weight_pushes=weight_pushes,
    )


def stage_rollout(config: GRPOStageConfig, problems: list[Problem], engine: Any, sandbox: Any) -> Any:
    """The agent loop's rollouts over the pool, as both stages run them (`engine` None: attached later)."""
    from agentdata.rl.rollout import AgentRollout

    return AgentRollout(
        problems,
        engine,
        sandbox,
        config.loop,
        config.num_generations,
        seed=config.seed,
        online_band=config.online_band,
        online_band_rounds=config.online_band_rounds,
    )
