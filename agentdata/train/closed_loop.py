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

Where GRPO starts a vLLM server of its own for its rollouts, the profile runs on that server: `train` starts it
before the profile (`shared_rollout_server`) and hands it to GRPO, so one server starts, and the profile's requests
are GRPO's first rollouts' (the SFT weights, the prompt rendered by the same tokenizer, sent as token ids). The
profile then records `vllm:DIR` as its student, so its cache and the pool name the engine. Otherwise (rollouts from
the policy, TRL's own vLLM, or a `vllm_server` given, whose weights are what it was started on) the profile runs
on transformers, as `hf:DIR`.

A pool given with `--rl-pool` is checked instead: a warning when it was profiled with other
loop settings, or another model, than GRPO is about to use.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def shared_rollout_server(rl_config: GRPOStageConfig, settings: ClosedLoopConfig) -> Iterator[Any]:
    """The vLLM server GRPO would start for its rollouts, started before the profile of `rl_problems` so that both
    run on it, and stopped after GRPO; None when nothing is profiled or GRPO starts no server."""
    from agentdata.rl.stage_inputs import stage_starts_server, start_rollout_server

    if not settings.rl_problems or not stage_starts_server(rl_config):
        yield None
        return
    server = start_rollout_server(rl_config)
    try:
        yield server
    finally:
        server.stop()


def pool_for_grpo(
    rl_config: GRPOStageConfig, profile_settings: ClosedLoopConfig, out: Path, server: Any = None
) -> GRPOStageConfig:
    """`rl_config` with the pool GRPO trains on: profiled here from `rl_problems` (on GRPO's vLLM `server` when
    there is one), or the given one (checked)."""
    if profile_settings.rl_problems:
        return dataclasses.replace(rl_config, rl_pool=str(profiled_pool(rl_config, profile_settings, out, server)))
    if rl_config.rl_pool:
        for warning in pool_warnings(rl_config):
            note("train", f"warning: {warning}")
    return rl_config


def profiled_pool(rl_config: GRPOStageConfig, settings: ClosedLoopConfig, out: Path, server: Any = None) -> Path:
    """Profile GRPO's start model on the raw problems with GRPO's loop (on GRPO's vLLM `server`, else on
    transformers), keep the band; the file GRPO reads."""
    from agentdata.agent.config import CollectConfig, all_in_flight
    from agentdata.agent.resume import unique_problems
    from agentdata.filter.build import PoolConfig
    from agentdata.filter.run import run_filter
    from agentdata.problems import load_problems

    problems_file = Path(settings.rl_problems)
    problems = unique_problems(load_problems(problems_file), problems_file)
    student = profile_spec(rl_config.model, on_vllm=server is not None)
    engine = None  # built from the spec by the profile
    if server is not None:
        from agentdata.rl.stage_inputs import served_start_policy

        engine = served_start_policy(rl_config, server.base_url, student)
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
        f"keep the band {settings.band}" + (f", on GRPO's vLLM server ({server.base_url})" if server else ""),
    )
    run = run_filter(problems, pool_file, PoolConfig(band=settings.band), profiling, engine=engine)
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


def profile_spec(model: str, on_vllm: bool = False) -> str:
    """The engine spec whose rollouts are GRPO's from start model `model`: the same weights, the same prompt.

    `smollm2-tir` stays itself: GRPO's rollouts from it are shown its worked examples
    (engines.demonstrated.demonstrated_policy), so its profile must be too; the plain `hf:DIR` of
    its weights would measure the band without them. Any other start is the `hf:DIR` of exactly the
    weights GRPO loads, so the profile cache keys on their files. Profiled on GRPO's vLLM server
    (`on_vllm`), the same weights are `vllm:DIR`, and `smollm2-tir` is `tir:vllm:smollm2`.
    """
    from agentdata.engines.demonstrated import rollouts_show_examples
    from agentdata.engines.spec import TIR_KIND, ModelSpec
    from agentdata.training.model import resolve_model_dir

    spec = ModelSpec.parse(model)
    kind = "vllm" if on_vllm else "hf"
    if rollouts_show_examples(spec.text):
        return f"{TIR_KIND}:{kind}:smollm2" if on_vllm else spec.text
    return f"{kind}:{spec.target if spec.kind == 'hf' and spec.target else resolve_model_dir(spec)}"


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
    profiled_as = (start, profile_spec(rl_config.model, on_vllm=True), rl_config.model)  # by train: on either engine
    if student not in profiled_as and not _same_weights(recorded.get("model_fingerprint"), start):
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
