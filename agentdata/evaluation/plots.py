"""PNG plots of an eval report: models side by side per benchmark, and accuracy against the tool-call budget."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: never needs a display

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from agentdata.evaluation.report import EvalResult  # noqa: E402

ACCURACY_PLOT = "accuracy.png"
SWEEP_PLOT = "tool_calls_sweep.png"
# (name, value, its 95% interval): every bar carries its interval as an error bar.
METRICS = (
    ("avg@k", lambda m: m.avg_at_k, lambda m: m.avg_at_k_ci),
    ("pass@k", lambda m: m.pass_at_samples, lambda m: m.pass_at_samples_ci),
    ("maj@k", lambda m: m.maj_at_k, lambda m: m.maj_at_k_ci),
)


def error_bars(values: list[float], intervals: list) -> list[list[float]]:
    """matplotlib's yerr (distances below and above each value) from 95% intervals; 0 where none."""
    below = [value - interval.low if interval else 0.0 for value, interval in zip(values, intervals)]
    above = [interval.high - value if interval else 0.0 for value, interval in zip(values, intervals)]
    return [[max(0.0, b) for b in below], [max(0.0, a) for a in above]]


def _ordered(values: list[str]) -> list[str]:
    return list(dict.fromkeys(values))


def accuracy_plot(results: list[EvalResult], path: str | Path) -> Path:
    """Write `accuracy_figure` as a PNG; returns its path."""
    return _save(accuracy_figure(results), path)


def accuracy_figure(results: list[EvalResult]) -> Any:
    """Grouped bars: one group per benchmark, one bar per model, one panel per metric, each bar with
    its 95% interval (over problems) as an error bar.

    With a tool-call sweep, each model is shown at its largest budget.
    """
    largest = {}
    for result in results:
        key = (result.model, result.benchmark)
        if key not in largest or result.max_tool_calls > largest[key].max_tool_calls:
            largest[key] = result
    models = _ordered([r.model for r in results])
    benchmarks = _ordered([r.benchmark for r in results])
    figure, axes = plt.subplots(1, len(METRICS), figsize=(4.5 * len(METRICS), 4), sharey=True, squeeze=False)
    width = 0.8 / len(models)
    for axis, (name, value_of, interval_of) in zip(axes[0], METRICS):
        for index, model in enumerate(models):
            positions = [b + (index - (len(models) - 1) / 2) * width for b in range(len(benchmarks))]
            shown = [largest.get((model, bench)) for bench in benchmarks]
            values = [value_of(r.metrics) if r else 0.0 for r in shown]
            intervals = [interval_of(r.metrics) if r else None for r in shown]
            bars = axis.bar(positions, values, width, label=model, yerr=error_bars(values, intervals), capsize=3)
            axis.bar_label(bars, labels=[f"{v:.0%}" for v in values], fontsize=7, padding=2)
        samples = max(r.metrics.samples for r in results)
        axis.set_title(f"{name.replace('k', str(samples))} (95% interval)")
        axis.set_xticks(range(len(benchmarks)), benchmarks, rotation=15)
        axis.set_ylim(0, 1.05)
    axes[0][0].set_ylabel("accuracy")
    axes[0][-1].legend(fontsize=8)
    return figure


def sweep_plot(results: list[EvalResult], path: str | Path) -> Path:
    """Write `sweep_figure` as a PNG; returns its path."""
    return _save(sweep_figure(results), path)


def sweep_figure(results: list[EvalResult]) -> Any:
    """avg@k (with its 95% interval) against the allowed number of tool calls: one panel per benchmark,
    one line per model."""
    benchmarks = _ordered([r.benchmark for r in results])
    figure, axes = plt.subplots(1, len(benchmarks), figsize=(4.5 * len(benchmarks), 4), squeeze=False)
    for axis, bench in zip(axes[0], benchmarks):
        for model in _ordered([r.model for r in results]):
            points = sorted(
                (
                    (r.max_tool_calls, r.metrics.avg_at_k, r.metrics.avg_at_k_ci)
                    for r in results
                    if r.model == model and r.benchmark == bench
                ),
                key=lambda point: point[0],
            )
            values = [p[1] for p in points]
            axis.errorbar(
                [p[0] for p in points],
                values,
                yerr=error_bars(values, [p[2] for p in points]),
                marker="o",
                capsize=3,
                label=model,
            )
        budgets = sorted({r.max_tool_calls for r in results})
        if budgets and min(budgets) > 0:
            axis.set_xscale("log", base=2)
        axis.set_xticks(budgets, [str(b) for b in budgets])
        axis.set_title(bench)
        axis.set_xlabel("max tool calls")
        axis.set_ylim(0, 1.05)
    axes[0][0].set_ylabel(f"avg@{max(r.metrics.samples for r in results)}")
    axes[0][-1].legend(fontsize=8)
    return figure


def _save(figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)
    return path
