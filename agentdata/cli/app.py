"""The `agentdata` command: assembles one module per command and maps known errors to one line."""

from __future__ import annotations

import signal
import sys

import typer

from agentdata.cli import collect, curate, eval as eval_cmd, filter as filter_cmd, inspect, sandbox, synth, train
from agentdata.cli.common import err_console
from agentdata.errors import UserError

app = typer.Typer(
    name="agentdata",
    help="Build real tool-use trajectories, curate SFT sets and model-aware RL pools, and train on them.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
app.command("collect")(collect.command)
app.command("curate")(curate.command)
app.command("filter")(filter_cmd.command)
app.command("train")(train.command)
app.command("eval")(eval_cmd.command)
app.command("inspect")(inspect.command)
app.add_typer(synth.app, name="synth")
app.add_typer(sandbox.app, name="sandbox")


def main(argv: list[str] | None = None) -> None:
    """Run the CLI; a user's mistake ends with one line on stderr and exit code 2, not a traceback."""
    # `kill` (SIGTERM) unwinds like Ctrl-C, so finished work is flushed to disk before exiting.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        app(args=argv, prog_name="agentdata")
    except UserError as error:
        err_console.print(f"[bold red]error:[/] {error}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)


if __name__ == "__main__":
    main()
