"""`agentdata collect`: a teacher solves problems with the real code sandbox; every turn is recorded."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from agentdata.agent.config import CollectConfig
from agentdata.cli.common import AnswerField, ModelName, QuestionField, output_dir, with_model
from agentdata.cli.console import console, print_json
from agentdata.cli.options import settings_command


@settings_command()
def command(
    problems_file: Annotated[
        Path | None,
        typer.Argument(help="Problems (JSONL, JSON, Parquet, CSV, dataset dir). Default: the built-in compute ladder."),
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Run dir; an existing one is resumed.")] = Path(
        "runs/collect"
    ),
    model: ModelName = None,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    *,
    config: CollectConfig,
    as_json: bool = False,
) -> None:
    """Run a teacher model against the code sandbox and record real trajectories."""
    from agentdata.agent.resume import unique_problems
    from agentdata.agent.runner import collect
    from agentdata.cli.views import collect_table, tool_use_table
    from agentdata.problems import load_problems
    from agentdata.synth.builtin import default_problems

    output_dir(out, "--out", inputs=[problems_file])
    problems = load_problems(problems_file, question_field, answer_field) if problems_file else default_problems()
    problems = unique_problems(problems, problems_file)  # counted once each; one id with two contents is refused
    config = dataclasses.replace(config, engine_options=with_model(config.engine_options, model))
    source = problems_file or "built-in problems"
    part = f" · shard {config.sharding.shard} (its share of the problems)" if config.sharding.shard else ""
    if not as_json:
        console.print(
            f"[bold]collect[/] {len(problems)} problems from {source} · teacher {config.teacher} · "
            f"{config.samples} sample(s) each · protocol {config.loop.protocol}{part} → {out}"
        )
    summary = collect(problems, out, config)
    if as_json:
        print_json(summary.as_dict())
        return
    console.print(collect_table(summary))
    for rows, name in ((summary.tool_use_by_source, "source"), (summary.tool_use_by_domain, "domain")):
        if len(rows) > 1:
            console.print(tool_use_table(rows, title=f"tool use per {name}"))
    console.print(f"Inspect with: [cyan]agentdata inspect {out}[/]")
