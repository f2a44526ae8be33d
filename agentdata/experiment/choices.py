"""The experiment's own settings of an arm, as settings dataclasses: checked by the settings machinery that
checks every command's (no hand-written validator), each default written once.

An arm is a list of overrides over one tree (`sft.data=real`, `rl.pool=band`, `rl.band=[0.1, 0.9]`), as on
the command line (`agentdata train rl.max_steps=3`): the stages' own keys go to the stages' dataclasses
(plan.py), the keys below to these. A bad value is one line naming the recipe, the arm and the key as
written: `recipe.yaml arm a: sft.data=genuine: must be one of real, stitched, none, mixed`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from agentdata.settings import Band, Given, Section, Sections, check_fields
from agentdata.train.closed_loop import DEFAULT_BAND  # an arm's pool is profiled as `train --rl-problems` does

# How a trained model dir is run (profile, evaluation: `engine:DIR`); `auto` is vLLM where it is installed
# (engines/vllm_server.vllm_by_default), else transformers.
ENGINES = ("auto", "hf", "vllm")
SFT_DATA = ("real", "stitched", "none", "mixed")  # the arm kinds of SFT (stages.py builds all but none)
RL_POOLS = ("none", "band", "random", "all", "easy", "hard")


@dataclass
class ArmModel:
    student: str = field(default="smollm2", metadata={"help": "The start weights (an engine spec)."})
    engine: str = field(
        default="auto",
        metadata={
            "help": "How a trained model dir is run for its profile and evaluation: hf, vllm, or auto (vLLM where "
            "it is installed, else hf).",
            "choices": ENGINES,
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)

    def resolved_engine(self) -> str:
        from agentdata.engines.vllm_server import local_engine_kind

        return local_engine_kind() if self.engine == "auto" else self.engine


@dataclass
class ArmSFT:
    data: str = field(
        default="none", metadata={"help": "The SFT set: real, stitched, mixed, or none.", "choices": SFT_DATA}
    )
    rows: int | None = field(
        default=None, metadata={"help": "SFT rows (each set cut to it); unset: all.", "range": "[1, inf)"}
    )

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class ArmRL:
    pool: str = field(default="none", metadata={"help": "GRPO's pool, or none (no GRPO).", "choices": RL_POOLS})
    band: Band = field(default=DEFAULT_BAND, metadata={"help": "The profile's pass-rate band.", "range": "[0, 1]"})
    size: int | None = field(default=None, metadata={"help": "Problems in the pool; unset: all.", "range": "[1, inf)"})
    profile_k: int = field(default=4, metadata={"help": "Rollouts per problem of the profile.", "range": "[1, inf)"})
    curve_problems: int = field(
        default=16, metadata={"help": "Held-out problems GRPO validates on while it trains.", "range": "[1, inf)"}
    )

    def __post_init__(self) -> None:
        check_fields(self)


@dataclass
class ArmEval:
    samples: int = field(
        default=4,
        metadata={"help": "Samples per held-out problem (eval's samples).", "range": "[1, inf)", "was": ("k",)},
    )
    seed: int = field(default=0, metadata={"help": "The evaluation's seed (plus the repetition).", "range": "[0, inf)"})
    concurrency: int = field(default=64, metadata={"help": "Problems evaluated at once.", "range": "[1, inf)"})
    worked_examples: bool = field(
        default=False, metadata={"help": "Show the evaluated model smollm2-tir's worked examples."}
    )

    def __post_init__(self) -> None:
        check_fields(self)


ARM_SETTINGS = Sections(
    Section("arm", {"model": ArmModel}),
    Section("sft", {"sft": ArmSFT}),
    Section("rl", {"rl": ArmRL}),
    Section("eval", {"eval": ArmEval}),
)


def is_arm_key(key: str) -> bool:
    """`key` (`sft.data`, `student`) is one of the experiment's own settings, not a stage's."""
    section, _, name = key.rpartition(".")
    owner = ARM_SETTINGS.sections.get(section or "arm")
    return owner is not None and name in owner.fields


def arm_choices(settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The experiment's own settings among an arm's overrides (`{"sft.data": "real", ...}`), built and
    checked: {"model": ArmModel, "sft": ArmSFT, "rl": ArmRL, "eval": ArmEval}."""
    values = {key: Given(value, f"{where}: {key}=", flag=True) for key, value in settings.items() if is_arm_key(key)}
    return ARM_SETTINGS.build([ARM_SETTINGS.layer(values)[0]])


@dataclass
class ProblemGenerator:
    """A recipe's problem set given as a generator spec (`{kinds: [compute], n: 100, seed: 1}`):
    `synth.generators.generate_problems`'s arguments."""

    n: int = field(default=100, metadata={"help": "Problems to generate.", "range": "[1, inf)"})
    seed: int = field(default=0, metadata={"help": "The generator's seed.", "range": "[0, inf)"})
    kinds: list[str] | None = field(default=None, metadata={"help": "Problem kinds; unset: the generator's."})
    levels: list[int] | None = field(default=None, metadata={"help": "Difficulty levels; unset: all."})

    def __post_init__(self) -> None:
        check_fields(self)
