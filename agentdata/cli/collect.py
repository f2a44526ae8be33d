"""`agentdata collect`: a teacher solves problems with the real code sandbox; every turn is recorded."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from agentdata.cli.common import (
    AnswerField,
    Concurrency,
    EngineOption,
    Limit,
    MaxNewTokens,
    MaxTurns,
    ModelName,
    ProtocolName,
    QuestionField,
    SandboxSpec,
    Seed,
    Temperature,
    ToolOutputChars,
    ToolSpecs,
    TopP,
    console,
    engine_options,
    loop_tools,
    output_dir,
)


def command(
    problems_file: Annotated[
        Optional[Path], typer.Argument(help="Problems (JSONL, JSON, Parquet, CSV, dataset dir). Default: 16 built-in.")
    ] = None,
    out: Annotated[Path, typer.Option("--out", "-o", help="Run dir; an existing one is resumed.")] = Path("runs/collect"),
    teacher: Annotated[str, typer.Option(help="Engine spec: smollm2, hf:PATH, vllm:PATH, openai:URL[,URL].")] = "smollm2",
    model: ModelName = None,
    engine_option: EngineOption = None,
    samples: Annotated[int, typer.Option(help="Trajectories per problem.")] = 1,
    limit: Limit = None,
    protocol: ProtocolName = "hermes",
    max_tool_calls: Annotated[int, typer.Option(help="Tool calls run per trajectory.")] = 4,
    max_turns: MaxTurns = 8,
    max_new_tokens: MaxNewTokens = 512,
    temperature: Temperature = 0.7,
    top_p: TopP = 1.0,
    tool_output_chars: ToolOutputChars = 256,
    concurrency: Concurrency = 16,
    sandbox: SandboxSpec = "local",
    tool: ToolSpecs = None,
    seed: Seed = 0,
    question_field: QuestionField = None,
    answer_field: AnswerField = None,
    retry_errors: Annotated[bool, typer.Option(
        "--retry-errors/--no-retry-errors", help="On resume, run again the trajectories that ended in an error.",
    )] = True,
) -> None:
    """Run a teacher model against the code sandbox and record real trajectories."""
    from agentdata.problems import load_problems
    from agentdata.synth.builtin import builtin_problems
    from agentdata.agent.resume import unique_problems
    from agentdata.agent.runner import CollectConfig, collect

    output_dir(out, "--out")
    problems = load_problems(problems_file, question_field, answer_field) if problems_file else builtin_problems()
    problems = unique_problems(problems, problems_file)  # counted once each; one id with two contents is refused
    options = engine_options(engine_option, model)
    try:
        config = CollectConfig(
            teacher=teacher, samples=samples, limit=limit, protocol=protocol, max_tool_calls=max_tool_calls,
            max_turns=max_turns, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
            tool_output_chars=tool_output_chars, concurrency=concurrency, sandbox=sandbox, seed=seed,
            engine_options=options, retry_errors=retry_errors, tools=loop_tools(tool),
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    source = problems_file or "built-in problems"
    console.print(f"[bold]collect[/] {len(problems)} problems from {source} · teacher {teacher} · "
                  f"{samples} sample(s) each · protocol {protocol} → {out}")
    summary = collect(problems, out, config)
    console.print(summary.table())
    console.print(f"Inspect with: [cyan]agentdata inspect {out}[/]")
