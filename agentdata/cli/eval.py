"""`agentdata eval MODEL_SPEC BENCH_FILE...`: accuracy and tool use of models with the code tool on benchmarks."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from agentdata.cli.common import ModelName, output_dir, with_model
from agentdata.cli.console import console, print_json
from agentdata.cli.options import settings_command
from agentdata.evaluation.config import EvalConfig


@settings_command(exclude=("max_tool_calls",))  # eval's --max-tool-calls is the sweep (tool_call_budgets)
def command(
    model_spec: Annotated[
        str,
        typer.Argument(
            help="Engine spec: smollm2, hf:PATH, vllm:PATH, openai:URL[,URL]; LABEL=SPEC names it in tables and plots."
        ),
    ],
    bench_files: Annotated[
        list[Path],
        typer.Argument(
            help="Benchmark files (AIME-style problem/answer, GPQA-style multiple choice with a letter answer, ...)."
        ),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Report folder; an existing one is resumed.")] = Path(
        "runs/eval"
    ),
    compare: Annotated[
        list[str] | None,
        typer.Option(
            "--compare", help="More models or checkpoints to evaluate and plot alongside (repeatable; LABEL=SPEC)."
        ),
    ] = None,
    model: ModelName = None,
    *,
    config: EvalConfig,
    as_json: bool = False,
) -> None:
    """Run models with the code tool on benchmarks; report avg@k, pass@k, maj@k and tool use, with plots."""
    from agentdata.cli.views import comparisons_table, results_table, with_interval
    from agentdata.evaluation.runner import OUT_NAMES, run_eval

    output_dir(out, "--out", bench_files, writes=OUT_NAMES)
    config = dataclasses.replace(config, engine_options=with_model(config.engine_options, model))
    models = [model_spec, *(compare or [])]
    if not as_json:
        console.print(
            f"[bold]eval[/] {len(models)} model(s) × {len(bench_files)} benchmark(s) × tool calls "
            f"{config.tool_call_budgets} · k={config.samples} · protocol {config.loop.protocol or _TRAINED} → {out}"
        )

    def on_result(result) -> None:
        m = result.metrics
        console.print(
            f"  {result.model} · {result.benchmark} · tools ≤ {result.max_tool_calls}: "
            f"avg@{m.samples} {with_interval(m.avg_at_k, m.avg_at_k_ci)} · "
            f"pass@{m.samples} {with_interval(m.pass_at_samples, m.pass_at_samples_ci)} · "
            f"maj@{m.samples} {with_interval(m.maj_at_k, m.maj_at_k_ci)}{_failure_note(m)}{_cache_note(result.cache)}"
        )

    report = run_eval(models, bench_files, out, config, on_result=None if as_json else on_result)
    if as_json:
        print_json(report.as_dict())
        return
    if report.shard:
        for run in report.shard_runs:
            console.print(
                f"  {run['model']} · {run['benchmark']} · tools ≤ {run['max_tool_calls']}: shard {report.shard} "
                f"done, {run['generated']} generated now → {run['run_dir']}"
            )
        console.print(
            f"The scores need every shard: when all {config.sharding.shard.count} are done, the same eval without "
            "--shard writes the report (it generates nothing)"
        )
        return
    console.print(results_table(report.results, title=f"eval · {out} · 95% intervals over problems"))
    if report.comparisons:
        console.print(
            comparisons_table(report.comparisons, title=f"paired differences against {report.results[0].model}")
        )
        for row in report.comparisons:
            if row["metric"].startswith("avg@"):  # one line each, never wrapped: it is the verdict
                line = f"  {row['benchmark']} · tools ≤ {row['max_tool_calls']}: {row['sentence']}"
                console.print(escape(line), soft_wrap=True)
    console.print(
        f"Report: [cyan]{out / 'report.json'}[/] · plots: " + ", ".join(f"[cyan]{p}[/]" for p in report.plots)
    )


_TRAINED = "each model's own (else codeblock)"  # unset: the one a model agentdata trained records in its dir


def _failure_note(metrics) -> str:
    if not metrics.failed_responses:
        return ""
    return (
        f" · [yellow]{metrics.failed_responses} response(s) failed (engine/sandbox error), left out of the "
        f"scores; rerun to retry them[/]"
    )


def _cache_note(cache: dict[str, int]) -> str:
    """Says what was reused and what was generated anew, and why."""
    if not cache:
        return ""
    redone = [
        f"{cache[key]} {why}"
        for key, why in (("redone_problem_changed", "redone: problem changed"), ("redone_error", "redone: error"))
        if cache.get(key)
    ]
    return f" · generated {cache.get('generated', 0)}" + (f" ({', '.join(redone)})" if redone else "")
