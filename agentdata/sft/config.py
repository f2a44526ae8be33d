"""Settings of the SFT stage: one dataclass, every field explained, checked as a whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdata.engines.defaults import DEFAULT_ENGINE, DEFAULT_PROTOCOL
from agentdata.engines.prompt_template import PROMPT_TEMPLATE_HELP, check_prompt_template
from agentdata.evaluation.validation import ValidationConfig
from agentdata.settings import check_fields
from agentdata.training.config import OptimiserConfig, TrackingConfig
from agentdata.training.trl_settings import check_trl_overrides

PACKING_STRATEGIES = ("bfd", "bfd_split")
LONG_ROW_POLICIES = ("drop", "truncate", "error")
LEARNING_RATE = 2e-5
LORA_LEARNING_RATE = 2e-4  # LoRA's best rate is about 10x full fine-tuning's (Thinking Machines, "LoRA Without Regret")
# SFTConfig fields the stage computes, and the setting each comes from (set that one instead).
TRL_COMPUTED = {
    "output_dir": "out",  # OUT/checkpoints
    "num_train_epochs": "epochs",
    "per_device_train_batch_size": "batch_size",
    "warmup_steps": "warmup_ratio",
    "activation_checkpointing": "gradient_checkpointing",  # transformers' new name for the setting
}


@dataclass
class SFTStageConfig:
    model: str = field(
        default=DEFAULT_ENGINE,
        metadata={
            "help": (
                "Base model: an engine spec (smollm2-tir and smollm2 are the same SmolLM2 weights; hf:DIR) "
                "or a model dir. The conversations are trained as they are: no worked example is added."
            )
        },
    )
    sft_data: str = field(
        default="", metadata={"help": "SFT set: Parquet or JSONL with `messages` and `tools` columns."}
    )
    out: str = field(
        default="runs/train/sft", metadata={"help": "Output dir: checkpoints, metrics and the final model."}
    )
    protocol: str | None = field(
        default=None,
        metadata={
            "help": (
                "Tool-call protocol of the conversations without a `format` column (codeblock, hermes, ...); "
                f"unset: each row's `format`, else {DEFAULT_PROTOCOL}. Given, it must agree with the rows' `format`."
            )
        },
    )
    prompt_template: str = field(default="auto", metadata={"override_only": True, "help": PROMPT_TEMPLATE_HELP})
    max_steps: int | None = field(
        default=None,
        metadata={
            "help": "Optimizer steps; unset (or -1, TRL's spelling): `epochs` passes over the data.",
            "range": "[1, inf)",
            "none_alias": -1,
        },
    )
    epochs: float = field(
        default=3.0, metadata={"help": "Passes over the data when max_steps is unset.", "range": "(0, 10000]"}
    )
    batch_size: int = field(default=4, metadata={"help": "Conversations per device per step.", "range": "[1, 100000]"})
    gradient_accumulation_steps: int = field(
        default=1, metadata={"override_only": True, "help": "Micro-batches per optimizer step.", "range": "[1, 100000]"}
    )
    max_length: int | None = field(
        default=None,
        metadata={
            "help": (
                "Tokens per conversation; unset: the longest conversation's, up to 4096 (reported at "
                "start). Longer ones are handled as long_rows says."
            ),
            "range": "[16, 10000000]",
        },
    )
    long_rows: str = field(
        default="drop",
        metadata={
            "override_only": True,
            "help": (
                "Conversations longer than max_length: drop (leave out and count; cutting would cut the "
                "final answer), truncate (cut at the end, counted in a warning) or error (stop, naming the "
                "first)."
            ),
            "choices": LONG_ROW_POLICIES,
        },
    )
    warmup_ratio: float = field(
        default=0.03,
        metadata={"override_only": True, "help": "Share of steps with a rising learning rate.", "range": "[0, 1)"},
    )
    packing: bool = field(
        default=False,
        metadata={
            "override_only": True,
            "help": "Pack conversations into max_length rows (best-fit, no cross-attention between them).",
        },
    )
    packing_strategy: str = field(
        default="bfd",
        metadata={
            "override_only": True,
            "help": (
                "bfd (cut overflow) or bfd_split (split overflow); 'wrapped' is refused: it cuts "
                "conversations mid-turn."
            ),
        },
    )
    tracking: TrackingConfig = field(
        default_factory=TrackingConfig, metadata={"help": "Experiment trackers (TRL's report_to) and the run name."}
    )
    optimiser: OptimiserConfig = field(
        default_factory=OptimiserConfig,
        metadata={"help": "The learning rate and LoRA (unset rate: 2e-5, 2e-4 with lora)."},
    )
    resume_from_checkpoint: str | None = field(
        default=None,
        metadata={"help": "Checkpoint dir to resume from, or 'last' for the newest in --out.", "flag": "--resume"},
    )
    save_steps: int = field(
        default=500, metadata={"override_only": True, "help": "Save a checkpoint every N steps.", "range": "[1, inf)"}
    )
    save_total_limit: int | None = field(
        default=2,
        metadata={
            "override_only": True,
            "help": "Checkpoints kept (the oldest are deleted first); unset (null in the file) keeps every one.",
            "range": "[1, inf)",
        },
    )
    logging_steps: int = field(
        default=1, metadata={"override_only": True, "help": "Log metrics every N steps.", "range": "[1, inf)"}
    )
    gradient_checkpointing: bool = field(
        default=False, metadata={"override_only": True, "help": "Recompute activations to save memory."}
    )
    bf16: bool = field(
        default=False, metadata={"override_only": True, "help": "Train in bfloat16 (GPUs that support it)."}
    )
    seed: int = field(default=0, metadata={"help": "Random seed.", "range": "[0, 4294967295]"})
    limit: int | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": "Use only the first N conversations (smoke runs).",
            "range": "[1, inf)",
        },
    )
    trl: dict[str, Any] = field(
        default_factory=dict,
        metadata={
            "cli": False,
            "extra": "trl:SFTConfig",
            "help": (
                "Any other field of TRL's SFTConfig (max_grad_norm, lr_scheduler_type, weight_decay, "
                "neftune_noise_alpha, ...); in a config file, written straight in the `sft:` section. "
                "Recorded in OUT/trl_config.json."
            ),
        },
    )
    validation: ValidationConfig = field(
        default_factory=ValidationConfig,
        metadata={
            "help": (
                "Held-out evaluation at the end of SFT (agent loop: the loop defaults with this stage's "
                "protocol, temperature 1.0)."
            )
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        self.optimiser = self.optimiser.resolved(LEARNING_RATE, LORA_LEARNING_RATE)  # an unset rate: the stage's
        check_trl_overrides(self, TRL_COMPUTED)
        check_prompt_template(self.prompt_template)
        if self.packing and self.packing_strategy not in PACKING_STRATEGIES:
            raise ValueError(
                f"packing_strategy {self.packing_strategy!r} is not allowed: use one of {PACKING_STRATEGIES} "
                "(they keep each conversation whole and separate), or turn packing off"
            )
