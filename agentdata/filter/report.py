"""The pool's picture: the student's pass rates before and after the band, as a PNG, one row per
domain when the problems span several (math, code, science) above a row for all of them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentdata.records import atomic_write


def pass_rate_histograms(
    before: Sequence[float],
    after: Sequence[float],
    band: tuple[float, float],
    path: Path,
    by_domain: dict[str, tuple[Sequence[float], Sequence[float]]] | None = None,
) -> Path:
    """Two panels per row: the student's pass rates over all profiled problems, and over the pool;
    a row for all problems, then one per domain when `by_domain` names more than one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [("", before, after)]
    if by_domain and len(by_domain) > 1:
        rows += [(f"{domain}: ", *rates) for domain, rates in sorted(by_domain.items())]
    bins = [index / 20 for index in range(21)]
    figure, axes = plt.subplots(len(rows), 2, figsize=(10, 3.4 * len(rows) + 0.4), sharex=True, squeeze=False)
    for row, (label, row_before, row_after) in zip(axes, rows):
        for axis, values, title in ((row[0], row_before, "all profiled problems"), (row[1], row_after, "after band")):
            axis.hist(list(values), bins=bins, color="#4c72b0", edgecolor="white")
            axis.set_title(f"{label}{title} (n={len(values)})")
            axis.set_xlabel("student pass rate")
            for edge in band:
                axis.axvline(edge, color="#c44e52", linestyle="--", linewidth=1)
        row[0].set_ylabel("problems")
    figure.suptitle(f"pass-rate band ({band[0]:g}, {band[1]:g}), ends exclusive")
    figure.tight_layout()
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png", dpi=110))
    plt.close(figure)
    return path
