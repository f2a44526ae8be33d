"""`agentdata experiment RECIPE --dry-run`: every arm's stages planned and their settings built, nothing run.

A GPU twin (examples/gpu/experiments/) is checked on a machine that has neither its data nor its
models: the dry run builds every stage's settings as the run would (a typo or a bad value is the
run's own one-line error), lists the stages each arm would run with the command each stands for,
and lists the recipe's inputs (problem files, worked solutions, model dirs) with whether they are
here. It writes nothing: the stages' configs are built against placeholder problem files in a
temporary folder. Generated problems (and problem files that are here) are made and checked for
overlap with the held-out set, as the run would.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.experiment.plan import ArmPlan, ProblemFiles
from agentdata.experiment.recipe import Recipe, section_of

# What each stage stands for, and the recipe sections that configure it.
STAGE_COMMANDS = {
    "collect": ("agentdata collect", ("collect",)),
    "stitch": ("agentdata synth stitch", ("stitch",)),
    "curate": ("agentdata curate", ("curate",)),
    "sft_sets": ("the SFT sets aligned over the same problems", ()),
    "sft": ("agentdata train --stage sft", ("sft",)),
    "profile": ("agentdata filter (the start's pass rates)", ("loop",)),
    "pool": ("the pool picked from the profile", ()),
    "grpo": ("agentdata train --stage rl", ("rl", "loop")),
    "eval": ("agentdata eval", ("eval", "loop")),
}
PLACEHOLDER = '{"question": "What is 6 * 7?", "answer": "42"}\n'


@dataclass
class DryRun:
    recipe: str
    source: str
    arms: list[str]
    seeds: int
    inputs: list[dict[str, Any]]  # {what, path, here}
    plans: list[dict[str, Any]] = field(default_factory=list)  # {arm, seed, stages: [{stage, command, settings}]}

    def as_dict(self) -> dict[str, Any]:
        return {
            "recipe": self.recipe,
            "source": self.source,
            "arms": self.arms,
            "seeds": self.seeds,
            "inputs": self.inputs,
            "plans": self.plans,
        }


def dry_run(recipe: Recipe) -> DryRun:
    """Plan every arm of every repetition and build each stage's settings; run and write nothing."""
    from agentdata.experiment.runner import plan_all

    check_problems(recipe)
    with tempfile.TemporaryDirectory(prefix="agentdata-dry-run-") as scratch:
        folder = Path(scratch)
        for name in ("train", "held_out", "curve"):
            (folder / f"{name}.jsonl").write_text(PLACEHOLDER, encoding="utf-8")
        files = ProblemFiles(folder / "train.jsonl", folder / "held_out.jsonl", folder / "curve.jsonl", {})
        plans = plan_all(recipe, files, folder, check_paths=False)
    found = DryRun(recipe.name, recipe.source, list(recipe.arms), recipe.seeds, inputs(recipe))
    for repetition in range(recipe.seeds):
        arms = [plans[(arm, repetition)] for arm in recipe.arms]
        set_kinds = sorted({plan.sft_data for plan in arms} - {"none"})
        for plan in arms:
            stages = [_stage(name, recipe, plan) for name in arm_stages(plan, set_kinds)]
            found.plans.append({"arm": plan.arm, "seed": repetition, "stages": stages})
    return found


def check_problems(recipe: Recipe) -> None:
    """The training and held-out problems where they can be had here (generated, or a file that is here),
    checked for overlap as the run checks them; a problem file that is not here is listed, not read."""
    from agentdata.experiment.problem_sets import DEFAULT_HELD_OUT, DEFAULT_PROBLEMS, problems_from, refuse_overlap

    where = f"{recipe.source} base"
    loaded = {}
    for key, default in (("problems", DEFAULT_PROBLEMS), ("held_out", DEFAULT_HELD_OUT)):
        value = recipe.base.get(key, default)
        if isinstance(value, str) and not Path(value).exists():
            continue
        loaded[key] = problems_from(value, key, where)
    if len(loaded) == 2:
        refuse_overlap(loaded["problems"], loaded["held_out"], where)


def arm_stages(plan: ArmPlan, set_kinds: list[str]) -> list[str]:
    """The stages the arm's chain runs, in order (experiment/arm.py's ArmChain)."""
    stages = []
    if plan.sft_data != "none":
        wanted = set(set_kinds) - {"mixed"} | ({"real", "stitched"} if "mixed" in set_kinds else set())
        for kind in sorted(wanted):
            stages += ["collect" if kind == "real" else "stitch", "curate"]
        stages += ["sft_sets", "sft"]
    if plan.rl_pool != "none":
        stages += [] if plan.rl_pool == "all" else ["profile", "pool"]
        stages.append("grpo")
    return [*stages, "eval"]


def _stage(name: str, recipe: Recipe, plan: ArmPlan) -> dict[str, Any]:
    command, sections = STAGE_COMMANDS[name]
    settings = recipe.arm_settings(plan.arm)
    values = {f"{section}.{key}": value for section in sections for key, value in section_of(settings, section).items()}
    seeds = {
        "collect": plan.collect.seed,
        "sft": plan.sft_values.get("seed"),
        "grpo": plan.rl_values.get("seed"),
        "profile": plan.rl_values.get("seed"),
        "eval": plan.eval_seed,
    }
    if name == "pool":
        values = {"rl.pool": plan.rl_pool, "rl.band": list(plan.band), "rl.size": plan.pool_size}
    if name in seeds and seeds[name] is not None:
        values["seed"] = seeds[name]
    return {"stage": name, "command": command, "settings": values}


def inputs(recipe: Recipe) -> list[dict[str, Any]]:
    """The files and model dirs the run reads, each with whether it is on this machine."""
    found = []
    for key in ("problems", "held_out", "stitch.solutions"):
        value = recipe.base.get(key)
        if isinstance(value, str):
            found.append({"what": key, "path": value, "here": Path(value).exists()})
    specs = {("student", recipe.base.get("student")), ("collect.model", recipe.base.get("collect.model"))}
    specs |= {("student", arm.get("student")) for arm in recipe.arms.values()}
    for what, spec in sorted((what, str(spec)) for what, spec in specs if spec):
        path = spec_path(spec)
        if path:
            found.append({"what": what, "path": path, "here": Path(path).exists()})
    return found


def spec_path(spec: str) -> str | None:
    """The model dir an engine spec names (`hf:/models/X`, `tir:vllm:./ckpt`), or None (an embedded name, a URL)."""
    from agentdata.engines.spec import ModelSpec

    return ModelSpec.parse(spec).named_dir
