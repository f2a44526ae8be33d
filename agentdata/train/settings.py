"""`train`'s settings path: one `Sections` of the stage dataclasses, the way TRL's HfArgumentParser takes a
tuple of dataclasses (`agentdata.settings.sections`).

- `sft`: `SFTStageConfig` (a config file's `sft:` section, `sft.NAME=VALUE` overrides);
- `rl`: `GRPOStageConfig` with the closed loop's `ClosedLoopConfig` beside it, parsed together (a
  file's `rl:` section holds both, `rl.NAME=VALUE` overrides).

A name both stages have (`max_steps`, `model`, `learning_rate`, `lora`, `eval_k`, ...) given without
a section sets both: `--max-steps 2`, a file's top-level `max_steps: 2`, `settings={"max_steps": 2}`.
Any other field of TRL's `SFTConfig` / `GRPOConfig` goes in a section too and reaches the trainer
(the stage's `trl` mapping). The command line's flags are generated from these fields
(`agentdata.cli.flags`), so every one has `--help`, a range and a generated range test.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Section, Sections, read_settings_file
from agentdata.sft.config import SFTStageConfig
from agentdata.train.closed_loop import ClosedLoopConfig

TRAIN_SETTINGS = Sections(
    Section("sft", {"sft": SFTStageConfig}, "SFT"),
    Section("rl", {"rl": GRPOStageConfig, "closed_loop": ClosedLoopConfig}, "GRPO"),
)
# Flags of an older release whose name now means another thing: {old flag: its new spelling}. --eval-every set
# GRPO's only; the name both stages have now sets both, so the old flag is refused rather than silently widened.
REMOVED_FLAGS = {"--eval-every": "rl.eval_every=N (eval_every=N sets both stages)"}
# The rollouts' loop settings that collect lists as flags are keys and overrides here (`temperature=0.9`): GRPO
# samples at 1.0 (agentdata.agent.config.rollout_loop), and a run changes its loop less than its training.
TRAIN_OVERRIDES = ("temperature", "max_tool_calls", "sandbox_max_rps", "tools")


def train_settings(config_file: str | Path | None = None, settings: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The stage settings a config file and overrides give over the fields' defaults, as `{"sft": SFTStageConfig,
    "rl": GRPOStageConfig, "closed_loop": ClosedLoopConfig}`; a mistake is one UserError. (`train` itself adds
    what depends on the data, e.g. GRPO's start model and protocol: `plan_train` shows those.)"""
    layers = [TRAIN_SETTINGS.layer(read_settings_file(config_file), str(config_file))[0]] if config_file else []
    return TRAIN_SETTINGS.build([*layers, TRAIN_SETTINGS.layer(settings or {})[0]])
