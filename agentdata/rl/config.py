"""Settings of the GRPO stage: one dataclass, defaults from the agentic-RL findings.

The rollouts run the shared agent loop, so their settings are a `LoopConfig` (the `loop`
field): the same fields and defaults as collect and eval, except that rollouts sample at
temperature 1.0 (the findings' RL setting: exploration needs the full distribution).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from agentdata.agent.config import LoopConfig, rollout_loop
from agentdata.engines.defaults import DEFAULT_ENGINE
from agentdata.engines.prompt_template import PROMPT_TEMPLATE_HELP, check_prompt_template
from agentdata.evaluation.validation import ValidationConfig
from agentdata.settings import Band, check_fields
from agentdata.training.config import OptimiserConfig, TrackingConfig
from agentdata.training.trl_settings import check_trl_overrides

LEARNING_RATE = 1e-6  # DemyAgent and ZeroTIR
LORA_LEARNING_RATE = 1e-5  # LoRA's best rate is about 10x full fine-tuning's (Thinking Machines, "LoRA Without Regret")
# GRPOConfig fields the stage computes, and the setting each comes from (set that one instead).
TRL_COMPUTED = {
    "output_dir": "out",  # OUT/checkpoints
    "max_completion_length": "max_new_tokens",
    "per_device_train_batch_size": "num_generations",  # one micro-batch is one group
    "gradient_accumulation_steps": "prompts_per_step",  # a step accumulates prompts_per_step groups
    "activation_checkpointing": "gradient_checkpointing",  # transformers' new name for the setting
}


@dataclass
class GRPOStageConfig:
    model: str = field(
        default=DEFAULT_ENGINE,
        metadata={
            "help": (
                "Policy to start from: an engine spec (smollm2-tir: SmolLM2 whose rollouts are shown its "
                "worked examples; smollm2; hf:DIR) or a model dir (e.g. the SFT output)."
            )
        },
    )
    rl_pool: str = field(
        default="",
        metadata={
            "help": (
                "RL pool: Parquet/JSONL with `prompt` + `answer` (agentdata filter) or verl's "
                "`reward_model.ground_truth`; empty uses the built-in problems."
            )
        },
    )
    out: str = field(
        default="runs/train/rl", metadata={"help": "Output dir: checkpoints, metrics.jsonl, plots and the final model."}
    )
    max_steps: int = field(default=20, metadata={"help": "Optimizer steps.", "range": "[1, inf)"})
    prompts_per_step: int = field(
        default=2,
        metadata={
            "override_only": True,
            "help": "Problems per optimizer step; each gets num_generations rollouts.",
            "range": "[1, 100000]",
        },
    )
    num_generations: int = field(
        default=8,
        metadata={
            "help": "Rollouts per problem (the GRPO group size); GRPO compares rollouts within a group.",
            "range": "[2, inf)",
        },
    )
    tracking: TrackingConfig = field(
        default_factory=TrackingConfig, metadata={"help": "Experiment trackers (TRL's report_to) and the run name."}
    )
    optimiser: OptimiserConfig = field(
        default_factory=lambda: OptimiserConfig(lora_dropout=0.0),
        metadata={"help": "The learning rate and LoRA (unset rate: 1e-6, 1e-5 with lora; LoRA dropout 0)."},
    )
    epsilon: float = field(
        default=0.2,
        metadata={"override_only": True, "help": "Lower clip range of the policy ratio.", "range": "[0, 1]"},
    )
    epsilon_high: float = field(
        default=0.28,
        metadata={
            "override_only": True,
            "help": "Upper clip range (clip-higher: above epsilon keeps exploration).",
            "range": "[0, 10]",
        },
    )
    beta: float = field(
        default=0.0,
        metadata={
            "override_only": True,
            "help": "KL coefficient; 0 (no KL, no reference model) as in DAPO/DemyAgent.",
            "range": "[0, 100]",
        },
    )
    loss_type: str = field(
        default="dapo", metadata={"override_only": True, "help": "TRL loss aggregation; dapo is the token-level loss."}
    )
    rewards: list[str] = field(
        default_factory=lambda: ["correctness", "overlong"],
        metadata={
            "help": (
                "Reward functions, by name (correctness, overlong) or plug-in (mypkg.rewards:brevity, "
                "path/to/rewards.py:brevity); each is (prompts, completions, **kwargs) -> list[float | "
                "None]. --reward adds one beside the file's or default list (repeatable)."
            ),
            "flag": "--reward",
            "split": False,
            "append": True,
        },
    )
    overlong_buffer: int | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": (
                "Soft overlong penalty over the last N model tokens of max_new_tokens; 0 turns it off; "
                "unset: max_new_tokens // 4 (128 of 512)."
            ),
            "range": "[0, inf)",
        },
    )
    overlong_penalty: float = field(
        default=1.0,
        metadata={
            "override_only": True,
            "help": "Penalty at max_new_tokens (reached linearly over the buffer).",
            "range": "[0, 100]",
        },
    )
    code_reward: str = field(
        default="binary",
        metadata={
            "override_only": True,
            "help": (
                "Code problems: binary (+1 all tests pass / -1) or fraction (-1 + 2 x the fraction of "
                "tests passed); other domains stay binary."
            ),
            "choices": ("binary", "fraction"),
        },
    )
    tool_call_reward: bool = field(
        default=False,
        metadata={
            "override_only": True,
            "help": "Open-AgentRL's TCR: a wrong answer with k tool rounds scores min(-0.6, -1 + 0.1 k).",
        },
    )
    extra_call_penalty: float = field(
        default=0.0,
        metadata={
            "override_only": True,
            "help": "Penalty per tool call beyond free_calls (pushes toward few, purposeful calls).",
            "range": "[0, 100]",
        },
    )
    free_calls: int = field(
        default=1,
        metadata={"override_only": True, "help": "Tool calls without the extra-call penalty.", "range": "[0, 1000]"},
    )
    dynamic_sampling: bool = field(
        default=False,
        metadata={
            "override_only": True,
            "help": "Leave groups whose rewards are all equal out of the loss (the cheap mode: no extra rollouts).",
        },
    )
    online_band: Band | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": (
                "LO,HI (e.g. 0.05,0.8, ZeroTIR's dynamic filtering): a group whose pass rate is not inside "
                "(ends exclusive) is dropped and replaced by a fresh prompt's group until the batch is "
                "full; unset (none): off."
            ),
            "range": "[0, 1]",
        },
    )
    online_band_rounds: int = field(
        default=4,
        metadata={
            "override_only": True,
            "help": "Replacement rounds per step for online_band; groups still outside after them are kept.",
            "range": "[0, 100]",
        },
    )
    prompt_template: str = field(default="auto", metadata={"override_only": True, "help": PROMPT_TEMPLATE_HELP})
    use_vllm: str = field(
        default="auto",
        metadata={
            "override_only": True,
            "help": "auto (on a GPU machine with vLLM installed), yes, or no.",
            "choices": ("auto", "yes", "no"),
        },
    )
    vllm_server: str = field(
        default="",
        metadata={
            "override_only": True,
            "help": (
                "URL of a `trl vllm-serve` server (e.g. http://gpu2:8000) that generates the rollouts; TRL "
                "pushes the weights to it each step (its vllm_mode server). Empty: vLLM colocated in the "
                "training process."
            ),
        },
    )
    mode: str = field(
        default="sync",
        metadata={
            "override_only": True,
            "help": (
                "sync: each step waits for its rollouts; async: the next steps' rollouts run while this one trains, "
                "on TRL's AsyncGRPOTrainer (samples at most max_staleness policy versions old)."
            ),
            "choices": ("sync", "async"),
        },
    )
    max_staleness: int = field(
        default=1,
        metadata={
            "override_only": True,
            "help": (
                "mode async: how many optimiser steps a rollout's policy may lag the one it trains (1: the next "
                "step's rollouts run while this one trains); older samples are dropped and counted."
            ),
            "range": "[1, 1000]",
        },
    )
    save_steps: int = field(
        default=50, metadata={"override_only": True, "help": "Save a checkpoint every N steps.", "range": "[1, inf)"}
    )
    save_total_limit: int | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": (
                "Checkpoints kept (the oldest are deleted first); unset keeps every one, so each "
                "evaluation's checkpoint can be re-evaluated later."
            ),
            "range": "[1, inf)",
        },
    )
    resume_from_checkpoint: str | None = field(
        default=None, metadata={"help": "Checkpoint dir to resume from, or 'last'.", "flag": "--resume"}
    )
    gradient_checkpointing: bool = field(
        default=False,
        metadata={
            "override_only": True,
            "help": "Recompute activations to save memory (TRL's default is on; it adds a forward pass per backward).",
        },
    )
    bf16: bool = field(
        default=False, metadata={"override_only": True, "help": "Train in bfloat16 (GPUs that support it)."}
    )
    plots: bool = field(
        default=True,
        metadata={
            "override_only": True,
            "help": "Write plots/scaling.png at the end: accuracy, tool calls, response length and entropy per step.",
        },
    )
    seed: int = field(default=0, metadata={"help": "Random seed.", "range": "[0, 4294967295]"})
    limit: int | None = field(
        default=None,
        metadata={"override_only": True, "help": "Use only the first N problems of the pool.", "range": "[1, inf)"},
    )
    loop: LoopConfig = field(
        default_factory=rollout_loop, metadata={"help": "The rollouts' agent-loop settings (temperature 1.0)."}
    )
    trl: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "cli": False,
            "extra": "trl:GRPOConfig",
            "help": (
                "Any other field of TRL's GRPOConfig (num_iterations, steps_per_generation, scale_rewards, "
                "mask_truncated_completions, max_grad_norm, lr_scheduler_type, top_entropy_quantile, ...); "
                "in a config file, written straight in the `rl:` section. Recorded in OUT/trl_config.json."
            ),
        },
    )
    validation: ValidationConfig = field(
        default_factory=ValidationConfig,
        metadata={"help": "Held-out evaluation during training (evaluates with the rollouts' loop settings)."},
    )

    def __post_init__(self) -> None:
        check_fields(self)
        self._scale_unset()
        check_trl_overrides(self, TRL_COMPUTED)
        check_prompt_template(self.prompt_template)
        if self.epsilon_high < self.epsilon:
            raise ValueError(
                f"epsilon_high ({self.epsilon_high}) below epsilon ({self.epsilon}): clip-higher needs "
                f"epsilon_high >= epsilon"
            )
        if not self.overlong_buffer < self.loop.max_new_tokens:
            raise ValueError(
                f"overlong_buffer {self.overlong_buffer} must be below max_new_tokens {self.loop.max_new_tokens}: "
                "leave it unset to follow max_new_tokens (a quarter of it), or 0 to turn shaping off"
            )
        if self.tool_call_reward and self.extra_call_penalty:
            raise ValueError(
                "tool_call_reward rewards calls on wrong answers while extra_call_penalty punishes them: pick one"
            )
        if self.code_reward == "fraction" and self.tool_call_reward:
            raise ValueError("tool_call_reward is defined on correct/wrong answers: use code_reward binary with it")
        if self.vllm_server and self.use_vllm == "no":
            raise ValueError("vllm_server generates the rollouts with vLLM: it needs use_vllm auto or yes")
        if self.mode == "async":
            check_async_settings(self)
        if self.loop.protocol is not None:  # unset: the start model's, resolved where the stage runs (for_run)
            check_rollout_protocol(self.loop.protocol)

    def for_run(self) -> GRPOStageConfig:
        """These settings as the stage runs them: an unset protocol and system prompt are the ones the start
        model was trained with (its dir's agentdata.json, engines/trained.py), else the default. Reads the
        model's dir, so it is called where the stage starts, not when the settings are built."""
        loop = self.loop.for_model(self.model)
        if loop is self.loop:
            return self
        check_rollout_protocol(loop.protocol)
        return replace(self, loop=loop)

    def _scale_unset(self) -> None:
        """Settings that depend on another follow it unless set (then they are checked against it)."""
        if self.overlong_buffer is None:
            self.overlong_buffer = self.loop.max_new_tokens // 4
        self.optimiser = self.optimiser.resolved(LEARNING_RATE, LORA_LEARNING_RATE)


def check_rollout_protocol(name: str) -> None:
    """Any protocol the registry knows (a plug-in too) whose calls are text in the model's turn.

    A rollout is trained on its re-rendering by the protocol (`to_plain_messages`) through the
    chat template. A native protocol's calls and tool schemas live in the template's own
    `tools=` handling, which that rendering does not reproduce: the model would be trained on
    a prompt and calls other than the ones it sampled (SmolLM2's template drops the calls).
    """
    from agentdata.formats import PROTOCOLS, get_protocol

    if get_protocol(name).native_tools:  # an unknown name is a UserError listing the known ones
        usable = [known for known in PROTOCOLS if not get_protocol(known).native_tools]
        raise ValueError(
            f"protocol {name} cannot drive GRPO rollouts: its tool calls are the chat template's own, "
            "which the training re-rendering does not reproduce; use one of "
            f"{', '.join(usable)} (or a plug-in protocol that writes calls as text)"
        )


def check_async_settings(config: GRPOStageConfig) -> None:
    """What TRL's AsyncGRPOTrainer has no place for, refused before any work (rl/async_stage.py)."""
    if config.beta:
        raise ValueError("mode async trains without a KL term (TRL's AsyncGRPOTrainer has none): set beta 0")
    if config.loss_type != "dapo":
        raise ValueError(
            f"mode async takes TRL's AsyncGRPOTrainer's token-level loss (dapo); loss_type {config.loss_type} "
            "is the synchronous trainer's"
        )
