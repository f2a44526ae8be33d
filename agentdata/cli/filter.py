"""`agentdata filter [PROBLEMS] --out POOL.parquet`: an RL pool chosen by the student's pass rate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentdata.agent.config import ROLLOUT_TEMPERATURE, CollectConfig
from agentdata.cli.common import AnswerField, ModelName, QuestionField, invocation, output_dir, output_set, with_model
from agentdata.cli.console import console, print_json
from agentdata.cli.options import settings_command
from agentdata.filter.config import PoolConfig

# The profile is a collect run of the student: its teacher is --student and its samples are --k.
PROFILE_FLAGS = {"teacher": "--student", "samples": "--k"}


# Profiled as GRPO samples (temperature 1.0, agentdata.rl.config): the pass rates are the ones training will see.
# Two sections: `--seed` sets both seeds (the rollouts' and the clustering's), `--profile-seed` / `--pool-seed` one.
@settings_command(
    flags=PROFILE_FLAGS,
    defaults={"samples": 4, "temperature": ROLLOUT_TEMPERATURE},
    section_names={"profiling": "profile"},
)
def command(
    problems_file: Annotated[
        Path | None,
        typer.Argument(help="Problems (JSONL, JSON, Parquet, CSV, dataset dir). Default: the built-in compute ladder."),
    ] = None,
    out: Annotated[
        Path,
        typer.Option(
            "--out",
            "-o",
            help="RL pool to write: a Parquet file (its card NAME.README.md beside it) or a dataset folder (no "
            "suffix: DIR/README.md + DIR/data/train.parquet).",
        ),
    ] = Path("pool.parquet"),
    model: ModelName = None,
    profile_dir: Annotated[
        Path | None,
        typer.Option(help="Profile run dir (the cache); default <out folder>/profile/<student>-<settings digest>."),
    ] = None,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    profiling: CollectConfig,
    pool: PoolConfig,
    as_json: bool = False,
) -> None:
    """Profile the student's pass rate on each problem (cached), keep a band, dedup, decontaminate, diversify."""
    from agentdata.agent.resume import unique_problems
    from agentdata.cli.views import drop_table, rows_table
    from agentdata.errors import UserError
    from agentdata.filter.run import run_filter
    from agentdata.problems import load_problems
    from agentdata.synth.builtin import default_problems

    inputs = [problems_file, *pool.dedup.decontam_files]
    if profile_dir is not None:
        output_dir(profile_dir, "--profile-dir", inputs)
    output_set(out, "--out", (".parquet",), "the RL pool", inputs)
    problems = load_problems(problems_file, question_field, answer_field) if problems_file else default_problems()
    problems = unique_problems(problems, problems_file)  # counted once each; one id with two contents is refused
    profiling = dataclasses.replace(profiling, engine_options=with_model(profiling.engine_options, model))
    shown = len(problems[: profiling.limit])
    if not as_json:
        console.print(
            f"[bold]filter[/] {shown} problems · student {profiling.teacher} · k={profiling.samples} · "
            f"band {pool.band} → {out}"
        )
    if profiling.sharding.shard is not None:
        _profile_one_shard(problems, out, pool, profiling, profile_dir, as_json)
        return
    run = run_filter(problems, out, pool, profiling, profile_dir=profile_dir, command=invocation())
    result = run.result
    if not as_json:
        for warning in run.warnings:
            console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    if as_json:
        print_json(
            {
                "output": str(run.output) if run.output else None,
                "card": str(run.card) if run.card else None,
                "pushed": run.pushed,
                "empty": run.empty,
                "profile_dir": str(run.profile_dir),
                "generated": run.generated,
                "problems": shown,
                "selected": result.pool.height,
                "dropped": {f"dropped_{reason}": count for reason, count in result.counts.items()},
                "per_source": run.per_source,
                "per_domain": run.per_domain,
                "warnings": run.warnings,
                "reprofiled": run.reprofiled,
                "still_straddling": run.still_straddling,
                "report": str(run.report),
                "plot": str(run.plot),
            }
        )
    else:
        console.print(
            f"profile: {run.profile_dir} ({run.generated:,} rollouts generated now, "
            f"{'cache hit' if not run.generated else 'cache filled'})"
        )
        if pool.k_adaptive:
            console.print(
                f"k-adaptive: {run.reprofiled} problem(s) straddled a band edge at k={profiling.samples} and "
                f"were profiled up to k={pool.k_adaptive}; {run.still_straddling} still do"
            )
        console.print(drop_table(shown, result.counts, result.pool.height, title="filter: problems per drop reason"))
        console.print(rows_table(run.per_source, title="per source"))
        if len(run.per_domain) > 1:
            console.print(rows_table(run.per_domain, title="per domain"))
    if run.empty:
        raise UserError(f"{run.empty} (report: {run.report})")
    if not as_json:
        console.print(
            f"RL pool: [cyan]{run.output}[/] ({pool.format}) · card: {run.card} · report: {run.report} · "
            f"plot: {run.plot}" + (f" · pushed to {run.pushed['url']}" if run.pushed else "")
        )


def _profile_one_shard(problems, out, pool, profiling, profile_dir, as_json: bool) -> None:
    """`filter --shard I/N`: the student profiled on one shard's problems; the pool needs every shard."""
    from agentdata.filter.run import profile_student

    profiled = profile_student(problems, out, pool, profiling, profile_dir=profile_dir)
    count = profiling.sharding.shard.count
    summary = {
        "shard": profiled.shard,
        "profile_dir": str(profiled.profile_dir),
        "problems": profiled.rates.height,
        "generated": profiled.generated,
        "reprofiled": len(profiled.reprofiled),
    }
    if as_json:
        print_json(summary)
        return
    console.print(
        f"profile of shard {profiled.shard}: {profiled.rates.height} problems in {profiled.profile_dir} "
        f"({profiled.generated:,} rollouts generated now). When all {count} shards are profiled, the same "
        "filter without --shard builds the pool from them"
    )
