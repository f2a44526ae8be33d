"""`agentdata train` as a library call: its settings, the demonstration, the stages in order.

    from agentdata.train import TrainRequest, train
    results = train(TrainRequest(out=Path("runs/x"), settings={"sft_data": "sft.parquet", "rl_pool": "pool.parquet"}))

`settings` are written the way a config file writes them, and override the file's
(`config_file`): a stage's section (`{"rl": {"max_steps": 3}}`), a dotted key (`"rl.max_steps"`),
or a name without a section, for every stage that has it (`{"max_new_tokens": 64}`); any field
of TRL's SFTConfig / GRPOConfig in a section too (`train/settings.py`). `plan_train` settles every
stage's settings before any work (a bad value is one UserError, exit 2 on the command line);
`train` runs the plan.

SFT runs on an SFT set, then GRPO starts from the SFT model, in the protocol and under the system
prompt the set teaches (train/prompt.py); with `rl_problems` (raw problems) the SFT model is
profiled on them between the stages and GRPO trains on its band (train/closed_loop.py). With no
data at all (stage `all`, no SFT set, no pool, no config file) it runs the demonstration: a short
SFT on stitched worked solutions, then a few GRPO steps on the default problems
(synth.builtin.default_problems). Notes and progress are `agentdata.events`; nothing is drawn here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.engines.defaults import DEFAULT_PROTOCOL
from agentdata.engines.fingerprint import local_model_dir
from agentdata.errors import UserError
from agentdata.events import note
from agentdata.outputs import COMPANION_SUFFIXES, check_output_dir, companion
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Layer, read_settings_file
from agentdata.sft.config import SFTStageConfig
from agentdata.train.closed_loop import POOL_NAME, ClosedLoopConfig, pool_for_grpo, shared_rollout_server
from agentdata.train.prompt import rollout_prompt
from agentdata.train.settings import TRAIN_SETTINGS

DEFAULT_SFT_SET = Path("sft.parquet")  # what `agentdata curate` writes by default
DEFAULT_RL_POOL = Path("pool.parquet")  # what `agentdata filter` writes by default
DEMO_SFT_SET = "demo_sft.parquet"  # the demonstration stitches its SFT set here, in --out
STAGES = ("sft", "rl", "all")
# The no-argument demonstration, sized to finish in about ten minutes on two shared CPU cores
# (timed in bench/RESULTS_train.md): a short SFT that teaches the tool-call format, then a few
# GRPO steps with real tool calls. Flags and --config still override these.
DEMO_SFT_CONVERSATIONS = 32
DEMO_SFT = {
    "epochs": 1,
    "batch_size": 8,
    "max_length": 512,
    "learning_rate": 1e-4,
    "warmup_ratio": 0.1,
    "save_steps": 1000,
}
DEMO_RL = {
    "max_steps": 2,
    "num_generations": 4,
    "prompts_per_step": 1,
    "max_new_tokens": 192,
    "max_tool_calls": 2,
    "max_turns": 3,
    "learning_rate": 1e-5,
}  # overlong_buffer follows: 192 // 4


@dataclass
class TrainRequest:
    """What the user asked for: the stages, where they write, and their settings (see the module doc)."""

    stage: str = "all"
    out: Path = Path("runs/train")
    config_file: Path | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)  # over the file's; written as the file writes them


@dataclass
class TrainPlan:
    """What a `train` runs, settled before any work."""

    stage: str
    out: Path
    demo: bool
    sft: SFTStageConfig | None  # None: no SFT in this run
    rl: GRPOStageConfig | None  # None: no GRPO (--stage sft); its model is the SFT output when SFT runs
    closed_loop: ClosedLoopConfig
    demo_set: Path | None = None  # the demonstration's SFT set, stitched before SFT
    sft_set: Any = field(default=None, repr=False)  # sft_set.SFTSet read while planning, trained on as read
    notes: list[str] = field(default_factory=list)  # one line each: what the run decided or noticed
    warnings: list[str] = field(default_factory=list)  # one line each: what disagrees


def plan_train(request: TrainRequest) -> TrainPlan:
    """Every stage's settings from the defaults, the config file and `request.settings`; one UserError for any
    mistake, before any work."""
    if request.stage not in STAGES:
        raise UserError(f"--stage {request.stage}: expected one of {', '.join(STAGES)}")
    path = request.config_file
    user = [TRAIN_SETTINGS.layer(read_settings_file(path), str(path))[0]] if path is not None else []
    user.append(TRAIN_SETTINGS.layer(request.settings)[0])  # over the file's, as flags are
    given = TRAIN_SETTINGS.given(user)
    _refuse_what_train_sets(given)
    demo = is_demo(request, given)
    both = request.stage == "all"
    sft_out, rl_out = (request.out / "sft", request.out / "rl") if both else (request.out, request.out)
    defaults: Layer = {"sft": {}, "rl": {}}
    fixed: Layer = {"sft": {"out": _set(str(sft_out))}, "rl": {"out": _set(str(rl_out))}}
    plan = TrainPlan(request.stage, request.out, demo, None, None, ClosedLoopConfig())
    taught, sft_data = _plan_sft_data(request, given, demo, plan, defaults, fixed)
    if request.stage in ("rl", "all"):
        _plan_rl(request, given, taught, sft_data, plan, defaults, fixed)
    elif _value(given, "rl", "rl_problems"):
        plan.notes.append("--rl-problems is for the GRPO stage: not used with --stage sft")
    built = TRAIN_SETTINGS.build([defaults, *user, fixed])
    plan.sft = built["sft"] if taught is not None else None
    plan.rl = built["rl"] if request.stage in ("rl", "all") else None
    if plan.rl is not None and taught is None:  # GRPO from a model that exists now: the plan shows its protocol
        plan.rl = plan.rl.for_run()  # (after SFT, the SFT model's record is read where GRPO starts)
    plan.closed_loop = built["closed_loop"]
    return plan


def _plan_sft_data(
    request: TrainRequest, given: Layer, demo: bool, plan: TrainPlan, defaults: Layer, fixed: Layer
) -> tuple[Any, Path | None]:
    """(what SFT teaches, its set) when SFT runs, else (None, None); fills in the SFT layers."""
    if request.stage not in ("sft", "all"):
        return None, None
    from agentdata.sft.prompt import prompt_of, uniform_prompt
    from agentdata.sft.sft_set import read_sft_set

    data = Path(_value(given, "sft", "sft_data") or DEFAULT_SFT_SET)
    protocol = _value(given, "sft", "protocol")
    if demo and not data.exists():
        data = plan.demo_set = request.out / DEMO_SFT_SET
        defaults["sft"].update({name: _set(value) for name, value in DEMO_SFT.items()})
        fixed["sft"]["sft_data"] = _set(str(data))
        return uniform_prompt(protocol or DEFAULT_PROTOCOL, rows=DEMO_SFT_CONVERSATIONS), data
    if not data.exists():
        if request.stage == "sft" or _value(given, "sft", "sft_data"):
            raise UserError(f"{data}: no SFT set; write one with `agentdata curate` or pass --sft-data")
        plan.notes.append(f"no SFT set at {data}: skipping SFT (write one with `agentdata curate`)")
        return None, None
    if demo:
        defaults["sft"].update({name: _set(value) for name, value in DEMO_SFT.items()})
    fixed["sft"]["sft_data"] = _set(str(data))
    # Read once, here: the prompt it teaches settles GRPO's settings, and SFT trains on these same rows.
    plan.sft_set = read_sft_set(data, protocol, _coerced(given, "sft", "limit", int | None))
    return prompt_of(plan.sft_set.rows), data


def _plan_rl(
    request: TrainRequest,
    given: Layer,
    taught: Any,
    sft_data: Path | None,
    plan: TrainPlan,
    defaults: Layer,
    fixed: Layer,
) -> None:
    """GRPO's layers: where it starts, its pool, the demonstration's sizes and the protocol SFT taught."""
    pool, problems = _value(given, "rl", "rl_pool"), _value(given, "rl", "rl_problems")
    if pool and problems:
        raise UserError("give --rl-pool (a profiled pool) or --rl-problems (raw problems profiled here), not both")
    if not pool and not problems and DEFAULT_RL_POOL.exists():
        defaults["rl"]["rl_pool"] = _set(str(DEFAULT_RL_POOL))
    if plan.demo:
        defaults["rl"].update({name: _set(value) for name, value in DEMO_RL.items()})
    rl_model = _value(given, "rl", "model")
    start = rl_model or GRPOStageConfig.model
    if taught is not None:  # GRPO starts from the SFT model (OUT/sft as `hf:`)
        start = f"hf:{fixed['sft']['out'].value}"
        if rl_model and rl_model != (_value(given, "sft", "model") or SFTStageConfig.model):
            plan.notes.append(f"GRPO starts from the SFT model {start}, not from {rl_model} (its model setting)")
        fixed["rl"]["model"] = _set(start)
    prompt_defaults, warnings = rollout_prompt(
        taught, sft_data, _value(given, "rl", "protocol"), _value(given, "rl", "system_prompt"), start
    )
    defaults["rl"].update({name: _set(value) for name, value in prompt_defaults.items()})
    plan.warnings += warnings


def _refuse_what_train_sets(given: Layer) -> None:
    for values in given.values():
        if "out" in values:
            where = values["out"].where
            raise UserError(
                f"{where + ': ' if where else ''}out: train writes each stage under --out (OUT/sft and OUT/rl with "
                "--stage all, OUT itself for one stage): set --out instead"
            )


def _set(value: Any) -> Any:
    from agentdata.settings import Given

    return Given(value)


def _coerced(given: Layer, section: str, name: str, kind: Any) -> Any:
    """A given value as its field's type (what gave it named when it is not one), None when not given."""
    from agentdata.settings import SettingError, coerce

    entry = given[section].get(name)
    try:
        return coerce(name, kind, entry.value) if entry is not None else None
    except SettingError as error:
        raise error.at(entry.where, entry.flag) from None


def _value(given: Layer, section: str, name: str) -> Any:
    entry = given[section].get(name)
    return entry.value if entry is not None else None


def is_demo(request: TrainRequest, given: Layer) -> bool:
    data_given = any(_value(given, section, name) for section, name in DATA_SETTINGS)
    return request.stage == "all" and request.config_file is None and not data_given and not DEFAULT_RL_POOL.exists()


DATA_SETTINGS = (("sft", "sft_data"), ("rl", "rl_pool"), ("rl", "rl_problems"))
# What each stage writes in its own folder (OUT, or OUT/sft and OUT/rl): an input there is refused.
STAGE_WRITES = ("checkpoints", "metrics.jsonl", "plots", "adapter", "eval")  # eval: during_training.EVAL_DIR


def train_writes(plan: TrainPlan) -> list[str]:
    """The names this run writes in --out: the stage folders (or each stage's files), the profiled pool and its
    companions when it profiles --rl-problems, the demonstration's set."""
    names = ["sft", "rl"] if plan.stage == "all" else list(STAGE_WRITES)
    if plan.closed_loop.rl_problems:
        names += [POOL_NAME, *(companion(POOL_NAME, suffix).name for suffix in COMPANION_SUFFIXES), "profile"]
    return names + [DEMO_SFT_SET] if plan.demo else names


@dataclass
class TrainResult:
    """What a `train` run did: each stage's result (SFTResult, GRPOResult) in the order they ran.

    Iterating gives the (stage, result) pairs; `as_dict()` (`train --json`) each stage's summary under
    its name (`{"sft": {...}, "rl": {...}}`), as every command's result gives one document."""

    stages: list[tuple[str, Any]] = field(default_factory=list)

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        return iter(self.stages)

    def __len__(self) -> int:
        return len(self.stages)

    def as_dict(self) -> dict[str, Any]:
        return {stage: result_summary(stage, result) for stage, result in self.stages}


def train(request: TrainRequest) -> TrainResult:
    """Run the stages asked for; returns their results in order."""
    from agentdata.training.memory import release_freed_memory

    plan = plan_train(request)
    check_output_dir(plan.out, "--out", plan_inputs(plan), train_writes(plan))  # never over what it reads
    check_before_work(plan)
    if plan.demo:
        note(
            "train",
            "demonstration: SFT of SmolLM2 on stitched worked solutions, then GRPO on the default problems "
            "(about ten minutes on two CPU cores; docs/train.md)",
        )
    for line in plan.notes:
        note("train", line)
    for line in plan.warnings:
        note("train", f"warning: {line}")
    results = TrainResult()
    if plan.sft is not None:
        if plan.demo_set is not None:
            build_demo_sft_set(plan.demo_set, plan.sft.protocol or DEFAULT_PROTOCOL)
        sft_set, plan.sft_set = plan.sft_set, None  # handed to SFT, not held through GRPO
        results.stages.append(("sft", _run_sft(plan.sft, sft_set)))
        del sft_set
        release_freed_memory()  # what the trainer held, back to the system before the next stage or caller
    if plan.rl is not None:
        with shared_rollout_server(plan.rl, plan.closed_loop) as server:  # the profile's and GRPO's, or None
            rl_config = pool_for_grpo(plan.rl, plan.closed_loop, plan.out, server)
            results.stages.append(("rl", _run_grpo(rl_config, server)))
        release_freed_memory()
    return results


def check_before_work(plan: TrainPlan) -> None:
    """What a stage would otherwise find wrong only when it starts, found before the first one: each stage's
    trackers installed, GRPO's rewards and tools (plug-ins imported and built), its sandbox service asked,
    its pool and the raw problems read, each stage's held-out problems read. A mistake in the `rl:` section
    is one line before SFT trains, not after."""
    from agentdata.evaluation.during_training import load_eval_problems
    from agentdata.training.trackers import check_installed

    for config in (plan.sft, plan.rl):
        if config is not None:
            check_installed(config.tracking, "train")  # TRL would find a missing one only after the model loads
    if plan.rl is not None:
        from agentdata.agent.loop import config_tools
        from agentdata.rl.rewards import reward_functions
        from agentdata.rl.run import load_pool

        reward_functions(plan.rl)
        config_tools(plan.rl.loop)
        if plan.rl.mode == "async":
            from agentdata.rl.async_stage import check_async_engine

            check_async_engine(plan.rl)
        if plan.rl.loop.sandbox != "local":  # a local sandbox starts its workers when GRPO opens it
            from agentdata.sandbox import open_sandbox

            open_sandbox(plan.rl.loop.sandbox, max_rps=plan.rl.loop.sandbox_max_rps).close()
        if plan.rl.rl_pool:
            load_pool(plan.rl)
    if plan.closed_loop.rl_problems:
        from agentdata.agent.resume import unique_problems
        from agentdata.problems import load_problems

        unique_problems(load_problems(plan.closed_loop.rl_problems), plan.closed_loop.rl_problems)
    for config in (plan.sft, plan.rl):
        if config is not None and config.validation.enabled:
            load_eval_problems(config.validation)


def plan_inputs(plan: TrainPlan) -> list[str | Path]:
    """What the run reads: its SFT set, pool, problems, validation problems and the weights it starts from."""
    paths: list[str | Path | None] = [plan.closed_loop.rl_problems]
    for config in (plan.sft, plan.rl):
        if config is not None:
            paths += [getattr(config, "sft_data", None), getattr(config, "rl_pool", None)]
            paths += [config.validation.eval_problems, local_model_dir(config.model)]
    # what this run writes itself is no input: the demonstration's set, the SFT model GRPO starts from
    made = {plan.demo_set, Path(plan.sft.out) if plan.sft is not None else None}
    return [path for path in paths if path and Path(path) not in made]


def build_demo_sft_set(path: Path, protocol: str) -> Path:
    from agentdata.sft.demo import build_demo_sft_set as build_set

    note("train", f"stitching {DEMO_SFT_CONVERSATIONS} worked solutions into tool-use conversations ({protocol})")
    return build_set(path, DEMO_SFT_CONVERSATIONS, protocol)


def _run_sft(config: SFTStageConfig, sft_set: Any) -> Any:
    from agentdata.sft.run import run_sft

    note("train", f"SFT {config.model} on {config.sft_data} → {config.out}")
    return run_sft(config, sft_set)


def _run_grpo(config: GRPOStageConfig, rollout_server: Any = None) -> Any:
    from agentdata.rl.run import run_grpo

    note(
        "train",
        f"GRPO {config.model} on {config.rl_pool or 'the default problems'} → {config.out} "
        f"(protocol {config.loop.protocol})",
    )
    return run_grpo(config, rollout_server)


def result_summary(stage: str, result: Any) -> dict[str, Any]:
    """One stage's outcome as plain data (the `train` table's row and its --json)."""
    last = next((entry for entry in reversed(result.history) if "accuracy" in entry or "loss" in entry), {})
    summary = {"stage": stage, "steps": result.steps, "seconds": result.seconds, "model_dir": str(result.model_dir)}
    if stage == "sft":
        summary.update(final_loss=result.final_loss, trained_tokens=result.trained_tokens)
    else:
        summary.update(accuracy=last.get("accuracy", 0), tool_call_frequency=last.get("tools/call_frequency", 0))
        summary.update(rollouts=result.rollouts, weight_pushes=result.weight_pushes)
    return summary
