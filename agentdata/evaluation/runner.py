"""The eval runner: one collect run per (model, benchmark, tool-call budget), then metrics and plots.

    out_dir/report.json
    out_dir/accuracy.png                   models side by side per benchmark
    out_dir/tool_calls_sweep.png           with more than one --max-tool-calls
    out_dir/runs/<model>/<benchmark>/tools-<n>-<settings digest>/   collect run dirs (resumable)

The runs are ordinary collect run dirs, so an interrupted eval continues where it stopped
and `agentdata inspect` shows any of them. They are the cache, keyed on what a response
depends on: the digest of the settings (model spec, sampling, loop limits) names the dir,
and inside it each response is redone when its problem changed (question, answer, tests)
or it ended in an error; each result says how many responses were generated and why.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import polars as pl

from agentdata.agent.config import CollectConfig
from agentdata.agent.resume import unique_problems
from agentdata.agent.rundir import RunDir, settings_digest
from agentdata.agent.runner import CollectSummary, collect
from agentdata.engines.spec import ModelSpec
from agentdata.errors import UserError
from agentdata.evaluation.compare import compare_to_baseline
from agentdata.evaluation.config import EvalConfig
from agentdata.evaluation.metrics import Equivalence, answers_equivalent, score_benchmark
from agentdata.evaluation.plots import ACCURACY_PLOT, SWEEP_PLOT, accuracy_plot, sweep_plot
from agentdata.evaluation.report import REPORT_FILE, EvalReport, EvalResult
from agentdata.evaluation.responses import run_responses
from agentdata.problems import load_problems
from agentdata.records import Problem
from agentdata.settings import flatten

LABELLED_SPEC = re.compile(r"^(?P<label>[A-Za-z0-9_.-]+)=(?P<spec>.+)$")


@dataclass(frozen=True)
class LabelledModel:
    label: str
    spec: str


def parse_model_specs(specs: list[str]) -> list[LabelledModel]:
    """`LABEL=SPEC` names a model for tables and plots; a bare SPEC gets a short label of its own."""
    models = []
    for text in specs:
        match = LABELLED_SPEC.match(text)
        models.append(
            LabelledModel(match["label"], match["spec"]) if match else LabelledModel(default_label(text), text)
        )
    labels = [m.label for m in models]
    duplicates = sorted({label for label in labels if labels.count(label) > 1})
    if duplicates:
        raise UserError(f"two models share the label {duplicates[0]!r}; name them as LABEL=SPEC")
    return models


def default_label(text: str) -> str:
    spec = ModelSpec.parse(text)
    rest = spec.target or (spec.kind.rpartition(":")[2] if spec.plugin else "")  # a plug-in: its target or name
    if not rest:
        return spec.text
    if spec.served:
        # the host and port, never a `user:PASSWORD@` before them: the label names folders, plots and reports
        return "openai-" + (urlparse(rest.split(",")[0]).netloc.rpartition("@")[2] or rest)
    return Path(rest.rstrip("/")).name or spec.text


def benchmark_names(paths: list[Path]) -> list[str]:
    """File stems, prefixed with the parent folder where two stems clash."""
    stems = [p.name if p.is_dir() else p.stem for p in paths]
    return [f"{p.parent.name}-{stem}" if stems.count(stem) > 1 else stem for p, stem in zip(paths, stems)]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "model"


def run_benchmark(
    problems: list[Problem], run_dir: Path, config: CollectConfig, engine: Any = None, sandbox: Any = None
) -> tuple[pl.DataFrame, CollectSummary]:
    """Run one model on one benchmark (resuming `run_dir`): the responses that belong to it (a table of
    `evaluation.responses`, read from the shards), and what was run."""
    summary = collect(problems, run_dir, config, engine=engine, sandbox=sandbox)
    responses = run_responses(RunDir(run_dir).shards(), (p.id for p in problems), config.samples)
    return responses, summary


RUNS_DIR = "runs"  # out_dir/runs/<model>/<benchmark>/<budget>: one collect run dir each
# Everything eval writes in its --out (outputs.check_output_dir refuses an input there; one beside them is fine).
OUT_NAMES = (RUNS_DIR, REPORT_FILE, ACCURACY_PLOT, SWEEP_PLOT)


def benchmark_run_dir(out_dir: Path, model: LabelledModel, bench_name: str, config: CollectConfig) -> Path:
    """Where one (model, benchmark, budget) run lives: other settings never reuse its responses."""
    budget_dir = f"tools-{config.loop.max_tool_calls}-{settings_digest(config.settings())}"
    return out_dir / RUNS_DIR / _slug(model.label) / _slug(bench_name) / budget_dir


def run_eval(
    model_specs: list[str],
    benchmark_paths: list[str | Path],
    out_dir: str | Path,
    config: EvalConfig,
    engine_factory: Callable[[str], Any] | None = None,
    sandbox: Any = None,
    equivalent: Equivalence = answers_equivalent,
    on_result: Callable[[EvalResult], None] | None = None,
) -> EvalReport:
    """Evaluate every model on every benchmark at every tool-call budget; write report.json and plots.

    Every model after the first is compared with the first on the same problems (paired
    differences with their interval, p-value and sentence: `report.comparisons`).

    `engine_factory(spec)` supplies a ready engine (tests, or a model already loaded); without
    it, each collect run loads the engine from its spec. Likewise `sandbox`: a ready one, or
    each run opens `config.loop.sandbox`. Progress is reported as `agentdata.events`.
    """
    out_dir = Path(out_dir)
    models = parse_model_specs(model_specs)
    paths = [Path(p) for p in benchmark_paths]
    benchmarks = {
        name: unique_problems(load_problems(path, config.question_field, config.answer_field), path)[: config.limit]
        for name, path in zip(benchmark_names(paths), paths)
    }
    report = EvalReport(settings=_settings(config, models, paths))
    if config.sharding.shard is not None:
        report.shard = str(config.sharding.shard)
    for model in models:
        engine = engine_factory(model.spec) if engine_factory else None
        for bench_name, problems in benchmarks.items():
            for budget in config.tool_call_budgets:
                collect_config = config.collect_config(model.spec, budget)
                run_dir = benchmark_run_dir(out_dir, model, bench_name, collect_config)
                if report.shard:  # one shard of each run: scores need them all (eval without --shard, after)
                    summary = collect(problems, run_dir, collect_config, engine=engine, sandbox=sandbox)
                    where = {"model": model.label, "benchmark": bench_name, "max_tool_calls": budget}
                    report.shard_runs.append({**where, "run_dir": str(run_dir), "generated": summary.new})
                    continue
                responses, summary = run_benchmark(problems, run_dir, collect_config, engine, sandbox)
                metrics, scores = score_benchmark(responses, equivalent)
                result = EvalResult(
                    model.label,
                    model.spec,
                    bench_name,
                    budget,
                    str(run_dir),
                    metrics,
                    cache={
                        "generated": summary.new,
                        "redone_problem_changed": summary.stale,
                        "redone_error": summary.retried,
                    },
                    scores=scores,
                    engine=summary.engine,
                )
                report.results.append(result)
                if on_result:
                    on_result(result)
    if report.shard:
        return report
    report.comparisons = [c.as_dict() for c in compare_to_baseline(report.results, models[0].label)]
    report.plots = [str(p) for p in write_plots(report, out_dir)]
    report.write(out_dir)
    return report


def write_plots(report: EvalReport, out_dir: Path) -> list[Path]:
    plots = [accuracy_plot(report.results, out_dir / ACCURACY_PLOT)]
    if len({r.max_tool_calls for r in report.results}) > 1:
        plots.append(sweep_plot(report.results, out_dir / SWEEP_PLOT))
    return plots


def _settings(config: EvalConfig, models: list[LabelledModel], paths: list[Path]) -> dict[str, Any]:
    settings = {
        name: value for name, value in flatten(config).items() if name not in ("max_tool_calls", "engine_options")
    }
    # an unset protocol is each model's own (engines/trained.py): the one each was run in
    protocols = {m.label: config.loop.for_model(m.spec).protocol for m in models}
    return {
        **settings,
        "models": {m.label: m.spec for m in models},
        "protocols": protocols,
        "benchmarks": [str(p) for p in paths],
    }
