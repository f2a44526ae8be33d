"""`agentdata import atif|inspect|sts PATH... --out RUN`: other tools' trace files as an ordinary run dir."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from agentdata.cli.common import AnswerField, QuestionField, output_dir
from agentdata.cli.console import print_line
from agentdata.cli.options import SettingsCommand, settings_command
from agentdata.cli.render import show
from agentdata.inputs import check_input
from agentdata.traces.config import ImportConfig

app = typer.Typer(
    help="Read other tools' traces (Harbor's ATIF, Inspect AI logs, the Hub's STS sessions) into a run dir.",
    no_args_is_help=True,
)

WHAT = {
    "atif": "ATIF trajectories (Harbor's Agent Trajectory Interchange Format, .json; folders are searched)",
    "inspect": "Inspect AI eval logs (.eval or .json; folders are searched)",
    "sts": "STS session files (the Hub's Session Trace Simple Format, .jsonl; e.g. what `view --sts` wrote)",
}
TracePaths = Annotated[list[Path], typer.Argument(help="Trace files, or folders searched for them.")]
LISTED_LEFT_OUT = 20  # the terminal lists this many sessions or files left out (--json has them all)


def _command(kind: str) -> Callable[..., None]:
    @settings_command()
    def command(
        paths: TracePaths,
        out: Annotated[
            Path | None,
            typer.Option("--out", "-o", help="The run dir to write (or add to). Default runs/import-FORMAT."),
        ] = None,
        problems_file: Annotated[
            Path | None,
            typer.Option(
                "--problems",
                help="Problems to grade against, any layout, matched by id, else by question. Default: the "
                "answer the file itself records (an Inspect sample's target, agentdata's own exports); "
                "a trace with none is kept ungraded.",
            ),
        ] = None,
        question_field: QuestionField = None,
        answer_field: AnswerField = None,
        *,
        config: ImportConfig,
        as_json: bool = False,
    ) -> None:
        from agentdata.problems import load_problems
        from agentdata.traces import import_traces

        for path in paths:  # before the command says what it is about to do
            check_input(path)
        out = out or Path("runs") / f"import-{kind}"
        output_dir(out, "--out", [*paths, problems_file])
        problems = load_problems(problems_file, question_field, answer_field) if problems_file else None
        if not as_json:
            print_line(f"[bold]import {kind}[/] {' '.join(escape(str(path)) for path in paths)} → {escape(str(out))}")
        show(import_traces(kind, paths, out, problems, config), as_json, import_views)

    command.__doc__ = f"Import {WHAT[kind].split(' (')[0]} into a run dir that curate, filter and view read."
    return command


for _kind in WHAT:
    app.command(_kind, cls=SettingsCommand)(_command(_kind))


def import_views(result: Any) -> Iterator[Any]:
    table = Table(title=f"import {result.format} → {escape(str(result.run_dir))}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("files read · sessions in them", f"{result.files:,} · {result.sessions:,}")
    table.add_row("imported now (already in the run dir)", f"{result.imported:,} ({result.already:,})")
    if result.duplicates:
        table.add_row("repeated ids (read once)", f"{result.duplicates:,}")
    table.add_row("graded (problem from --problems)", f"{result.graded:,} ({result.matched:,})")
    table.add_row("correct of those graded", f"{result.correct:,}")
    table.add_row("trajectories in the run dir", f"{result.summary.get('total', 0):,}")
    yield table
    for line in result.left_out[:LISTED_LEFT_OUT]:
        yield f"[yellow]left out:[/] {escape(line)}"
    if len(result.left_out) > LISTED_LEFT_OUT:
        yield f"[yellow]left out:[/] {len(result.left_out) - LISTED_LEFT_OUT} more (all of them with --json)"
    yield f"curate, filter, view, regrade and inspect read {escape(str(result.run_dir))} like any run"
