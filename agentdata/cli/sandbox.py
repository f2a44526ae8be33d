"""`agentdata sandbox ...` (not built yet)."""

import typer

from agentdata.cli.common import not_built

app = typer.Typer(help="Run the code sandbox as a service.", no_args_is_help=True)


@app.command("serve")
def serve() -> None:
    """Not built yet."""
    not_built("sandbox serve")


@app.command("run")
def run() -> None:
    """Not built yet."""
    not_built("sandbox run")
