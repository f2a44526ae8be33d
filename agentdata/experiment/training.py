"""The one place the experiment calls `agentdata train`: SFT or GRPO of one arm, through `train`'s own API.

An arm's `sft.*` / `rl.*` settings are a `train` settings section, written as a config file writes
it (stage fields and TRL fields alike: `train/settings.py`), and reach `agentdata.train.train` as a
`TrainRequest` for one stage. `check` builds them on `train`'s settings path before any work, so a
bad value is one line naming the recipe and the arm; `run_sft` / `run_grpo` run `train` itself.
Nothing here trains by itself: this module only maps the experiment's names onto `train`'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

# What the experiment sets in a stage's section itself (the rest is the arm's).
SFT_OWN = ("model", "sft_data")
RL_OWN = ("model", "rl_pool", "eval_problems")


def check(stage: str, values: dict[str, Any], where: str) -> Any:
    """The stage's settings (SFTStageConfig / GRPOStageConfig) from the arm's values, built as `train` builds them."""
    from agentdata.train import TRAIN_SETTINGS

    layer, _ = TRAIN_SETTINGS.layer({stage: values}, where)
    return TRAIN_SETTINGS.build([layer])[stage]


def named(values: dict[str, Any], plan: Any, stage: str) -> dict[str, Any]:
    """The arm's values with a run name for its trackers when it reports to one and names none: the arm, its
    seed past the first and the stage (`real-sft`, `real-s1-grpo`); `train`'s own default would name every
    arm's run after the stage folder (`model-sft`), and trackio would merge them into one run."""
    if not values.get("report_to") or values.get("run_name"):
        return values
    seed = f"-s{plan.repetition}" if plan.repetition else ""
    return {**values, "run_name": f"{plan.arm}{seed}-{stage}"}


def run_sft(model: str, sft_data: Path, out: Path, values: dict[str, Any]) -> Any:
    """`agentdata train --stage sft --out OUT` with the arm's sft settings; the SFTResult."""
    settings = {"sft": {**values, "model": model, "sft_data": str(sft_data)}}
    return _one_stage("sft", out, settings)


def run_grpo(model: str, rl_pool: Path, out: Path, values: dict[str, Any], eval_problems: Path) -> Any:
    """`agentdata train --stage rl --out OUT` with the arm's rl and loop settings; `eval_problems` draws the curves."""
    settings = {"rl": {**values, "model": model, "rl_pool": str(rl_pool), "eval_problems": str(eval_problems)}}
    return _one_stage("rl", out, settings)


def _one_stage(stage: str, out: Path, settings: dict[str, Any]) -> Any:
    from agentdata.train import TrainRequest, train

    ((_, result),) = train(TrainRequest(stage=stage, out=out, settings=settings))
    return result
