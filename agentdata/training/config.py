"""The update settings both training stages share: the learning rate and LoRA, defined once.

`OptimiserConfig` is composed into `SFTStageConfig` and `GRPOStageConfig` as their `optimiser`
field; its fields stay flat on the command line and in files (`--learning-rate`, `--lora`,
`lora_r:`), as the loop's do. The learning rate and LoRA are one block because one follows the
other: LoRA's best rate is about ten times full fine-tuning's (Thinking Machines, "LoRA Without
Regret"), so an unset rate is the stage's full-weight or LoRA rate (`resolved`). Light on purpose
(no torch, no PEFT until a LoRA config is built): the CLI builds its options from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from agentdata.settings import check_fields


@dataclass
class OptimiserConfig:
    learning_rate: float | None = field(
        default=None,
        metadata={
            "help": "Peak learning rate; unset: the stage's (SFT 2e-5, GRPO 1e-6 as DemyAgent and ZeroTIR), ten "
            "times it with lora (LoRA wants about 10x the full-weight rate).",
            "range": "(0, 1]",
        },
    )
    lora: bool = field(
        default=False,
        metadata={"help": "Train a LoRA adapter (PEFT) instead of all weights; merged into the saved model."},
    )
    lora_r: int = field(default=16, metadata={"override_only": True, "help": "LoRA rank.", "range": "[1, 4096]"})
    lora_alpha: int | None = field(
        default=None,
        metadata={"override_only": True, "help": "LoRA scaling alpha; unset: 2 x lora_r.", "range": "[1, 65536]"},
    )
    lora_dropout: float = field(
        default=0.05, metadata={"override_only": True, "help": "LoRA dropout.", "range": "[0, 1)"}
    )
    lora_target_modules: str = field(
        default="all-linear",
        metadata={"override_only": True, "help": "Modules LoRA wraps: all-linear or a comma list (q_proj,v_proj)."},
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def resolved(self, full_rate: float, lora_rate: float) -> OptimiserConfig:
        """This block with what follows another setting made explicit, as the stage records it: an unset
        learning rate is the stage's (`lora_rate` with LoRA, else `full_rate`), an unset alpha 2 x lora_r.
        (The stage calls it from its own `__post_init__`, so a block built over a default follows its own
        rank, not the default's.)"""
        if self.learning_rate is not None and self.lora_alpha is not None:
            return self
        return dataclasses.replace(
            self,
            learning_rate=self.learning_rate or (lora_rate if self.lora else full_rate),
            lora_alpha=self.lora_alpha or 2 * self.lora_r,
        )

    def peft_config(self) -> Any:
        """PEFT's LoraConfig for these settings, or None without LoRA."""
        if not self.lora:
            return None
        from agentdata.training.model import lora_config

        return lora_config(self.lora_r, self.lora_alpha, self.lora_dropout, self.lora_target_modules)


TRACKERS = ("wandb", "trackio", "tensorboard", "mlflow", "none")


@dataclass
class TrackingConfig:
    """Where a training run is reported: TRL's own `report_to` and `run_name` (transformers' integrations)."""

    report_to: list[str] = field(
        default_factory=list,
        metadata={
            "help": "Experiment trackers the run logs to: wandb, trackio, tensorboard, mlflow or none "
            "(repeatable or comma separated; each needs its package, e.g. pip install 'agentdata[trackers]'). "
            "train logs through TRL, and GRPO adds a table of sampled rollouts per step (wandb, trackio) and "
            "writes it under checkpoints/completions/; collect, filter and eval log their summary and a table "
            "of sampled trajectories (tensorboard, trackio, wandb).",
            "choices": TRACKERS,
        },
    )
    run_name: str | None = field(
        default=None,
        metadata={
            "override_only": True,
            "help": "The run's name in the trackers (the same name on collect, filter, train and eval: one run in "
            "trackio); unset: the --out folder's name and the stage or command.",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)
        self.report_to = [name for name in self.report_to if name != "none"]

    def trl_arguments(self, out_dir: Any, stage: str) -> dict[str, Any]:
        """`report_to` and `run_name` as TRL's config takes them (an unset name: the run's folder and the stage,
        `runs/train/sft` -> `train-sft`); a tracker's local files go under `out_dir`."""
        from pathlib import Path

        folder = Path(out_dir)
        name = folder.parent.name if folder.name in ("sft", "rl") and folder.parent.name else folder.name
        return {"report_to": list(self.report_to) or "none", "run_name": self.run_name or f"{name}-{stage}"}
