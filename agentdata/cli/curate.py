"""`agentdata curate RUN_DIR... --out SFT.parquet`: an SFT set of verified, diverse trajectories."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from agentdata.cli.common import ExtraSteps, console, output_file


def parse_pair(text: str, flag: str, kind: type = float) -> tuple:
    """`A,B` -> (A, B) of `kind`, or a one-line error naming the flag."""
    parts = [part.strip() for part in text.split(",")]
    try:
        if len(parts) != 2:
            raise ValueError
        return kind(parts[0]), kind(parts[1])
    except ValueError:
        raise typer.BadParameter(f"{flag} expects two numbers as A,B, got {text!r}") from None


def command(
    run_dirs: Annotated[list[Path], typer.Argument(help="Collect run dirs (or trajectory Parquet files).")],
    out: Annotated[
        Optional[Path], typer.Option("--out", "-o", help="SFT set to write (default sft.parquet; sft.jsonl --for openai).")
    ] = None,
    target: Annotated[str, typer.Option(
        "--for", help="The reader: hf (Parquet that TRL and verl both read), trl, verl (the same file), "
                      "openai (OpenAI fine-tuning JSONL).")] = "hf",
    keep_incorrect: Annotated[bool, typer.Option(help="Keep trajectories with a wrong answer.")] = False,
    tool_calls: Annotated[str, typer.Option("--tool-calls", help="Band MIN,MAX of tool calls kept.")] = "1,8",
    max_tool_error_ratio: Annotated[float, typer.Option(help="Largest share of failing tool calls.")] = 0.5,
    max_tokens: Annotated[int, typer.Option(help="Longest trajectory kept (prompt + completion tokens).")] = 32768,
    near_dup_threshold: Annotated[float, typer.Option(help="MinHash Jaccard threshold; 0 turns near-dedup off.")] = 0.8,
    near_dup_field: Annotated[str, typer.Option(help="question (drop repeated problems) or solution.")] = "question",
    decontam: Annotated[
        Optional[list[Path]], typer.Option("--decontam", help="Benchmark file to decontaminate against (repeatable).")
    ] = None,
    decontam_ngram: Annotated[int, typer.Option(help="Word n-gram size for decontamination.")] = 13,
    max_per_problem: Annotated[int, typer.Option(help="Most trajectories per problem; 0: no cap.")] = 4,
    balance_sources: Annotated[
        Optional[float], typer.Option(help="Largest share (0-1] of the set any one source may hold.")
    ] = None,
    rejects: Annotated[Optional[Path], typer.Option(help="Write every dropped row with its drop_reason here.")] = None,
    reasoning: Annotated[
        str, typer.Option(help="keep: the model's thinking stays on assistant messages (reasoning_content); "
                               "strip: answers only.")
    ] = "keep",
    step: ExtraSteps = None,
) -> None:
    """Write an SFT set (`messages` + `tools`) from trajectories, through named filter steps."""
    from agentdata.curate import CurateConfig, curate
    from agentdata.cli.views import drop_table, rows_table

    openai = target == "openai"  # OpenAI fine-tuning takes JSONL; every other reader Parquet
    out = out or Path("sft.jsonl" if openai else "sft.parquet")
    output_file(out, "--out", (".jsonl",) if openai else (".parquet",), f"the SFT set for {target}")
    if rejects is not None:
        output_file(rejects, "--rejects", (".parquet",), "the rejects")
    min_calls, max_calls = parse_pair(tool_calls, "--tool-calls", int)
    try:
        config = CurateConfig(
            keep_incorrect=keep_incorrect, min_tool_calls=min_calls, max_tool_calls=max_calls,
            max_tool_error_ratio=max_tool_error_ratio, max_tokens=max_tokens,
            near_dup_threshold=near_dup_threshold or None, near_dup_field=near_dup_field,
            decontam_files=[str(path) for path in decontam or []], decontam_ngram=decontam_ngram,
            max_per_problem=max_per_problem or None, balance_sources=balance_sources, reasoning=reasoning,
            extra_steps=list(step or []),
            target=target,
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    console.print(f"[bold]curate[/] {', '.join(map(str, run_dirs))} → {out} (for {target})")
    with console.status("filtering…") as status:
        result = curate(run_dirs, out, config, rejects=rejects,
                        on_step=lambda step, rows: status.update(f"{step.reason}: {rows:,} rows left"))
    console.print(drop_table(result.input_rows, result.counts, result.kept_rows, title="curate: rows per drop reason"))
    console.print(rows_table(result.per_source, title="per source"))
    if result.empty:
        from agentdata.errors import UserError

        raise UserError(f"{result.empty} (report: {result.report})")
    console.print(f"SFT set: [cyan]{result.output}[/] · report: {result.report}"
                  + (f" · rejects: {result.rejects}" if result.rejects else ""))
