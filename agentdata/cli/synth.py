"""`agentdata synth ...`: problem generators and the stitched baseline (not built yet)."""

import typer

from agentdata.cli.common import not_built

app = typer.Typer(help="Generate problems and stitched baseline trajectories.", no_args_is_help=True)


@app.command("problems")
def problems() -> None:
    """Not built yet."""
    not_built("synth problems")


@app.command("stitch")
def stitch() -> None:
    """Not built yet."""
    not_built("synth stitch")
