"""`agentdata curate RUN_DIR... --out SFT.parquet`: an SFT set of verified, diverse trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentdata.cli.common import invocation, output_file, output_set
from agentdata.cli.console import console, print_json
from agentdata.cli.options import settings_command
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
    from agentdata.cli.views import drop_table, rows_table, scoring_line, tool_use_table
    from agentdata.curate import curate

    openai = config.target == "openai"  # OpenAI fine-tuning takes JSONL; every other reader Parquet
    out = out or Path("sft.jsonl" if openai else "sft.parquet")
    inputs = [*run_dirs, *config.dedup.decontam_files]
    output_set(out, "--out", (".jsonl",) if openai else (".parquet",), f"the SFT set for {config.target}", inputs)
    if rejects is not None:
        output_file(rejects, "--rejects", (".parquet",), "the rejects", inputs)
        if rejects.resolve() == out.resolve():
            raise UserError(f"--rejects {rejects} is also --out: give the rejects a file of their own")
    if as_json:
        result = curate(run_dirs, out, config, rejects=rejects, command=invocation())
        print_json(result.as_dict())
        if result.empty:
            raise UserError(f"{result.empty} (report: {result.report})")
        return
    console.print(f"[bold]curate[/] {', '.join(map(str, run_dirs))} → {out} (for {config.target})")
    # One line per step (a model-scored step draws its own progress bar, which a spinner would fight).
    result = curate(
        run_dirs,
        out,
        config,
        rejects=rejects,
        on_step=lambda step, rows: console.print(f"[dim]{escape(step.reason)}: {rows:,} rows left[/]"),
        command=invocation(),
    )
    for warning in result.warnings:
        console.print(f"[yellow]warning:[/] {escape(warning)}", highlight=False)
    console.print(drop_table(result.input_rows, result.counts, result.kept_rows, title="curate: rows per drop reason"))
    console.print(rows_table(result.per_source, title="per source"))
    tool_use = result.tool_use
    console.print(
        tool_use_table([{"rows": "input", **tool_use["input"]}, {"rows": "kept", **tool_use["kept"]}], "tool use")
    )
    for name, counts in result.scoring.items():
        console.print(scoring_line(name, counts))
    if result.secrets.get("rows"):
        found = ", ".join(f"{kind}: {count}" for kind, count in result.secrets["found"].items())
        done = {"redact": "redacted", "drop": "rows dropped as `secret`"}[result.secrets["mode"]]
        console.print(f"[yellow]secrets:[/] {result.secrets['rows']} kept rows held {found} ({done})")
    if result.empty:
        raise UserError(f"{result.empty} (report: {result.report})")
    console.print(
        f"SFT set: [cyan]{result.output}[/] · card: {result.card} · report: {result.report}"
        + (f" · pushed to {result.pushed['url']}" if result.pushed else "")
        + (f" · rejects: {result.rejects}" if result.rejects else "")
    )
