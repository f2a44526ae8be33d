"""One arm's settings made into the stages' own configs, checked before any work.

`plan_arm(recipe, arm, repetition, files)` reads the arm's flat settings and builds every config
the arm's stages will run with (`CollectConfig`, `CurateConfig`, `StitchConfig`, the SFT and GRPO
stage configs, the loops), so a bad value stops the experiment before anything runs, in one line
naming the recipe, the arm and the field. Repetition `r` (of `--seeds N`) adds `r` to every seed:
the teacher's, SFT's, GRPO's (and the profile's) and the evaluation's.

The student's loop (`loop.*`) is one for every place the student runs (the profile, GRPO's
rollouts and the evaluation), starting from GRPO's rollout defaults (temperature 1.0, as the
findings evaluate); `eval.*` loop fields change it for the evaluation only. The protocol is one
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
from agentdata.experiment.keys import ENGINES, EXPERIMENT_FIELDS, RL_POOLS, SFT_DATA, own_fields
from agentdata.experiment.recipe import Recipe, section_of
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Band
from agentdata.sft.config import SFTStageConfig
from agentdata.synth.stitch import StitchConfig
from agentdata.train.closed_loop import DEFAULT_BAND  # an arm's pool is profiled as `train --rl-problems` does

DEFAULT_STUDENT = "smollm2"
DEFAULT_EVAL_K = 4
DEFAULT_EVAL_CONCURRENCY = 64
DEFAULT_CURVE_PROBLEMS = 16
DEFAULT_PROFILE_K = 4


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
    engine: str  # hf | vllm: how a trained model dir is run (its profile, its evaluation)
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
    loop: LoopConfig  # the student's loop: profile and GRPO
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


def _choice(value: Any, choices: tuple[str, ...], key: str, where: str) -> str:
    if value not in choices:
        raise UserError(f"{where}: {key} {value!r}: must be one of {', '.join(choices)}")
    return value


def _flag(value: Any, key: str, where: str) -> bool:
    if not isinstance(value, bool):
        raise UserError(f"{where}: {key} {value!r}: must be true or false")
    return value


def _count(value: Any, key: str, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise UserError(f"{where}: {key} {value!r}: must be a whole number of at least 1")
    return value


def _band(value: Any, where: str) -> Band:
    """The profile's pass-rate band (the settings' one `Band` type: LO,HI, ends exclusive)."""
    if value is None:
        return DEFAULT_BAND
    try:
        return Band.parse(value)
    except ValueError as error:
        raise UserError(f"{where}: rl.band {value!r}: {error}") from None


def _build(config_type: type, values: dict[str, Any], where: str) -> Any:
    from agentdata.settings import build

    try:
        return build(config_type, values, source=where)
    except UserError as error:
        message = str(error)
        raise UserError(message if message.startswith(where) else f"{where}: {message}") from None


def plan_arm(recipe: Recipe, arm: str, repetition: int, files: ProblemFiles, out: Path) -> ArmPlan:
    """The arm's configs for one repetition; a UserError naming the recipe, the arm and the field on a bad value."""
    from agentdata.experiment import training
    from agentdata.rl.config import rollout_loop
    from agentdata.settings import flatten

    where = f"{recipe.source} arm {arm}"
    settings = recipe.arm_settings(arm)
    # One protocol for the whole arm, set here (the loop's own default defers to the model's).
    loop_values = {**flatten(rollout_loop()), "protocol": DEFAULT_PROTOCOL, **section_of(settings, "loop")}
    loop = _build(LoopConfig, loop_values, where)
    eval_section = section_of(settings, "eval")
    eval_loop_fields = {key: value for key, value in eval_section.items() if key in own_fields("loop")}
    eval_loop = _build(LoopConfig, {**flatten(loop), **eval_loop_fields}, where)

    collect_values = {"protocol": loop.protocol, "seed": 0, **section_of(settings, "collect")}
    collect_values["seed"] += repetition
    collect = _build(CollectConfig, collect_values, where)
    curate = _build(CurateConfig, section_of(settings, "curate"), where)
    stitch_section = section_of(settings, "stitch")
    solutions = stitch_section.pop("solutions", None)
    if solutions is not None and not Path(str(solutions)).is_file():
        raise UserError(f"{where}: stitch.solutions: no such file {solutions}")
    stitch = _build(StitchConfig, {"protocol": loop.protocol, **stitch_section}, where)

    sft_section = section_of(settings, "sft")
    sft_data = _choice(sft_section.get("data", "none"), SFT_DATA, "sft.data", where)
    sft_values = {key: value for key, value in sft_section.items() if key not in EXPERIMENT_FIELDS["sft"]}
    sft_values = {"protocol": loop.protocol, **sft_values, "seed": sft_values.get("seed", 0) + repetition}
    student = str(settings.get("student", DEFAULT_STUDENT))
    sft = training.check("sft", {**sft_values, "model": student}, where) if sft_data != "none" else None

    rl_section = section_of(settings, "rl")
    rl_pool = _choice(rl_section.get("pool", "none"), RL_POOLS, "rl.pool", where)
    rl_values = {key: value for key, value in rl_section.items() if key not in EXPERIMENT_FIELDS["rl"]}
    rl_values = {**rl_values, **flatten(loop), "seed": rl_values.get("seed", 0) + repetition}
    rl = None
    if rl_pool != "none":
        rl = training.check("rl", {**rl_values, "model": student, "eval_problems": str(files.curve)}, where)
    return ArmPlan(
        arm=arm,
        repetition=repetition,
        student=student,
        engine=_choice(settings.get("engine", "hf"), ENGINES, "engine", where),
        sft_data=sft_data,
        sft_rows=_count(sft_section.get("rows"), "sft.rows", where),
        collect=collect,
        curate=curate,
        stitch=stitch,
        stitch_solutions=Path(str(solutions)) if solutions is not None else None,
        sft=sft,
        sft_values=sft_values,
        rl_pool=rl_pool,
        band=_band(rl_section.get("band"), where),
        pool_size=_count(rl_section.get("size"), "rl.size", where),
        profile_k=_count(rl_section.get("profile_k"), "rl.profile_k", where) or DEFAULT_PROFILE_K,
        rl=rl,
        rl_values=rl_values,
        loop=loop,
        eval_loop=eval_loop,
        eval_k=_count(eval_section.get("k"), "eval.k", where) or DEFAULT_EVAL_K,
        eval_seed=int(eval_section.get("seed", 0)) + repetition,
        eval_concurrency=_count(eval_section.get("concurrency"), "eval.concurrency", where) or DEFAULT_EVAL_CONCURRENCY,
        eval_examples=_flag(eval_section.get("worked_examples", False), "eval.worked_examples", where),
    )


def with_model(config: Any, **changes: Any) -> Any:
    """A stage config with other paths or start model (the rest as planned)."""
    return dataclasses.replace(config, **changes)
