"""One arm of an experiment: its chain of stages, run or reused, and the record of how it went.

    OUT/arms/<arm>/seed-<r>.json    what the arm ran, stage by stage, and how it ended

`run_arm` is what the command's own process runs with `--jobs 1`, and what each worker process runs
with more (workers.py); runner.py plans the arms and hands them out. A stage is run or reused by the
workshop (work.py): arms whose chains agree up to a stage share its run.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentdata.events import Event, emit
from agentdata.experiment import stages
from agentdata.experiment.plan import ArmPlan, ProblemFiles
from agentdata.experiment.work import StageFailed, StageRun, Workshop, digest_file
from agentdata.records import write_json
from agentdata.settings import flatten

TASK = "experiment"


@dataclass
class ArmOutcome:
    """One arm in one repetition: its stages, its model, its evaluation, or where it failed."""

    arm: str
    repetition: int
    status: str = "running"  # running | done | failed
    failed_stage: str | None = None
    reason: str | None = None
    stages: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    eval: dict[str, Any] | None = None  # EvalResult.as_dict() of the held-out evaluation
    scores: dict[str, Any] | None = None  # ProblemScores as a dict: the per-problem values
    grpo_metrics: str | None = None  # the GRPO stage's metrics.jsonl (the curves)
    pool: dict[str, Any] | None = None  # the pool GRPO trained on: kind, size, pass rates
    sft_set: dict[str, Any] | None = None  # the SFT set: kind, rows
    running_stage: str | None = None  # the stage under way (where the arm was if its worker died)
    pid: int | None = None  # the process running the arm (a worker's, with --jobs)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def wall_seconds(self) -> float:
        return sum(float(stage.get("wall_s", 0.0)) for stage in self.stages)

    @property
    def cpu_seconds(self) -> float:
        return sum(float(stage.get("cpu_s", 0.0)) for stage in self.stages)


def run_arm(plan: ArmPlan, set_kinds: list[str], files: ProblemFiles, workshop: Workshop, arms_dir: Path) -> ArmOutcome:
    """The arm's chain of stages; a failing stage ends the arm (recorded), never the experiment."""
    outcome = ArmOutcome(plan.arm, plan.repetition, pid=os.getpid())
    chain = ArmChain(plan, set_kinds, files, workshop, outcome, arm_record(arms_dir, plan))
    try:
        chain.run()
        outcome.status = "done"
    except StageFailed as failure:
        outcome.status, outcome.failed_stage, outcome.reason = "failed", failure.stage, failure.reason
        note_failure(outcome)
    record_outcome(outcome, arms_dir)
    return outcome


def arm_record(arms_dir: Path, arm: ArmPlan | ArmOutcome) -> Path:
    """Where an arm's repetition records its progress and outcome (what a resumed or dead worker reads back)."""
    return arms_dir / arm.arm / f"seed-{arm.repetition}.json"


def record_outcome(outcome: ArmOutcome, arms_dir: Path) -> None:
    write_json(arm_record(arms_dir, outcome), outcome.as_dict())


def note_failure(outcome: ArmOutcome) -> None:
    _note(f"arm {outcome.arm} (seed {outcome.repetition}) failed at {outcome.failed_stage}: {outcome.reason}")


@dataclass(frozen=True)
class Model:
    train_spec: str  # what training starts from: the student's spec, or hf:DIR of a trained model
    run_spec: str  # what runs it for a profile or an evaluation: the student's spec, or ENGINE:DIR
    identity: dict[str, Any]  # what downstream stage keys depend on: the student's spec, or the stage key


@dataclass
class ArmChain:
    plan: ArmPlan
    set_kinds: list[str]  # the SFT sets of every arm of this repetition (aligned over the same problems)
    files: ProblemFiles
    workshop: Workshop
    outcome: ArmOutcome
    record: Path

    def stage(self, name: str, depends_on: dict[str, Any], action: Any) -> StageRun:
        label = f"arm {self.plan.arm} · seed {self.plan.repetition} · {name}"
        depends_on = with_engine(name, depends_on, self.plan.engine)
        finished = self.workshop.done(name, depends_on)
        _note(f"{label}: {'reused' if finished else 'running'}")
        self.outcome.running_stage = name
        write_json(self.record, self.outcome.as_dict())
        run = finished or self.workshop.run(name, depends_on, action)
        self.outcome.running_stage = None
        self.outcome.stages.append(run.summary())
        write_json(self.record, self.outcome.as_dict())  # progress survives a kill
        return run

    def run(self) -> None:
        """SFT (if any), then GRPO (if any), then the evaluation. A model is carried as (the spec training
        starts from, the spec that runs it, what identifies it): the student, or a trained dir."""
        plan = self.plan
        model = Model(plan.student, plan.student, {"student": plan.student})
        if plan.sft_data != "none":
            model = self.sft(model)
        if plan.rl_pool != "none":
            model = self.grpo(model)
        self.outcome.model = model.run_spec
        eval_spec = plan.eval_spec(model.run_spec)
        evaluation = self.stage(
            "eval",
            {
                "model": model.identity,
                "held_out": self.files.digests["held_out"],
                "loop": flatten(plan.eval_loop),
                "k": plan.eval_k,
                "seed": plan.eval_seed,
                **({"worked_examples": True} if plan.eval_examples else {}),  # old stage keys stay as they were
            },
            lambda folder: stages.evaluate(eval_spec, plan.arm, self.files.held_out, plan, folder),
        )
        self.outcome.eval, self.outcome.scores = evaluation.result["eval"], evaluation.result["scores"]

    def sources(self) -> tuple[dict[str, Path], dict[str, str]]:
        """The curated SFT rows of each source (real, stitched) the repetition's sets need, and their stage keys."""
        plan, train = self.plan, self.files.train
        wanted = set(self.set_kinds) - {"mixed"} | ({"real", "stitched"} if "mixed" in self.set_kinds else set())
        found, keys = {}, {}
        for kind in sorted(wanted):
            if kind == "real":
                settings = {"problems": self.files.digests["train"], "collect": collect_key(plan.collect)}
                run = self.stage(
                    "collect", settings, lambda folder: stages.collect_teacher(train, plan.collect, folder)
                )
            else:
                solutions = plan.stitch_solutions
                settings = {
                    "problems": self.files.digests["train"],
                    "stitch": flatten(plan.stitch),
                    "solutions": digest_file(solutions) if solutions else None,
                }
                run = self.stage(
                    "stitch",
                    settings,
                    lambda folder, solutions=solutions: stages.stitch_problems(train, plan.stitch, folder, solutions),
                )
            curated = self.stage(
                "curate",
                {"source": run.key, "curate": flatten(plan.curate)},
                lambda folder, run_dir=Path(run.result["run_dir"]): stages.curate_run(run_dir, plan.curate, folder),
            )
            found[kind], keys[kind] = Path(curated.result["output"]), curated.key
        return found, keys

    def trained(self, run: StageRun) -> Model:
        model_dir = run.result["model_dir"]
        return Model(f"hf:{model_dir}", self.plan.run_spec(model_dir), {run.stage: run.key})

    def sft(self, start: Model) -> Model:
        plan = self.plan
        found, keys = self.sources()
        order = [problem.id for problem in _problems(self.files.train)]
        sets = self.stage(
            "sft_sets",
            {"sources": keys, "kinds": self.set_kinds, "rows": plan.sft_rows},
            lambda folder: stages.align_sets(found, self.set_kinds, plan.sft_rows, order, folder),
        )
        sft_set = Path(sets.result["sets"][plan.sft_data])
        self.outcome.sft_set = {
            "kind": plan.sft_data,
            "rows": sets.result["rows"],
            "available": sets.result["available"],
        }
        settings = _without(flatten(plan.sft), "model", "sft_data", "out", *TRACKING)
        run = self.stage(
            "sft",
            {"start": start.identity, "set": sets.key, "kind": plan.sft_data, "sft": settings},
            lambda folder: stages.train_sft(plan, start.train_spec, sft_set, folder),
        )
        return self.trained(run)

    def grpo(self, start: Model) -> Model:
        plan = self.plan
        if plan.rl_pool == "all":
            pool_file, pool_key = self.files.train, self.files.digests["train"]
            self.outcome.pool = {"kind": "all", "size": len(_problems(self.files.train))}
        else:
            profile = self.stage(
                "profile",
                {
                    "start": start.identity,
                    "problems": self.files.digests["train"],
                    "loop": flatten(plan.loop),
                    "k": plan.profile_k,
                    "seed": plan.rl.seed,
                    "band": list(plan.band),
                },
                lambda folder: stages.profile_student(
                    start.run_spec, self.files.train, plan.loop, plan.profile_k, plan.rl.seed, plan.band, folder
                ),
            )
            pool = self.stage(
                "pool",
                {"profile": profile.key, "kind": plan.rl_pool, "size": plan.pool_size, "seed": plan.rl.seed},
                lambda folder: stages.choose_pool(
                    plan.rl_pool, profile.result, self.files.train, plan.pool_size, plan.rl.seed, folder
                ),
            )
            pool_file, pool_key = Path(pool.result["pool"]), pool.key
            self.outcome.pool = {
                "kind": plan.rl_pool,
                "size": pool.result["size"],
                "pass_rates": pool.result["pass_rates"],
            }
        settings = _without(flatten(plan.rl), "model", "rl_pool", "out", "eval_problems", *TRACKING)
        run = self.stage(
            "grpo",
            {"start": start.identity, "pool": pool_key, "rl": settings, "curve": self.files.digests["curve"]},
            lambda folder: stages.train_grpo(plan, start.train_spec, pool_file, self.files.curve, folder),
        )
        self.outcome.grpo_metrics = run.result["metrics_file"]
        return self.trained(run)


# The stages whose outputs a model's generations make: their work depends on the engine that generated them.
GENERATING = ("collect", "profile", "grpo", "eval")


def with_engine(stage: str, depends_on: dict[str, Any], engine: str) -> dict[str, Any]:
    """A generating stage's key with the engine that runs it (the same seed samples other tokens on vLLM than on
    transformers), so a folder first run on one engine and resumed on the other does not reuse, and report as the
    other's, work it did not do. Transformers' keys stay as they were before vLLM came, so those folders resume."""
    if stage not in GENERATING or engine == "hf":
        return depends_on
    return {**depends_on, "engine": engine}


# Where a stage is reported changes nothing it makes: left out of its key, so turning a tracker on reuses the work.
TRACKING = ("report_to", "run_name")


def _without(settings: dict[str, Any], *names: str) -> dict[str, Any]:
    return {key: value for key, value in settings.items() if key not in names}


def _problems(path: Path) -> list[Any]:
    from agentdata.problems import load_problems

    return load_problems(path)


def _note(message: str) -> None:
    emit(Event("log", TASK, message=message))


def collect_key(config: Any) -> dict[str, Any]:
    """What a teacher run's trajectories depend on: collect's own resume identity (agent/rundir.py) and how
    many it makes, not how it runs them (concurrency, executors, shards), so a new way to run one reuses it."""
    from agentdata.agent.rundir import identity

    return {**identity(config.for_run().settings()), "samples": config.samples, "limit": config.limit}
