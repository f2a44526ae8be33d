"""ZeroTIR's scaling curves on one page: accuracy, tool calls, response length and entropy against steps.

Drawn from a training stage's `metrics.jsonl`: the training rollouts' numbers per step
(`accuracy`, `tools/call_frequency`, `completions/model_tokens`, `entropy`) and, where the stage
validated, the held-out evaluation beside them (`eval/avg@K`, `eval/tools/call_frequency`,
`eval/completions/model_tokens`; keys in `evaluation/validation.py`). `run_grpo` writes it at
the end; `plot_run(RUN_DIR)` redraws it from a finished (or running) stage's dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: never needs a display

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
from matplotlib.ticker import MaxNLocator  # noqa: E402

from agentdata.evaluation.validation import EVAL_PREFIX, avg_key  # noqa: E402

SCALING_PLOT = "scaling.png"
# (panel title, training key, evaluation key); the accuracy panel's eval key is found per run (eval/avg@K).
PANELS = (
    ("accuracy", "accuracy", "avg@k"),
    ("tool calls per response", "tools/call_frequency", f"{EVAL_PREFIX}tools/call_frequency"),
    ("response length (model tokens)", "completions/model_tokens", f"{EVAL_PREFIX}completions/model_tokens"),
    ("entropy", "entropy", None),
)


def series(history: list[dict[str, Any]], key: str | None) -> tuple[list[int], list[float]]:
    """(steps, values) of one key, in step order; records without it are skipped."""
    points = sorted(
        (entry["step"], entry[key])
        for entry in history
        if key and isinstance(entry.get(key), (int, float)) and not isinstance(entry.get(key), bool)
    )
    return [step for step, _ in points], [value for _, value in points]


def scaling_figure(history: list[dict[str, Any]]) -> Any:
    """The 2x2 figure (matplotlib); each panel has the training line and, where evaluated, the eval line."""
    accuracy_key = next((key for key in map(avg_key, history) if key), None)
    figure, axes = plt.subplots(2, 2, figsize=(10, 7), dpi=100)
    for axis, (title, train_key, eval_key) in zip(axes.flat, PANELS):
        eval_label = "held-out eval"
        if eval_key == "avg@k":
            eval_key, eval_label = accuracy_key, f"held-out eval {(accuracy_key or '').removeprefix(EVAL_PREFIX)}"
        lines = ((train_key, "train rollouts", "o-"), (eval_key, eval_label, "s--"))
        for key, label, style in lines:
            steps, values = series(history, key)
            if steps:
                axis.plot(steps, values, style, markersize=4, label=label)
        axis.set_title(title)
        axis.set_xlabel("step")
        axis.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
        axis.grid(alpha=0.3)
        if axis.lines:
            axis.legend(fontsize=8)
        else:
            axis.text(0.5, 0.5, "not logged", ha="center", va="center", transform=axis.transAxes, color="gray")
    axes.flat[0].set_ylim(-0.02, 1.02)
    figure.tight_layout()
    return figure


def scaling_plot(history: list[dict[str, Any]], path: str | Path) -> Path:
    """Write the one-page scaling plot as a PNG; returns its path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure = scaling_figure(history)
    figure.savefig(path)
    plt.close(figure)
    return path


def plot_run(run_dir: str | Path) -> Path:
    """Redraw `RUN_DIR/plots/scaling.png` from `RUN_DIR/metrics.jsonl` (a GRPO or SFT stage's dir)."""
    from agentdata.errors import UserError
    from agentdata.training.metrics import read_metrics

    run_dir = Path(run_dir)
    history = read_metrics(run_dir / "metrics.jsonl")
    if not history:
        raise UserError(f"{run_dir}: no metrics.jsonl with records to plot")
    return scaling_plot(history, run_dir / "plots" / SCALING_PLOT)
