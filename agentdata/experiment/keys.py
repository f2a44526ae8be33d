"""Every setting a recipe may name, by section, and the one check of a name (closest keys on a typo).

- `student`: the start weights (engine spec; default `smollm2`);
- `engine`: how a trained model is run for its profile and evaluation, `auto` (default: vLLM where it is
  installed), `hf` or `vllm`;
- `problems`, `held_out`: the training and the evaluation problems (base only);
- `collect.*`: the teacher's run (`CollectConfig`: model, samples, seed, ... and its own loop fields);
- `curate.*`: how real and stitched trajectories become SFT rows (`CurateConfig`);
- `stitch.*`: the stitched baseline (`StitchConfig`), `stitch.solutions` a file of worked solutions;
- `sft.data` (real | stitched | none | mixed), `sft.rows`, and `SFTStageConfig` / TRL `SFTConfig` fields;
- `rl.pool` (none | band | random | all | easy | hard), `rl.band`, `rl.size`, `rl.profile_k`,
  `rl.curve_problems`, and `GRPOStageConfig` / TRL `GRPOConfig` fields, its loop fields included: `rl.temperature`
  is GRPO's rollouts' (and their profile's), as on `train`;
- `loop.*`: the student's agent loop (`LoopConfig`) wherever the student runs: profile, GRPO, evaluation;
- `eval.samples`, `eval.seed`, `eval.concurrency` (as `eval`'s), `eval.worked_examples` (the evaluated model is shown
  smollm2-tir's worked examples, as GRPO's rollouts from smollm2-tir were) and loop fields for the
  evaluation only (base only).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from agentdata.errors import UserError
from agentdata.experiment.choices import ARM_SETTINGS
from agentdata.settings import gone, unknown_setting

SECTIONS = ("collect", "curate", "stitch", "sft", "rl", "loop", "eval")
TOP_LEVEL = (*ARM_SETTINGS.sections["arm"].fields, "problems", "held_out")
# The experiment's own keys of each section (experiment/choices.py), beside the stages' own.
EXPERIMENT_FIELDS = {
    "stitch": ("solutions",),  # a file, checked where the arm is planned
    **{name: tuple(section.fields) for name, section in ARM_SETTINGS.sections.items() if name != "arm"},
}
# Fields the experiment sets itself, and what to write instead.
RESERVED = {
    "sft.model": "the SFT start is `student`",
    "sft.sft_data": "the SFT set is chosen by sft.data",
    "sft.out": "every stage writes under the experiment's --out",
    "sft.eval_problems": "the held-out set is `held_out`",
    "rl.model": "GRPO starts from the SFT model, or `student` without SFT",
    "rl.rl_pool": "the pool is chosen by rl.pool",
    "rl.out": "every stage writes under the experiment's --out",
    "rl.eval_problems": "the curves use the first rl.curve_problems of `held_out`",
    "collect.limit": "the teacher runs on every training problem",
    # the SFT stage trains on the canonical sets; `agentdata curate --for` / `synth stitch --for` export them
    "curate.target": "the arms train on the canonical SFT set; export it with `agentdata curate --for`",
    "stitch.target": "the stitched trajectories are curated as the real ones are, to the canonical set",
}


@cache
def own_fields(section: str) -> frozenset[str]:
    """The fields of a section that agentdata defines (TRL's come on top for sft and rl)."""
    from agentdata.agent.config import CollectConfig, LoopConfig
    from agentdata.curate.config import CurateConfig
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.settings import flat_names
    from agentdata.sft.config import SFTStageConfig
    from agentdata.synth.stitch import StitchConfig

    loop = set(flat_names(LoopConfig))
    names = {
        "collect": set(flat_names(CollectConfig)),
        "curate": set(flat_names(CurateConfig)),
        "stitch": {item.name for item in dataclasses.fields(StitchConfig)},
        "sft": set(flat_names(SFTStageConfig)),
        "rl": set(flat_names(GRPOStageConfig)),  # its loop fields too: GRPO's own, over `loop.*` (train's rl.)
        "loop": loop,
        "eval": loop,
    }[section]
    names |= set(EXPERIMENT_FIELDS.get(section, ()))
    return frozenset(name for name in names if f"{section}.{name}" not in RESERVED)


@cache
def trl_fields(section: str) -> frozenset[str]:
    """TRL's own config fields, which the sft and rl sections pass through (`train`'s rule)."""
    if section not in ("sft", "rl"):
        return frozenset()
    import trl

    config = trl.SFTConfig if section == "sft" else trl.GRPOConfig
    return frozenset(item.name for item in dataclasses.fields(config))


def all_keys() -> list[str]:
    """Every name a recipe knows without TRL (the suggestions for a typo)."""
    return [*TOP_LEVEL, *(f"{section}.{name}" for section in SECTIONS for name in sorted(own_fields(section)))]


@cache
def renamed_keys(section: str) -> dict[str, str]:
    """The section's names of older releases -> their names now (`collect.teacher` is `collect.model`, `eval.k`
    is `eval.samples` as `eval` names it)."""
    from agentdata.agent.config import CollectConfig
    from agentdata.settings import renamed_names

    types = {name: list(owner.configs.values()) for name, owner in ARM_SETTINGS.sections.items()}
    types["collect"] = [CollectConfig]
    return {old: new for kind in types.get(section, []) for old, new in renamed_names(kind).items()}


def check_key(key: str, where: str, written: str = "") -> None:
    """A UserError for a name no section knows, naming the closest keys (each followed by `written`: `=...` where
    the key was a KEY=VALUE word)."""
    if key in TOP_LEVEL:
        return
    section, _, name = key.partition(".")
    if key in RESERVED:
        raise UserError(f"{where}: {key} is set by the experiment ({RESERVED[key]})")
    if section in SECTIONS and name:
        if name in own_fields(section):
            return
        if name in trl_fields(section):
            return
        renamed = renamed_keys(section)
        if name in renamed:  # a name of an older release (`collect.teacher`): one line naming the new one
            raise gone(key, f"{section}.{renamed[name]}", where)
    otherwise = f"the sections are {', '.join(SECTIONS)} (docs/experiments.md lists them)"
    raise unknown_setting(key, all_keys(), where, written, otherwise)


def flat_settings(data: Any, where: str) -> dict[str, Any]:
    """A base or an arm as flat `section.field` names (a nested `sft: {data: real}` is `sft.data`, and a composed
    field's mapping stays flat as in a --config file: `rl: {loop: {temperature: 0.9}}` is `rl.temperature`);
    checked."""
    if not isinstance(data, dict):
        raise UserError(f"{where}: expected a mapping of settings, got {type(data).__name__}")
    flat: dict[str, Any] = {}
    for key, value in data.items():
        key = str(key)
        if key in SECTIONS:
            if not isinstance(value, dict):
                raise UserError(f"{where}: `{key}:` must be a mapping of {key} settings")
            items = _section_items(key, value)
        else:
            section, _, name = key.partition(".")
            items = _section_items(section, {name: value}) if section in SECTIONS else [(key, value)]
        for name, inner in items:
            check_key(name, where)
            if name in flat:
                raise UserError(f"{where}: {name} is given twice")
            flat[name] = inner
    return flat


def _section_items(section: str, mapping: dict[str, Any]) -> list[tuple[str, Any]]:
    """A section's mapping as dotted names, a composed field's own mapping (`loop:`) inlined."""
    items = []
    for name, value in mapping.items():
        if str(name) in composed_fields(section) and isinstance(value, dict):
            items += _section_items(section, value)
        else:
            items.append((f"{section}.{name}", value))
    return items


@cache
def composed_fields(section: str) -> frozenset[str]:
    """The composed settings of a section's stage config (`loop`, `validation`, `optimiser`, ...)."""
    from agentdata.agent.config import CollectConfig, LoopConfig
    from agentdata.curate.config import CurateConfig
    from agentdata.rl.config import GRPOStageConfig
    from agentdata.settings import composed_names
    from agentdata.sft.config import SFTStageConfig
    from agentdata.synth.stitch import StitchConfig

    stage = {"collect": CollectConfig, "curate": CurateConfig, "stitch": StitchConfig, "sft": SFTStageConfig}
    stage |= {"rl": GRPOStageConfig, "loop": LoopConfig, "eval": LoopConfig}
    return frozenset(composed_names(stage[section]))
