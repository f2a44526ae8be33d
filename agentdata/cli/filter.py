"""`agentdata filter [PROBLEMS] --out POOL.parquet`: an RL pool chosen by the student's pass rate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentdata.agent.config import CollectConfig
from agentdata.cli.common import (
    AnswerField,
    ProblemsFile,
    QuestionField,
    invocation,
    output_dir,
    output_set,
    read_problems,
    tracked,
)
from agentdata.cli.console import print_line
from agentdata.cli.options import settings_command
from agentdata.cli.render import show
from agentdata.filter.config import PoolConfig, ProfileConfig
from agentdata.settings import Section, Sections
from agentdata.training.config import TrackingConfig

# The profile is a collect run of the student: its model is --student and its samples are --k.
PROFILE_FLAGS = {"model": "--student", "samples": "--k"}
# Flags of collect and curate that are keys and overrides here (`temperature=0.7`, `push_to_hub=me/pool`): the
# profile samples as GRPO's rollouts do, and publishing a pool is rarer than curating a set.
FILTER_OVERRIDES = (
    "harness",
    "temperature",
    "sandbox_max_rps",
    "executor",
    "near_dup_threshold",
    "license",
    "secrets",
    "push_to_hub",
    "public",
    "report_to",
)


# Profiled as GRPO samples (ProfileConfig: temperature 1.0, k=4, as run_filter from Python): the pass rates
# training will see.
# Two sections: `--seed` sets both seeds (the rollouts' and the clustering's), `profile.seed=N` / `pool.seed=N` one.
@settings_command(
    flags=PROFILE_FLAGS,
    overrides=FILTER_OVERRIDES,
    sections=Sections(Section("profile", {"profiling": ProfileConfig}), tracked("pool", {"pool": PoolConfig})),
)
def command(
    problems_file: ProblemsFile = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="RL pool to write: a Parquet file (its card NAME.README.md beside it) or a dataset folder (no "
            "suffix: DIR/README.md + DIR/data/train.parquet).",
        ),
    ] = Path("pool.parquet"),
    profile_dir: Annotated[
        Path | None,
        typer.Option(help="Profile run dir (the cache); default <out folder>/profile/<student>-<settings digest>."),
    ] = None,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    profiling: CollectConfig,
    pool: PoolConfig,
    tracking: TrackingConfig,
    as_json: bool = False,
) -> None:
    """Profile the student's pass rate on each problem (cached), keep a band, dedup, decontaminate, diversify."""
    from agentdata.cli.views import filter_views, shard_profile_views
    from agentdata.filter.run import profile_student, run_filter
    from agentdata.training.trackers import check_trackers, report_to_trackers

    check_trackers(tracking, "filter", flag="report_to=")
    inputs = [problems_file, *pool.dedup.decontam_files]
    if profile_dir is not None:
        output_dir(profile_dir, "--profile-dir", inputs)
    output_set(out, "--out", (".parquet",), "the RL pool", inputs)
    problems = read_problems(problems_file, question_field, answer_field)
    if not as_json:
        print_line(
            f"[bold]filter[/] {len(problems[: profiling.limit])} problems · student {profiling.model} · "
            f"k={profiling.samples} · band {pool.band} → {out}"
        )
    if profiling.sharding.shard is not None:  # the pool needs every shard: this one's profile is all it makes
        profiled = profile_student(problems, out, pool, profiling, profile_dir=profile_dir)
        report_to_trackers(tracking, "filter", out, profiled.as_dict(), [profiled.profile_dir])
        show(profiled, as_json, lambda profiled: shard_profile_views(profiled, profiling.sharding.shard.count))
        return
    run = run_filter(problems, out, pool, profiling, profile_dir=profile_dir, command=invocation())
    report_to_trackers(tracking, "filter", out, run.as_dict(), [run.profile_dir])
    show(run, as_json, lambda run: filter_views(run, profiling.samples, pool.k_adaptive, pool.format))
