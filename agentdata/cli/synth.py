"""`agentdata synth ...`: problem generators and the stitched baseline."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from agentdata.cli.common import Seed, console, output_dir, output_file
from agentdata.errors import UserError

app = typer.Typer(help="Generate problems and stitched baseline trajectories.", no_args_is_help=True)


@app.command("problems")
def problems(
    n: Annotated[int, typer.Option("--n", help="How many problems to write.")] = 100,
    seed: Seed = 0,
    out: Annotated[Path, typer.Option("--out", "-o", help="Output file: .jsonl, .json or .parquet.")] = Path(
        "problems.jsonl"
    ),
    kinds: Annotated[
        Optional[list[str]],
        typer.Option("--kinds", help="Problem kinds, repeated or comma-separated: arithmetic, algebra, number_theory, "
                                "combinatorics, probability (the default: all of these) and code (built-in "
                                "stdin and functional tasks with tests, levels 1-2)."),
    ] = None,
    levels: Annotated[
        Optional[list[str]],
        typer.Option("--levels", help="Difficulty levels 1-3, repeated or comma-separated (default: all)."),
    ] = None,
) -> None:
    """Write verifiable problems: math whose answers sympy computes, or code tasks with tests (--kinds code)."""
    from rich.progress import track
    from rich.table import Table

    from agentdata.records import Problem, write_records
    from agentdata.synth.generators import check_choices, generate_problems

    output_file(out, "--out", (".jsonl", ".json", ".parquet"), "the problems")
    kind_list, level_list = check_choices(_split(kinds), [_level(value) for value in _split(levels) or []] or None)
    made = generate_problems(n, seed, kind_list, level_list, progress=lambda problems: track(
        problems, total=n, description="generating", console=console, transient=True))
    write_records(track(made, description="writing", console=console, transient=True), out, Problem)
    table = Table(title=f"{len(made)} problems -> {out}")
    for column in ("kind", *(f"level {level}" for level in level_list), "total"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind in kind_list:
        counts = [sum(1 for p in made if p.metadata["kind"] == kind and p.metadata["level"] == lv) for lv in level_list]
        table.add_row(kind, *map(str, counts), str(sum(counts)))
    console.print(table)


def _split(values: list[str] | None) -> list[str] | None:
    if not values:
        return None
    return [part.strip() for value in values for part in value.split(",") if part.strip()]


def _level(value: str) -> int:
    try:
        return int(value)
    except ValueError:
        raise UserError(f"--levels takes numbers 1-3, got {value!r}") from None


@app.command("stitch")
def stitch(
    solutions: Annotated[Path, typer.Argument(help="Text solutions: question, worked solution, answer (JSONL, JSON, "
                                                   "Parquet, CSV, dataset dir).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="SFT set to write (Parquet, curate's schema).")] = Path(
        "stitched_sft.parquet"
    ),
    trajectories: Annotated[
        Optional[Path], typer.Option("--trajectories", help="Also write the stitched trajectories as a run dir here, "
                                                            "for `agentdata curate` or `inspect`.")
    ] = None,
    question_field: Annotated[
        Optional[str], typer.Option("--question-field", help="Question column (default: recognised names).")
    ] = None,
    solution_field: Annotated[
        Optional[str], typer.Option("--solution-field", help="Worked-solution column (default: solution, "
                                                             "worked_solution, rationale, reasoning, response).")
    ] = None,
    answer_field: Annotated[
        Optional[str], typer.Option("--answer-field", help="Answer column (default: a recognised answer column, "
                                                           "else the solution's \\boxed{} or '#### x').")
    ] = None,
    protocol: Annotated[str, typer.Option(help="Tool-call protocol whose system prompt is used: hermes or codeblock.")] = "hermes",
    max_cells: Annotated[int, typer.Option(help="Code cells per solution at most.")] = 8,
    keep_without_calculations: Annotated[
        bool, typer.Option(help="Keep solutions with no calculation found (no tool call).")
    ] = False,
    tool_output_chars: Annotated[int, typer.Option(help="Tool output kept, head and tail.")] = 256,
    sandbox: Annotated[str, typer.Option(help="'local' or the URL of `agentdata sandbox serve`.")] = "local",
) -> None:
    """Turn text solutions into "stitched" tool-use trajectories: calculations cut into code cells, run for real."""
    from agentdata.synth.stitch import StitchConfig, stitch_file

    output_file(out, "--out", (".parquet",), "the SFT set")
    if trajectories is not None:
        output_dir(trajectories, "--trajectories")
    try:
        config = StitchConfig(protocol=protocol, max_cells=max_cells, tool_output_chars=tool_output_chars,
                              keep_without_calculations=keep_without_calculations, sandbox=sandbox)
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    console.print(f"[bold]synth stitch[/] {solutions} · protocol {protocol} · sandbox {sandbox} → {out}")
    summary = stitch_file(solutions, out, config, question_field=question_field, solution_field=solution_field,
                          answer_field=answer_field, trajectories_dir=trajectories)
    console.print(summary.table())
