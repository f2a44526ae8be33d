"""The pool's picture: the student's pass rates before and after the band, as a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from agentdata.records import atomic_write


def pass_rate_histograms(before: Sequence[float], after: Sequence[float], band: tuple[float, float], path: Path) -> Path:
    """Two panels: the student's pass rates over all profiled problems, and over the pool."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    bins = [index / 20 for index in range(21)]
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharex=True)
    for axis, values, title in ((axes[0], before, "all profiled problems"), (axes[1], after, "after band")):
        axis.hist(list(values), bins=bins, color="#4c72b0", edgecolor="white")
        axis.set_title(f"{title} (n={len(values)})")
        axis.set_xlabel("student pass rate")
        for edge in band:
            axis.axvline(edge, color="#c44e52", linestyle="--", linewidth=1)
    axes[0].set_ylabel("problems")
    figure.suptitle(f"pass-rate band ({band[0]:g}, {band[1]:g}), ends exclusive")
    figure.tight_layout()
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110))
    plt.close(figure)
    return path
