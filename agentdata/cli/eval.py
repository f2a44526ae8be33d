"""`agentdata eval MODEL_SPEC BENCH_FILE...`: accuracy and tool use of models with the code tool on benchmarks."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from agentdata.cli.common import output_dir, tracked
from agentdata.cli.console import print_line
from agentdata.cli.options import settings_command
from agentdata.cli.render import show
from agentdata.evaluation.config import EvalConfig
from agentdata.settings import Sections
from agentdata.training.config import TrackingConfig


@settings_command(
    exclude=("max_tool_calls",), sections=Sections(tracked("config", {"config": EvalConfig}))
)  # eval's --max-tool-calls is the sweep (tool_call_budgets)
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
    *,
    config: EvalConfig,
    tracking: TrackingConfig,
    as_json: bool = False,
) -> None:
    """Run models with the code tool on benchmarks; report avg@k, pass@k, maj@k and tool use, with plots."""
    from agentdata.cli.eval_views import eval_views, with_interval
    from agentdata.evaluation.runner import OUT_NAMES, run_eval
    from agentdata.training.trackers import check_trackers, report_to_trackers

    check_trackers(tracking, "eval")
    output_dir(out, "--out", bench_files, writes=OUT_NAMES)
    models = [model_spec, *(compare or [])]
    if not as_json:
        print_line(
            f"[bold]eval[/] {len(models)} model(s) × {len(bench_files)} benchmark(s) × tool calls "
            f"{config.tool_call_budgets} · k={config.samples} · protocol {config.loop.protocol or _TRAINED} → {out}"
        )

    def on_result(result) -> None:
        m = result.metrics
        print_line(
            f"  {result.model} · {result.benchmark} · tools ≤ {result.max_tool_calls}: "
            f"avg@{m.samples} {with_interval(m.avg_at_k, m.avg_at_k_ci)} · "
            f"pass@{m.samples} {with_interval(m.pass_at_samples, m.pass_at_samples_ci)} · "
            f"maj@{m.samples} {with_interval(m.maj_at_k, m.maj_at_k_ci)}{_failure_note(m)}{_cache_note(result.cache)}"
        )

    report = run_eval(models, bench_files, out, config, on_result=None if as_json else on_result)
    report_to_trackers(tracking, "eval", out, _by_run(report), [Path(r["run_dir"]) for r in _runs(report)])
    show(report, as_json, lambda report: eval_views(report, out, config.sharding.shard))


def _runs(report) -> list[dict]:
    """Each (model, benchmark, budget) run: its result, or with --shard what this shard made of it."""
    return report.shard_runs if report.shard else [result.as_dict() for result in report.results]


def _by_run(report) -> dict[str, dict]:
    """The report's numbers under `<model>/<benchmark>/tools-<budget>` (`eval/smollm2/aime/tools-4/avg@4`)."""
    return {f"{r['model']}/{r['benchmark']}/tools-{r['max_tool_calls']}": r for r in _runs(report)}


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
