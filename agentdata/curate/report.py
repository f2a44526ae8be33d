"""Reports people look at: rich tables for the terminal, JSON for machines, PNG plots."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from rich.table import Table

from agentdata.records import atomic_write


def drop_table(input_rows: int, counts: dict[str, int], kept_rows: int, title: str) -> Table:
    table = Table(title=title)
    table.add_column("step / reason")
    table.add_column("rows", justify="right")
    table.add_column("share", justify="right")
    table.add_row("input", f"{input_rows:,}", "100.0%")
    for reason, count in counts.items():
        table.add_row(f"dropped_{reason}", f"{count:,}", _share(count, input_rows))
    table.add_row("[bold]kept[/]", f"[bold]{kept_rows:,}[/]", _share(kept_rows, input_rows))
    return table


def rows_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    table = Table(title=title)
    if not rows:
        return table
    for name in rows[0]:
        table.add_column(name, justify="left" if name == "source" else "right")
    for row in rows:
        table.add_row(*(_cell(value) for value in row.values()))
    return table


def write_json(path: Path, report: dict[str, Any]) -> Path:
    text = json.dumps(report, indent=2, default=str)
    return atomic_write(path, lambda tmp: Path(tmp).write_text(text, encoding="utf-8"))


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


def _share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%" if total else "-"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)
