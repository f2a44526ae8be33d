"""The eval plots are real PNGs with one bar per (model, benchmark) and one line per model."""

from __future__ import annotations

import pytest

from agentdata.evaluation.metrics import BenchmarkMetrics
from agentdata.evaluation.plots import accuracy_plot, sweep_plot
from agentdata.evaluation.report import EvalResult

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def result(model: str, bench: str, budget: int, accuracy: float) -> EvalResult:
    metrics = BenchmarkMetrics(
        num_problems=3,
        num_responses=12,
        samples=4,
        avg_at_k=accuracy,
        pass_at_k={1: accuracy, 2: accuracy, 4: min(1.0, accuracy * 2)},
        maj_at_k=accuracy,
        mean_tool_calls=1.0,
        tool_error_rate=0.1,
        mean_response_tokens=100,
        mean_response_chars=400,
        finish_reasons={"answer": 12},
    )
    return EvalResult(model, f"hf:{model}", bench, budget, "runs", metrics)


def test_accuracy_plot_compares_models(tmp_path):
    results = [result(m, b, 4, acc) for m, acc in (("base", 0.2), ("sft", 0.5)) for b in ("aime", "gpqa")]
    path = accuracy_plot(results, tmp_path / "accuracy.png")
    assert path.read_bytes().startswith(PNG_MAGIC)


def test_sweep_plot_draws_accuracy_against_budget(tmp_path):
    results = [result("sft", "aime", budget, 0.1 * i) for i, budget in enumerate((1, 2, 4, 8))]
    path = sweep_plot(results, tmp_path / "sweep.png")
    assert path.read_bytes().startswith(PNG_MAGIC)
    assert path.stat().st_size > 5_000  # axes, a line and labels, not an empty canvas


def test_every_bar_and_point_carries_its_95_percent_interval():
    from matplotlib.container import ErrorbarContainer

    from agentdata.evaluation.plots import accuracy_figure, sweep_figure
    from agentdata.evaluation.stats import Interval

    shown = result("sft", "aime", 4, 0.5)
    shown.metrics.avg_at_k_ci = Interval(0.3, 0.8, "bootstrap")
    figures = [accuracy_figure([shown]), sweep_figure([shown, result("sft", "aime", 1, 0.2)])]
    bars, sweep = (figure.axes[0] for figure in figures)
    (segments,) = [c for c in bars.containers if isinstance(c, ErrorbarContainer)][0].lines[2]
    assert segments.get_segments()[0][:, 1].tolist() == pytest.approx([0.3, 0.8])  # avg@4's bar: its interval
    (line_bars,) = [c for c in sweep.containers if isinstance(c, ErrorbarContainer)][0].lines[2]
    assert [s[:, 1].tolist() for s in line_bars.get_segments()] == [[0.2, 0.2], [0.3, 0.8]]  # budget 1 has none
