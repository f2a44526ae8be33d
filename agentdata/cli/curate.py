"""`agentdata curate RUN_DIR... --out SFT.parquet`: an SFT set of verified, diverse trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentdata.cli.common import invocation, output_file, output_set
from agentdata.cli.console import console, print_line
from agentdata.cli.options import settings_command
from agentdata.cli.render import show
from agentdata.curate.config import CurateConfig
from agentdata.errors import UserError


@settings_command()
def command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Collect run dirs (or trajectory Parquet files).")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-o",
            help="SFT set to write: a file (default sft.parquet; sft.jsonl --for openai), its card NAME.README.md "
            "beside it, or a dataset folder (no suffix: DIR/README.md + DIR/data/train.parquet).",
        ),
    ] = None,
    rejects: Annotated[Path | None, typer.Option(help="Write every dropped row with its drop_reason here.")] = None,
    *,
    config: CurateConfig,
    as_json: bool = False,
) -> None:
    """Write an SFT set (`messages` + `tools`) from trajectories, through named filter steps."""
    from agentdata.cli.views import curate_views
    from agentdata.curate import curate
    from agentdata.formats.forms import target_suffix

    suffix = target_suffix(config.target)
    out = out or Path(f"sft{suffix}")
    inputs = [*run_dirs, *config.dedup.decontam_files]
    output_set(out, "--out", (suffix,), f"the SFT set for {config.target}", inputs)
    if rejects is not None:
        output_file(rejects, "--rejects", (".parquet",), "the rejects", inputs)
        if rejects.resolve() == out.resolve():
            raise UserError(f"--rejects {rejects} is also --out: give the rejects a file of their own")
    if as_json:
        result = curate(run_dirs, out, config, rejects=rejects, command=invocation())
    else:
        print_line(f"[bold]curate[/] {', '.join(map(str, run_dirs))} → {out} (for {config.target})")
        # One line per step (a model-scored step draws its own progress bar, which a spinner would fight).
        result = curate(
            run_dirs,
            out,
            config,
            rejects=rejects,
            on_step=lambda step, rows: console.print(f"[dim]{escape(step.reason)}: {rows:,} rows left[/]"),
            command=invocation(),
        )
    show(result, as_json, curate_views)
