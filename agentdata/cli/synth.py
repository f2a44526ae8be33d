"""`agentdata synth ...`: problem generators and the stitched baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentdata.cli.common import output_dir, output_file
from agentdata.cli.console import print_line
from agentdata.cli.options import SettingsCommand, settings_command
from agentdata.cli.render import show
from agentdata.synth.config import ProblemsConfig
from agentdata.synth.stitch.build import StitchConfig

app = typer.Typer(help="Generate problems and stitched baseline trajectories.", no_args_is_help=True)


@app.command("problems", cls=SettingsCommand)
@settings_command()
def problems(
    out: Annotated[Path, typer.Option("--out", "-o", help="Output file: .jsonl, .json or .parquet.")] = Path(
        "problems.jsonl"
    ),
    *,
    config: ProblemsConfig,
    as_json: bool = False,
) -> None:
    """Write verifiable problems: math whose answers sympy computes, or code tasks with tests (--kinds code)."""
    from agentdata.cli.views import problems_written_views
    from agentdata.synth.generators import write_problems

    output_file(out, "--out", (".jsonl", ".json", ".parquet"), "the problems")
    show(write_problems(config, out), as_json, problems_written_views)


@app.command("stitch", cls=SettingsCommand)
@settings_command()
def stitch(
    solutions: Annotated[
        Path,
        typer.Argument(
            help="Text solutions: question, worked solution, answer (JSONL, JSON, Parquet, CSV, dataset dir)."
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="SFT set to write: Parquet in curate's schema (default stitched_sft.parquet; "
            "stitched_sft.jsonl --for openai).",
        ),
    ] = None,
    trajectories: Annotated[
        Path | None,
        typer.Option(
            "--trajectories",
            help="Also write the stitched trajectories as a run dir here, for `agentdata curate` or `inspect`.",
        ),
    ] = None,
    question_field: Annotated[
        str | None, typer.Option("--question-field", help="Question column (default: recognised names).")
    ] = None,
    solution_field: Annotated[
        str | None,
        typer.Option(
            "--solution-field",
            help="Worked-solution column (default: solution, worked_solution, rationale, reasoning, response).",
        ),
    ] = None,
    answer_field: Annotated[
        str | None,
        typer.Option(
            "--answer-field",
            help="Answer column (default: a recognised answer column, else the solution's \\boxed{} or '#### x').",
        ),
    ] = None,
    *,
    config: StitchConfig,
    as_json: bool = False,
) -> None:
    """Turn text solutions into "stitched" tool-use trajectories: calculations cut into code cells, run for real."""
    from agentdata.cli.views import stitch_views
    from agentdata.formats.forms import target_suffix
    from agentdata.synth.stitch import stitch_file

    suffix = target_suffix(config.target)
    out = out or Path(f"stitched_sft{suffix}")
    output_file(out, "--out", (suffix,), f"the SFT set for {config.target}", [solutions])
    if trajectories is not None:
        output_dir(trajectories, "--trajectories", [solutions, out])
    if not as_json:
        settings = f"protocol {config.protocol} · sandbox {config.sandbox}"
        print_line(f"[bold]synth stitch[/] {solutions} · {settings} → {out} (for {config.target})")
    summary = stitch_file(
        solutions,
        out,
        config,
        question_field=question_field,
        solution_field=solution_field,
        answer_field=answer_field,
        trajectories_dir=trajectories,
    )
    show(summary, as_json, stitch_views)
