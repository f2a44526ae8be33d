"""eval's end: the results table (or one block per result where it does not fit), the paired
differences, the verdict lines. Only cli/ renders."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console, ConsoleOptions, Group
from rich.markup import escape
from rich.measure import Measurement
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from agentdata.cli.views import per_correct

# eval's columns: which result they describe, its accuracy, its tool use (each a header and the cell of one result)
RESULT_KEY_COLUMNS = ("model", "benchmark", "kind", "tool calls ≤")
ACCURACY_COLUMNS = ("problems", "avg@k", "pass@k", "maj@k")
TOOL_USE_COLUMNS = ("calls/resp", "calls/correct", "tool err", "resp tokens", "test s/resp", "failed", "finish reasons")
LEFT_ALIGNED = ("model", "benchmark", "kind", "finish reasons")


def result_cells(result: Any) -> dict[str, str]:
    m = result.metrics
    k = m.samples
    return {
        "model": result.model,
        "benchmark": result.benchmark,
        "kind": m.kind,
        "tool calls ≤": str(result.max_tool_calls),
        "problems": str(m.num_problems),
        "avg@k": f"{with_interval(m.avg_at_k, m.avg_at_k_ci)} @{k}",
        "pass@k": f"{with_interval(m.pass_at_samples, m.pass_at_samples_ci)} @{k}",
        "maj@k": f"{with_interval(m.maj_at_k, m.maj_at_k_ci)} @{k}",
        "calls/resp": f"{m.mean_tool_calls:.2f}",
        "calls/correct": per_correct(m.calls_per_correct),
        "tool err": f"{m.tool_error_rate:.1%}",
        "resp tokens": f"{m.mean_response_tokens:.0f}",
        "test s/resp": f"{m.mean_test_s:.2f}" if m.kind in ("code", "mixed") else "-",
        "failed": str(m.failed_responses),
        "finish reasons": ", ".join(f"{reason} {count}" for reason, count in m.finish_reasons.items()),
    }


def results_table(results: list[Any], title: str = "eval", columns: Sequence[str] | None = None) -> Table:
    """One row per (model, benchmark, tool-call budget); every column, or the `columns` named."""
    columns = columns or (*RESULT_KEY_COLUMNS, *ACCURACY_COLUMNS, *TOOL_USE_COLUMNS)
    table = Table(title=title)
    for name in columns:
        table.add_column(name, justify="left" if name in LEFT_ALIGNED else "right")
    for result in results:
        cells = result_cells(result)
        table.add_row(*(Text(cells[name]) for name in columns))
    return table


def results_tables(results: list[Any], title: str = "eval") -> Fitted:
    """The results in one table where it fits; where it does not (a narrow terminal, a log file: rich's
    80 columns), one short block per result, the way psql's expanded display shows a wide row, instead
    of fourteen columns folded letter by letter."""
    blocks = [Text(title, style="italic")]
    for result in results:
        blocks += [Text(""), result_block(result)]
    return Fitted(results_table(results, title), Group(*blocks))


def result_block(result: Any) -> Group:
    """One result as a few lines: which it is, then accuracy on the left and tool use on the right."""
    cells, k = result_cells(result), result.metrics.samples
    heading = Text(
        f"{cells['model']} · {cells['benchmark']} ({cells['kind']}) · tool calls ≤ {cells['tool calls ≤']} · "
        f"{cells['problems']} problems",
        style="bold",
    )
    grid = Table.grid(padding=(0, 2))
    for justify in ("left", "right", "left", "right"):
        grid.add_column(justify=justify)
    left = [(name.replace("k", str(k)), cells[name].removesuffix(f" @{k}")) for name in ACCURACY_COLUMNS[1:]]
    left.append(("failed", cells["failed"]))
    right = [(name, cells[name]) for name in TOOL_USE_COLUMNS if name not in ("failed", "finish reasons")]
    for (left_name, left_value), (right_name, right_value) in zip(left, right):
        grid.add_row(left_name, left_value, right_name, right_value)
    finish = Text(f"finish reasons: {cells['finish reasons']}")
    return Group(heading, Padding(Group(grid, finish), (0, 0, 0, 2), expand=False))


UNBOUNDED = 100_000


class Fitted:
    """The first of `choices` whose natural width fits where it is printed, else the last one."""

    def __init__(self, *choices: Any):
        self.choices = choices

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Any]:
        unbounded = options.update_width(UNBOUNDED)  # rich clamps a measure to the width it is given
        for choice in self.choices[:-1]:
            if Measurement.get(console, unbounded, choice).maximum <= options.max_width:
                yield choice
                return
        yield self.choices[-1]


def with_interval(value: float, interval: Any) -> str:
    """A score with its 95% interval: `12.5% [4.1, 22.0]` (percentage points)."""
    return f"{value:.1%}" if interval is None else f"{value:.1%} {interval.points()}"


def comparisons_table(comparisons: list[dict[str, Any]], title: str = "paired differences") -> Table:
    """Paired comparisons (evaluation/compare.py's dicts): difference, 95% interval, p-value, verdict."""
    table = Table(title=title)
    for name in ("model", "vs", "benchmark", "tools ≤", "metric", "difference", "95% interval", "p", "problems"):
        table.add_column(name, justify="left" if name in ("model", "vs", "benchmark", "metric") else "right")
    for row in comparisons:
        interval = row["interval"]
        style = "bold" if row["significant"] else "dim"
        table.add_row(
            escape(str(row["model"])),
            escape(str(row["baseline"])),
            escape(str(row.get("benchmark", ""))),
            str(row.get("max_tool_calls", "")),
            row["metric"],
            f"[{style}]{100 * row['difference']:+.1f} pts[/]",
            f"[{100 * interval['low']:.1f}, {100 * interval['high']:.1f}]",
            f"{row['p_value']:.2g}",
            str(row["problems"]),
        )
    return table


def comparison_lines(comparisons: list[dict[str, Any]], title: str) -> Group:
    """The comparisons one line each, where their table does not fit (a narrow terminal, a log file)."""
    lines = [Text(title, style="italic")]
    for row in comparisons:
        interval = row["interval"]
        lines.append(
            Text(
                f"  {row['model']} vs {row['baseline']} · {row.get('benchmark', '')} · tools ≤ "
                f"{row.get('max_tool_calls', '')} · {row['metric']}: {100 * row['difference']:+.1f} pts "
                f"[{100 * interval['low']:.1f}, {100 * interval['high']:.1f}], p {row['p_value']:.2g}, "
                f"{row['problems']} problems",
                style="bold" if row["significant"] else "",
            )
        )
    return Group(*lines)


def engines_lines(results: list[Any]) -> list[str]:
    """Which engine each model ran on (a spec such as `smollm2` or `auto:DIR` runs on the engine this machine
    has), or that its responses were all reused from an earlier run: a line per model, so a narrow terminal
    reads each whole."""
    engines: dict[str, set[str]] = {}
    for result in results:
        engines.setdefault(result.model, set()).add(result.engine or "none (reused earlier responses)")
    return [escape(f"engine · {model}: {', '.join(sorted(names))}") for model, names in engines.items()]


def eval_views(report: Any, out: Path, shard: Any = None) -> Iterator[Any]:
    """eval's end (an evaluation.report.EvalReport); with --shard (`shard`), what this shard made instead of
    scores, which need every shard."""
    if report.shard:
        for run in report.shard_runs:
            yield (
                f"  {run['model']} · {run['benchmark']} · tools ≤ {run['max_tool_calls']}: shard {report.shard} "
                f"done, {run['generated']} generated now → {run['run_dir']}"
            )
        yield (
            f"The scores need every shard: when all {shard.count} are done, the same eval without "
            "--shard writes the report (it generates nothing)"
        )
        return
    yield results_tables(report.results, title=f"eval · {out} · 95% intervals over problems")
    yield from engines_lines(report.results)
    if report.comparisons:
        title = f"paired differences against {report.results[0].model}"
        yield Fitted(comparisons_table(report.comparisons, title), comparison_lines(report.comparisons, title))
        for row in report.comparisons:
            if row["metric"].startswith("avg@"):  # one line each, never wrapped: it is the verdict
                yield escape(f"  {row['benchmark']} · tools ≤ {row['max_tool_calls']}: {row['sentence']}")
    yield f"Report: [cyan]{out / 'report.json'}[/] · plots: " + ", ".join(f"[cyan]{p}[/]" for p in report.plots)
