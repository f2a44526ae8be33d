"""`agentdata eval MODEL_SPEC BENCH_FILE...`: accuracy and tool use of models with the code tool on benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from agentdata.cli.common import (
    AnswerField,
    Concurrency,
    EngineOption,
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


def parse_budgets(text: str) -> list[int]:
    """`4` or a sweep such as `1,2,4,8`."""
    try:
        budgets = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise typer.BadParameter(f"--max-tool-calls takes numbers like 4 or 1,2,4,8, got {text!r}") from None
    if not budgets or min(budgets) < 0:
        raise typer.BadParameter(f"--max-tool-calls takes non-negative numbers, got {text!r}")
    return budgets


def command(
    model_spec: Annotated[str, typer.Argument(help="Engine spec: smollm2, hf:PATH, vllm:PATH, openai:URL[,URL]; "
                                                   "LABEL=SPEC names it in tables and plots.")],
    bench_files: Annotated[list[Path], typer.Argument(help="Benchmark files (AIME-style problem/answer, GPQA-style "
                                                           "multiple choice with a letter answer, ...).")],
    k: Annotated[int, typer.Option("--k", "-k", help="Responses per problem: avg@k, pass@k, maj@k.")] = 4,
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder; an existing one is resumed.")] = Path(
        "runs/eval"
    ),
    compare: Annotated[
        Optional[list[str]], typer.Option("--compare", help="More models or checkpoints to evaluate and plot "
                                                            "alongside (repeatable; LABEL=SPEC).")
    ] = None,
    max_tool_calls: Annotated[str, typer.Option(help="Tool calls allowed per response; a list such as 1,2,4,8 "
                                                     "sweeps them.")] = "4",
    model: ModelName = None,
    engine_option: EngineOption = None,
    limit: Annotated[Optional[int], typer.Option(help="Use only the first N problems of each benchmark.")] = None,
    protocol: ProtocolName = "hermes",
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
) -> None:
    """Run models with the code tool on benchmarks; report avg@k, pass@k, maj@k and tool use, with plots."""
    from agentdata.evaluation.report import results_table
    from agentdata.evaluation.runner import EvalConfig, run_eval

    output_dir(out, "--out")
    options = engine_options(engine_option, model)
    try:
        config = EvalConfig(
            samples=k, tool_call_budgets=parse_budgets(max_tool_calls), protocol=protocol, max_turns=max_turns,
            max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
            tool_output_chars=tool_output_chars, concurrency=concurrency, sandbox=sandbox, seed=seed, limit=limit,
            question_field=question_field, answer_field=answer_field, engine_options=options,
            tools=loop_tools(tool),
        )
    except ValueError as error:
        raise typer.BadParameter(str(error)) from None
    models = [model_spec, *(compare or [])]
    console.print(f"[bold]eval[/] {len(models)} model(s) × {len(bench_files)} benchmark(s) × tool calls "
                  f"{config.tool_call_budgets} · k={k} · protocol {protocol} → {out}")

    def on_result(result) -> None:
        m = result.metrics
        console.print(f"  {result.model} · {result.benchmark} · tools ≤ {result.max_tool_calls}: "
                      f"avg@{m.samples} {m.avg_at_k:.1%} · pass@{m.samples} {m.pass_at_samples:.1%} · "
                      f"maj@{m.samples} {m.maj_at_k:.1%}{_failure_note(m)}{_cache_note(result.cache)}")

    report = run_eval(models, bench_files, out, config, on_result=on_result)
    console.print(results_table(report.results, title=f"eval · {out}"))
    console.print(f"Report: [cyan]{out / 'report.json'}[/] · plots: " + ", ".join(f"[cyan]{p}[/]" for p in report.plots))


def _failure_note(metrics) -> str:
    if not metrics.failed_responses:
        return ""
    return (f" · [yellow]{metrics.failed_responses} response(s) failed (engine/sandbox error), left out of the "
            f"scores; rerun to retry them[/]")


def _cache_note(cache: dict[str, int]) -> str:
    """Says what was reused and what was generated anew, and why."""
    if not cache:
        return ""
    redone = [f"{cache[key]} {why}" for key, why in (("redone_problem_changed", "redone: problem changed"),
                                                     ("redone_error", "redone: error")) if cache.get(key)]
    return f" · generated {cache.get('generated', 0)}" + (f" ({', '.join(redone)})" if redone else "")
