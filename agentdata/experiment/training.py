"""The one place the experiment calls `agentdata train`: SFT or GRPO of one arm, through `train`'s own API.

An arm's `sft.*` / `rl.*` settings are a `train` config section (stage fields and TRL fields alike,
sorted by `train`'s own `section_settings`), handed to `agentdata.train.train` as a `TrainRequest`
for one stage. Nothing here trains by itself: this module only maps the experiment's names onto
`train`'s, so when `train`'s settings path changes, this file is what follows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.rl.config import GRPOStageConfig
from agentdata.sft.config import SFTStageConfig


def section(stage: str, values: dict[str, Any], where: str) -> dict[str, Any]:
    """`values` as `train`'s stage section: its own fields, TRL-only ones gathered under `trl`."""
    from agentdata.train.run import section_settings

    return section_settings(stage, values, where)


def sft_config(model: str, sft_data: Path, out: Path, values: dict[str, Any], where: str) -> SFTStageConfig:
    """The SFT stage's settings (built and checked now: a bad value is one line naming `where`)."""
    from agentdata.train.run import make_config

    settings = {**section("sft", values, where), "model": model, "sft_data": str(sft_data), "out": str(out)}
    return make_config(SFTStageConfig, settings, where)


def grpo_config(
    model: str, rl_pool: Path | None, out: Path, values: dict[str, Any], where: str, eval_problems: Path | None = None
) -> GRPOStageConfig:
    """GRPO's settings (the loop fields flat among `values`); `eval_problems` draws the curves."""
    from agentdata.train.run import make_config

    settings = {**section("rl", values, where), "model": model, "out": str(out)}
    if rl_pool is not None:
        settings["rl_pool"] = str(rl_pool)
    if eval_problems is not None:
        settings["eval_problems"] = str(eval_problems)
    return make_config(GRPOStageConfig, settings, where)


def run_sft(config: SFTStageConfig) -> Any:
    """`agentdata train --stage sft` with these settings; the SFTResult."""
    from agentdata.train import TrainRequest, train

    request = TrainRequest(stage="sft", sft_data=Path(config.sft_data), out=Path(config.out), sft_flags=_flags(config))
    ((_, result),) = train(request)
    return result


def run_grpo(config: GRPOStageConfig) -> Any:
    """`agentdata train --stage rl` with these settings; the GRPOResult."""
    from agentdata.train import TrainRequest, train

    request = TrainRequest(
        stage="rl",
        rl_pool=Path(config.rl_pool) if config.rl_pool else None,
        out=Path(config.out),
        rl_flags=_flags(config),
    )
    ((_, result),) = train(request)
    return result


def _flags(config: Any) -> dict[str, Any]:
    """The built settings as `train`'s flags: flat field names; unset ones left out so `train` fills them."""
    from agentdata.settings import flatten

    return {key: value for key, value in flatten(config).items() if value is not None}
