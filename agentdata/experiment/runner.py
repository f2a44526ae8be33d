"""`agentdata experiment RECIPE` as a library call: plan every arm, run each through the stages, report.

    OUT/problems/{train,held_out,curve}.jsonl    the problems every arm shares
    OUT/work/<stage>-<digest>/                    one folder per stage run (shared by the arms that agree)
    OUT/arms/<arm>/seed-<r>.json                  what each arm ran, stage by stage, and how it ended
    OUT/experiment.json, report.md, report.png    the report (experiment/report.py, experiment/plots.py)

Every arm of every repetition is planned first (a bad value stops everything before work); then
the arms run, each as a chain of stages (arm.py; work.py runs or reuses each): one after another in this
process, or `jobs` at once, each in a worker process of its own (workers.py). An arm whose stage
fails is recorded as failed at that stage and the others go on; Ctrl-C or a kill stops the
experiment, and the same command resumes it at the arm and stage where it stopped.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.events import note
from agentdata.experiment.arm import run_arm
from agentdata.experiment.neighbours import registered
from agentdata.experiment.plan import ArmPlan, ProblemFiles, plan_arm
from agentdata.experiment.recipe import Recipe
from agentdata.experiment.work import Workshop
from agentdata.experiment.workers import ArmJob, default_jobs, run_arms_in_workers, usable_cores

ARMS_DIR = "arms"


def plan_all(
    recipe: Recipe, files: ProblemFiles, out: Path, check_paths: bool = True
) -> dict[tuple[str, int], ArmPlan]:
    """Every arm of every repetition, built and checked (before any work)."""
    return {
        (arm, repetition): plan_arm(recipe, arm, repetition, files, out / "work", check_paths)
        for repetition in range(recipe.seeds)
        for arm in recipe.arms
    }


def run_experiment(recipe: Recipe, out: str | Path, jobs: int | None = 1) -> Any:
    """Run (or resume) the experiment in `out`, `jobs` arms at once (None: as many as the cores and memory
    allow, workers.default_jobs); write and return its report (experiment/report.py)."""
    from agentdata.experiment.problem_sets import write_problem_files
    from agentdata.experiment.report import build_report

    if jobs is not None and jobs < 1:
        raise UserError(f"--jobs {jobs}: must be at least 1")
    out = Path(out)
    files = write_problem_files(recipe, out / "problems")
    plans = plan_all(recipe, files, out)
    workshop = Workshop(out / "work")
    units = []  # (plan, the SFT kinds of its repetition), in the order the arms are reported
    for repetition in range(recipe.seeds):
        arms = [plans[(arm, repetition)] for arm in recipe.arms]
        set_kinds = sorted({plan.sft_data for plan in arms} - {"none"})  # the sets are aligned over all of them
        units.extend((plan, set_kinds) for plan in arms)
    engines = {plan.engine for plan in plans.values()}
    keep_recorded_engine(engines)
    with registered(out) as others:
        if others:
            note(
                "experiment",
                f"warning: another experiment is running on this machine: {', '.join(others)}. Two at once can run "
                "it out of memory (each chose its arms at once from the memory free when it started)",
            )
        jobs = jobs or default_jobs(len(units), engines)
        if jobs == 1 or len(units) == 1:
            outcomes = [run_arm(plan, kinds, files, workshop, out / ARMS_DIR) for plan, kinds in units]
        else:
            outcomes = run_arms_in_workers(_jobs(units, files, workshop, out / ARMS_DIR, jobs), jobs)
    return build_report(recipe, outcomes, files, out, engines)


def keep_recorded_engine(engines: set[str]) -> None:
    """A recipe whose arms run on `hf` (written so, or `auto` where vLLM is not installed) keeps the transformers
    engine for all its models (the default teacher and GRPO's rollouts too, which otherwise take vLLM where it is
    installed): `engine: hf` reproduces, to the response, results recorded on transformers. AGENTDATA_VLLM set by
    the user wins; spawned arm workers inherit it."""
    from agentdata.engines.vllm_server import SWITCH_ENV

    if "vllm" not in engines:
        os.environ.setdefault(SWITCH_ENV, "off")


def _jobs(units: list, files: ProblemFiles, workshop: Workshop, arms_dir: Path, jobs: int) -> list[ArmJob]:
    threads = max(1, usable_cores() // jobs)  # one core's share each: threads beyond it wait for each other
    filters = list(warnings.filters)
    return [
        ArmJob(index, plan, kinds, files, workshop.root, workshop.run_id, arms_dir, threads, filters, opening(plan))
        for index, (plan, kinds) in enumerate(units)
    ]


def opening(plan: ArmPlan) -> str | None:
    """The first stage an arm may share with the other arms of its repetition: the SFT sources (collect and
    stitch) when it trains on a set, the start's profile when GRPO picks a pool from one, else none. Only
    the order arms start in depends on it (workers.next_job); sharing itself is the stage keys'."""
    if plan.sft_data != "none":
        return f"sft-sources-{plan.repetition}"
    if plan.rl_pool not in ("none", "all"):
        return f"profile-{plan.repetition}"
    return None
