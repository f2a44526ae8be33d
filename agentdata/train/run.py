"""`agentdata train` as a library call: settings from a file and flags, the demonstration, the stages in order.

    from agentdata.train.run import TrainRequest, train
    results = train(TrainRequest(stage="all", sft_data=Path("sft.parquet"), rl_pool=Path("pool.parquet")))

SFT runs on an SFT set, then GRPO starts from the SFT model; with `rl_problems` (raw problems)
the SFT model is profiled on them between the stages and GRPO trains on its band (train/closed_loop.py).
With no data at all (stage `all`,
no SFT set, no pool, no config file) it runs the demonstration: a short SFT on stitched worked
solutions, then a few GRPO steps on the default problems (synth.builtin.default_problems). Notes and progress are
`agentdata.events`; nothing is drawn here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentdata.engines.defaults import DEFAULT_PROTOCOL
from agentdata.errors import UserError
from agentdata.events import Event, emit
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import build, read_settings_file
from agentdata.sft.config import SFTStageConfig
from agentdata.train.closed_loop import RLProblemsConfig, pool_for_grpo, split_profile_settings

DEFAULT_SFT_SET = Path("sft.parquet")  # what `agentdata curate` writes by default
DEFAULT_RL_POOL = Path("pool.parquet")  # what `agentdata filter` writes by default
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
    """What the user asked for.

    `flags` are settings for both stages, `sft_flags` for SFT only, `rl_flags` for GRPO only.
    """

    stage: str = "all"
    sft_data: Path | None = None
    rl_pool: Path | None = None
    out: Path = Path("runs/train")
    config_file: Path | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    rl_flags: dict[str, Any] = field(default_factory=dict)
    sft_flags: dict[str, Any] = field(default_factory=dict)
    rl_extra: dict[str, list[str]] = field(default_factory=dict)  # rewards/tools added to the file's or default list
    rl_problems: Path | None = None  # raw problems: profiled with GRPO's start model, band kept (train/closed_loop.py)


def read_config_file(path: Path | None) -> dict[str, dict[str, Any]]:
    """A YAML or JSON file with optional `sft:` and `rl:` sections of settings: the stage's own
    fields, and any field of TRL's SFTConfig / GRPOConfig, which go under the stage's `trl` field."""
    if path is None:
        return {"sft": {}, "rl": {}, "rl_profile": {}}
    data = read_settings_file(path)
    if set(data) - {"sft", "rl"}:
        raise UserError(f"{path}: expected top-level sections `sft:` and/or `rl:` only")
    sections = {"sft": data.get("sft") or {}, "rl": data.get("rl") or {}}
    for name, section in sections.items():
        if not isinstance(section, dict):
            raise UserError(f"{path}: the `{name}:` section must be a mapping of settings")
    profile, sections["rl"] = split_profile_settings(sections["rl"])  # the closed loop's keys (train/closed_loop.py)
    return {
        **{name: section_settings(name, section, f"{path} {name}") for name, section in sections.items()},
        "rl_profile": profile,
    }


def section_settings(stage: str, section: dict[str, Any], where: str) -> dict[str, Any]:
    """One section as the stage config's values: TRL-only fields gathered under `trl`; a key that is
    neither the stage's nor TRL's is a UserError naming the closest keys."""
    if not section:
        return {}
    import trl  # only when there is a section to sort: TRL takes seconds to import

    from agentdata.training.trl_settings import split_section

    stage_type, trl_type = (SFTStageConfig, trl.SFTConfig) if stage == "sft" else (GRPOStageConfig, trl.GRPOConfig)
    from agentdata.train.closed_loop import PROFILE_KEYS

    also_valid = frozenset(PROFILE_KEYS) if stage == "rl" else frozenset()
    own, trl_only = split_section(section, stage_type, trl_type, where, also_valid)
    if trl_only:
        given = own.get("trl") or {}  # a `trl:` mapping written in the section
        if not isinstance(given, dict):
            raise UserError(f"{where}: `trl:` must be a mapping of TRL field names to values")
        own["trl"] = {**trl_only, **given}
    return own


def make_config(config_type: type, values: dict[str, Any], source: str) -> Any:
    """A stage config from flat settings (the loop's fields included); one-line UserError otherwise."""
    try:
        return build(config_type, values, source=source)
    except UserError as error:
        message = str(error)
        raise UserError(message if message.startswith(source) else f"{source}: {message}") from None


def is_demo(request: TrainRequest) -> bool:
    return (
        request.stage == "all"
        and request.sft_data is None
        and request.rl_pool is None
        and request.config_file is None
        and request.rl_problems is None
        and not DEFAULT_RL_POOL.exists()
    )


def train(request: TrainRequest) -> list[tuple[str, Any]]:
    """Run the stages asked for; returns [(stage, SFTResult | GRPOResult)] in order."""
    if request.stage not in STAGES:
        raise UserError(f"--stage {request.stage}: expected one of {', '.join(STAGES)}")
    sections = read_config_file(request.config_file)
    demo = is_demo(request)
    source = str(request.config_file or "flags")
    sft_out, rl_out = (
        (request.out / "sft", request.out / "rl") if request.stage == "all" else (request.out, request.out)
    )
    results: list[tuple[str, Any]] = []
    if demo:
        _note(
            "demonstration: SFT of SmolLM2 on stitched worked solutions, then GRPO on the default problems "
            "(about ten minutes on two CPU cores; docs/train.md)"
        )
    if request.stage in ("sft", "all"):
        sft_config = sft_stage_config(request, sections["sft"], demo, sft_out, source)
        if sft_config is not None:
            results.append(("sft", _run_sft(sft_config)))
    if request.stage in ("rl", "all"):
        start_from = results[-1][1].model_dir if results else None
        results.append(("rl", _run_grpo(grpo_config(request, sections, demo, rl_out, source, start_from))))
    elif request.rl_problems is not None:
        _note("--rl-problems is for the GRPO stage: not used with --stage sft")
    return results


def grpo_config(
    request: TrainRequest,
    sections: dict[str, dict[str, Any]],
    demo: bool,
    out: Path,
    source: str,
    start_from: Path | None,
) -> GRPOStageConfig:
    """GRPO's settings with its pool: the given one, or one profiled here from --rl-problems (train/closed_loop.py)."""
    profile_section, section = sections.get("rl_profile", {}), sections["rl"]
    profile_flags, rl_flags = split_profile_settings(request.rl_flags)
    rl_config = rl_stage_config(replace(request, rl_flags=rl_flags), section, demo, out, source, start_from)
    given = {"rl_problems": str(request.rl_problems)} if request.rl_problems is not None else {}
    profiling = make_config(RLProblemsConfig, {**profile_section, **profile_flags, **given}, source)
    return pool_for_grpo(
        rl_config, profiling, request.out, explicit_pool=bool(request.rl_pool or section.get("rl_pool"))
    )


def sft_stage_config(
    request: TrainRequest, section: dict[str, Any], demo: bool, out: Path, source: str
) -> SFTStageConfig | None:
    """The SFT settings, or None when there is no SFT set and SFT may be skipped."""
    data = request.sft_data or (Path(section["sft_data"]) if "sft_data" in section else DEFAULT_SFT_SET)
    values = {**section, **request.flags, **request.sft_flags}
    if demo and not data.exists():
        data = build_demo_sft_set(request.out / "demo_sft.parquet", values.get("protocol", DEFAULT_PROTOCOL))
        values = {**DEMO_SFT, **values}
    if data.exists():
        return make_config(SFTStageConfig, {**values, "sft_data": str(data), "out": str(out)}, source)
    if request.stage == "sft" or request.sft_data is not None:
        raise UserError(f"{data}: no SFT set; write one with `agentdata curate` or pass --sft-data")
    _note(f"no SFT set at {data}: skipping SFT (write one with `agentdata curate`)")
    return None


def rl_stage_config(
    request: TrainRequest, section: dict[str, Any], demo: bool, out: Path, source: str, start_from: Path | None = None
) -> GRPOStageConfig:
    values = {**section, **request.flags, **request.rl_flags, "out": str(out)}
    for key, extra in request.rl_extra.items():
        base = list(section.get(key) or _default_list(key))
        values[key] = base + [name for name in extra if name not in base]
    if start_from is not None:  # GRPO starts from the SFT model
        values["model"] = f"hf:{start_from}"
    pool = request.rl_pool or (DEFAULT_RL_POOL if DEFAULT_RL_POOL.exists() else None)
    if pool is not None:
        values["rl_pool"] = str(pool)
    if demo:
        values = {**DEMO_RL, **values}
    return make_config(GRPOStageConfig, values, source)


def _default_list(key: str) -> list[str]:
    if key == "tools":
        from agentdata.tools import DEFAULT_TOOLS

        return list(DEFAULT_TOOLS)
    from agentdata.verify.rewards import DEFAULT_REWARDS

    return list(DEFAULT_REWARDS)


def build_demo_sft_set(path: Path, protocol: str) -> Path:
    from agentdata.sft.demo import build_demo_sft_set as build_set

    _note(f"stitching {DEMO_SFT_CONVERSATIONS} worked solutions into tool-use conversations ({protocol})")
    return build_set(path, DEMO_SFT_CONVERSATIONS, protocol)


def _run_sft(config: SFTStageConfig) -> Any:
    from agentdata.sft.run import run_sft

    _note(f"SFT {config.model} on {config.sft_data} → {config.out}")
    return run_sft(config)


def _run_grpo(config: GRPOStageConfig) -> Any:
    from agentdata.rl.run import run_grpo

    _note(f"GRPO {config.model} on {config.rl_pool or 'the default problems'} → {config.out}")
    return run_grpo(config)


def _note(message: str) -> None:
    emit(Event("log", "train", message=message))


def result_summary(stage: str, result: Any) -> dict[str, Any]:
    """One stage's outcome as plain data (the `train` table's row and its --json)."""
    last = next((entry for entry in reversed(result.history) if "accuracy" in entry or "loss" in entry), {})
    summary = {"stage": stage, "steps": result.steps, "seconds": result.seconds, "model_dir": str(result.model_dir)}
    if stage == "sft":
        summary.update(final_loss=result.final_loss, trained_tokens=result.trained_tokens)
    else:
        summary.update(accuracy=last.get("accuracy", 0), tool_call_frequency=last.get("tools/call_frequency", 0))
    return summary
