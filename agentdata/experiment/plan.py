"""One arm's settings made into the stages' own configs, checked before any work.

`plan_arm(recipe, arm, repetition, files)` reads the arm's flat settings and builds every config
the arm's stages will run with (`CollectConfig`, `CurateConfig`, `StitchConfig`, the SFT and GRPO
stage configs, the loops), so a bad value stops the experiment before anything runs, in one line
naming the recipe, the arm and the field. Repetition `r` (of `--seeds N`) adds `r` to every seed:
the teacher's, SFT's, GRPO's (and the profile's) and the evaluation's.

The student's loop (`loop.*`) is one for every place the student runs (the profile, GRPO's
rollouts and the evaluation), starting from GRPO's rollout defaults (temperature 1.0, as the
findings evaluate); `rl.*` loop fields change it for GRPO's rollouts and their profile only (as
`train rl.temperature=0.9` does), `eval.*` loop fields for the evaluation only. The protocol is one
for the whole arm, `loop.protocol` (default codeblock): the teacher, the stitched set and SFT
follow it unless set.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentdata.agent.config import CollectConfig, LoopConfig
from agentdata.curate.config import CurateConfig
from agentdata.engines.defaults import DEFAULT_PROTOCOL
from agentdata.errors import UserError
from agentdata.experiment.choices import arm_choices
from agentdata.experiment.keys import EXPERIMENT_FIELDS
from agentdata.experiment.recipe import Recipe, section_of
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Band, flat_names
from agentdata.sft.config import SFTStageConfig
from agentdata.synth.stitch import StitchConfig


@dataclass(frozen=True)
class ProblemFiles:
    """Where the experiment wrote its problems (agentdata JSONL), and their content digests."""

    train: Path
    held_out: Path
    curve: Path  # the first curve_problems of held_out: GRPO's validation during training
    digests: dict[str, str]


@dataclass
class ArmPlan:
    arm: str
    repetition: int
    student: str
    engine: str  # hf | vllm (`auto` resolved): how a trained model dir is run (its profile, its evaluation)
    sft_data: str  # real | stitched | none | mixed
    sft_rows: int | None
    collect: CollectConfig
    curate: CurateConfig
    stitch: StitchConfig
    stitch_solutions: Path | None  # worked solutions of the training problems (default: synth.solutions')
    sft: SFTStageConfig | None  # None: no SFT (sft.data none); built now to check the values
    sft_values: dict[str, Any]  # the arm's sft settings: train's `sft:` section
    rl_pool: str  # none | band | random | all | easy | hard
    band: Band
    pool_size: int | None
    profile_k: int
    rl: GRPOStageConfig | None  # None: no GRPO (rl.pool none); built now to check the values
    rl_values: dict[str, Any]  # the arm's rl and loop settings: train's `rl:` section
    loop: LoopConfig  # the student's loop with the rl section's loop fields: profile and GRPO
    eval_loop: LoopConfig
    eval_k: int
    eval_seed: int
    eval_concurrency: int
    eval_examples: bool  # the evaluated model is shown smollm2-tir's worked examples (`tir:SPEC`)

    def eval_spec(self, spec: str) -> str:
        """The spec the final evaluation runs: `spec`, or `spec` shown the worked examples."""
        from agentdata.engines.demonstrated import with_examples

        return with_examples(spec) if self.eval_examples else spec

    def run_spec(self, model_dir: str | Path) -> str:
        """The engine spec that runs a trained model dir (profile, evaluation); training loads it as hf:DIR."""
        return f"{self.engine}:{model_dir}"


def _build(config_type: type, values: dict[str, Any], where: str) -> Any:
    from agentdata.settings import build

    try:
        return build(config_type, values, source=where)
    except UserError as error:
        message = str(error)
        raise UserError(message if message.startswith(where) else f"{where}: {message}") from None


def plan_arm(
    recipe: Recipe, arm: str, repetition: int, files: ProblemFiles, out: Path, check_paths: bool = True
) -> ArmPlan:
    """The arm's configs for one repetition; a UserError naming the recipe, the arm and the field on a bad value.
    `check_paths=False` (a dry run on another machine than the run's) lets a missing stitch.solutions file by."""
    from agentdata.experiment import training
    from agentdata.rl.config import rollout_loop
    from agentdata.settings import flatten

    where = f"{recipe.source} arm {arm}"
    settings = recipe.arm_settings(arm)
    choices = arm_choices(settings, where)  # the experiment's own keys: sft.data, rl.pool, eval.samples, ...
    own_sft, own_rl, own_eval = choices["sft"], choices["rl"], choices["eval"]
    # One protocol for the whole arm, set here (the loop's own default defers to the model's).
    loop_values = {**flatten(rollout_loop()), "protocol": DEFAULT_PROTOCOL, **section_of(settings, "loop")}
    loop = _build(LoopConfig, loop_values, where)
    eval_loop = _build(LoopConfig, {**flatten(loop), **_loop_fields(section_of(settings, "eval"))}, where)
    rl_section = section_of(settings, "rl")
    rl_loop = _build(LoopConfig, {**flatten(loop), **_loop_fields(rl_section)}, where)

    collect_values = {"protocol": loop.protocol, "seed": 0, **section_of(settings, "collect")}
    collect_values["seed"] += repetition
    collect = _build(CollectConfig, collect_values, where)
    curate = _build(CurateConfig, section_of(settings, "curate"), where)
    stitch_section = section_of(settings, "stitch")
    solutions = stitch_section.pop("solutions", None)
    if check_paths and solutions is not None and not Path(str(solutions)).is_file():
        raise UserError(f"{where}: stitch.solutions: no such file {solutions}")
    stitch = _build(StitchConfig, {"protocol": loop.protocol, **stitch_section}, where)

    sft_section = section_of(settings, "sft")
    sft_data = own_sft.data
    sft_values = {key: value for key, value in sft_section.items() if key not in EXPERIMENT_FIELDS["sft"]}
    sft_values = {"protocol": loop.protocol, **sft_values, "seed": sft_values.get("seed", 0) + repetition}
    student = choices["model"].student
    sft = training.check("sft", {**sft_values, "model": student}, where) if sft_data != "none" else None

    rl_pool = own_rl.pool
    rl_values = {key: value for key, value in rl_section.items() if key not in EXPERIMENT_FIELDS["rl"]}
    rl_values = {**rl_values, **flatten(rl_loop), "seed": rl_values.get("seed", 0) + repetition}
    rl = None
    if rl_pool != "none":
        rl = training.check("rl", {**rl_values, "model": student, "eval_problems": str(files.curve)}, where)
    return ArmPlan(
        arm=arm,
        repetition=repetition,
        student=student,
        engine=choices["model"].resolved_engine(),
        sft_data=sft_data,
        sft_rows=own_sft.rows,
        collect=collect,
        curate=curate,
        stitch=stitch,
        stitch_solutions=Path(str(solutions)) if solutions is not None else None,
        sft=sft,
        sft_values=sft_values,
        rl_pool=rl_pool,
        band=own_rl.band,
        pool_size=own_rl.size,
        profile_k=own_rl.profile_k,
        rl=rl,
        rl_values=rl_values,
        loop=rl_loop,
        eval_loop=eval_loop,
        eval_k=own_eval.samples,
        eval_seed=own_eval.seed + repetition,
        eval_concurrency=own_eval.concurrency,
        eval_examples=own_eval.worked_examples,
    )


def _loop_fields(section: dict[str, Any]) -> dict[str, Any]:
    """A section's agent-loop fields (`rl.temperature`, `eval.max_turns`): the student's loop, changed there."""
    return {key: value for key, value in section.items() if key in flat_names(LoopConfig)}


def with_model(config: Any, **changes: Any) -> Any:
    """A stage config with other paths or start model (the rest as planned)."""
    return dataclasses.replace(config, **changes)
