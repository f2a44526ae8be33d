"""The scaling view of ZeroTIR: accuracy, tool calls per response and response length per step."""

from __future__ import annotations

from pathlib import Path
from typing import Any

PLOTTED = (
    ("accuracy", "accuracy", "accuracy.png"),
    ("tools/call_frequency", "tool calls per response", "tool_calls.png"),
    ("completions/model_tokens", "response length (model tokens)", "response_length.png"),
)


def plot_training_curves(history: list[dict[str, Any]], out_dir: Path) -> list[Path]:
    """One PNG per metric against steps; metrics with no points are skipped."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for key, label, filename in PLOTTED:
        points = [(entry["step"], entry[key]) for entry in history if isinstance(entry.get(key), (int, float))]
        if not points:
            continue
        steps, values = zip(*points)
        figure, axis = plt.subplots(figsize=(5, 3.2), dpi=120)
        axis.plot(steps, values, marker="o", markersize=3)
        axis.set_xlabel("step")
        axis.set_ylabel(label)
        axis.grid(alpha=0.3)
        figure.tight_layout()
        figure.savefig(out_dir / filename)
        plt.close(figure)
        written.append(out_dir / filename)
    return written
