"""The closed loop inside `agentdata train`: GRPO's pool chosen by the model GRPO starts from.

With `--rl-problems FILE` (raw problems), between SFT and GRPO the model GRPO will train (the
SFT output as `hf:DIR`; with `--stage rl`, the start model) solves each problem k times
through the agent loop with GRPO's own rollout settings (temperature 1.0, max_new_tokens,
max_tool_calls, protocol, tools, ...), the pass-rate band is kept, and GRPO trains on that
pool. It is `filter`'s machinery (agentdata.filter): the profile is a collect run dir under
`<train out>/profile/`, cached on the model's files and the settings, so a rerun with the same
model and settings generates nothing; the pool, its report and histogram are
`<train out>/pool.parquet`, `pool.report.json`, `pool.pass_rate.png`.

When the band keeps no problem (a model that solves every one, or none), GRPO trains on all
the problems instead, with a warning: groups whose rollouts all agree give no gradient, but the
run goes on, as the quickstart's does.

A pool given with `--rl-pool` is checked instead: a warning when it was profiled with other
loop settings, or another model, than GRPO is about to use.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.events import note
from agentdata.filter.config import DEFAULT_K
from agentdata.rl.config import GRPOStageConfig
from agentdata.settings import Band, check_fields

DEFAULT_BAND = Band(0.05, 0.8)  # ZeroTIR's online difficulty filter: 0.05 < pass rate < 0.8
POOL_NAME = "pool.parquet"


@dataclass
class ClosedLoopConfig:
    """Where GRPO's pool comes from when it is profiled here: `rl:` keys of train's file, beside GRPO's own."""

    rl_problems: str = field(
        default="",
        metadata={
            "help": "Raw problems (any problems file) for GRPO: between SFT and GRPO the model GRPO starts from "
            "profiles them with GRPO's own loop settings, the --band is kept, and GRPO trains on that pool "
            "(written as <out>/pool.parquet)."
        },
    )
    band: Band = field(
        default=DEFAULT_BAND,
        metadata={
            "help": "Pass-rate band of the --rl-problems profile, LO,HI, ends exclusive (ZeroTIR's 0.05,0.8).",
            "range": "[0, 1]",
        },
    )
    profile_k: int = field(
        default=DEFAULT_K,
        metadata={
            "override_only": True,
            "help": "Rollouts per problem in the --rl-problems profile.",
            "range": "[1, 100000]",
        },
    )

    def __post_init__(self) -> None:
        check_fields(self)


def pool_for_grpo(rl_config: GRPOStageConfig, profile_settings: ClosedLoopConfig, out: Path) -> GRPOStageConfig:
    """`rl_config` with the pool GRPO trains on: profiled here from `rl_problems`, or the given one (checked)."""
    if profile_settings.rl_problems:
        return dataclasses.replace(rl_config, rl_pool=str(profiled_pool(rl_config, profile_settings, out)))
    if rl_config.rl_pool:
        for warning in pool_warnings(rl_config):
            note("train", f"warning: {warning}")
    return rl_config


def profiled_pool(rl_config: GRPOStageConfig, settings: ClosedLoopConfig, out: Path) -> Path:
    """Profile GRPO's start model on the raw problems with GRPO's loop, keep the band; the file GRPO reads."""
    from agentdata.agent.config import CollectConfig, all_in_flight
    from agentdata.agent.resume import unique_problems
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from agentdata.problems import load_problems

    problems_file = Path(settings.rl_problems)
    problems = unique_problems(load_problems(problems_file), problems_file)
    student = profile_spec(rl_config.model)
    profiling = CollectConfig(
        model=student,
        samples=settings.profile_k,
        loop=rl_config.loop,
        seed=rl_config.seed,
        concurrency=all_in_flight(len(problems) * settings.profile_k),
    )
    pool_file = out / POOL_NAME
    note(
        "train",
        f"profiling {student} on {len(problems)} problems of {problems_file} (k={settings.profile_k}, "
        f"GRPO's loop: {rl_config.loop.protocol}, temperature {rl_config.loop.temperature}, "
        f"{rl_config.loop.max_new_tokens} tokens, {rl_config.loop.max_tool_calls} tool calls) to "
        f"keep the band {settings.band}",
    )
    run = run_filter(problems, pool_file, PoolConfig(band=settings.band), profiling)
    note(
        "train",
        f"profile: {run.profile_dir} ({run.generated} rollouts generated now"
        f"{', cache hit' if not run.generated else ''}); report {run.report}, plot {run.plot}",
    )
    if run.output is None:
        pool_file.unlink(missing_ok=True)  # a pool of an earlier run must not pass for this one
        note(
            "train",
            f"warning: the band {settings.band} keeps none of the {run.result.profiled.height} problems "
            f"profiled ({_rates_summary(run.result.profiled)}): GRPO trains on all {len(problems)} problems "
            "of --rl-problems (groups that all agree give no gradient); widen --band or raise profile_k=",
        )
        return problems_file
    note("train", f"RL pool: {run.result.pool.height} of {len(problems)} problems in the band → {run.output}")
    return run.output


def profile_spec(model: str) -> str:
    """The engine spec whose rollouts are GRPO's from start model `model`: the same weights, the same prompt.

    `smollm2-tir` stays itself: GRPO's rollouts from it are shown its worked examples
    (engines.demonstrated.demonstrated_policy), so its profile must be too; the plain `hf:DIR` of
    its weights would measure the band without them. Any other start is the `hf:DIR` of exactly the
    weights GRPO loads, so the profile cache keys on their files.
    """
    from agentdata.engines.demonstrated import rollouts_show_examples
    from agentdata.engines.spec import ModelSpec
    from agentdata.training.model import resolve_model_dir

    spec = ModelSpec.parse(model)
    if rollouts_show_examples(spec.text) or (spec.kind == "hf" and spec.target):
        return spec.text
    return f"hf:{resolve_model_dir(spec)}"


def pool_warnings(rl_config: GRPOStageConfig) -> list[str]:
    """One line per way the pool's recorded profile differs from what GRPO is about to run."""
    from agentdata.filter.loop_match import differences_text, loop_differences, loop_settings, recorded_profile

    recorded = recorded_profile(rl_config.rl_pool)
    if not recorded:
        return []
    warnings = []
    running = rl_config.for_run().loop  # the rollouts' loop as GRPO will run it (the start model's protocol)
    differences = loop_differences(recorded.get("loop") or {}, loop_settings(running))
    if differences:
        warnings.append(
            f"{rl_config.rl_pool} was profiled with {differences_text(differences)}: its band was "
            "measured under other settings than these GRPO rollouts"
        )
    student, start = recorded.get("student"), profile_spec(rl_config.model)
    if student not in (start, rl_config.model) and not _same_weights(recorded.get("model_fingerprint"), start):
        warnings.append(
            f"{rl_config.rl_pool} was profiled with {student}, GRPO starts from {rl_config.model}: "
            "use --rl-problems to profile the model GRPO trains"
        )
    return warnings


def _same_weights(recorded: str | None, spec: str) -> bool:
    """Another spec for the weights the pool was profiled with (a copied or moved model dir)."""
    from agentdata.engines.fingerprint import model_fingerprint

    return recorded is not None and recorded == model_fingerprint(spec)


def _rates_summary(profiled: Any) -> str:
    rates = profiled["pass_rate"].drop_nulls()
    return f"{int((rates == 0).sum())} never solved, {int((rates == 1).sum())} always solved"
