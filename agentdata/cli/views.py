"""Rich views for the terminal: problems, trajectories, drop-reason tables. Only cli/ renders."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agentdata.records import Problem, Trajectory, message_tool_calls

ROLE_STYLES = {"system": "dim", "user": "bold cyan", "assistant": "green", "tool": "yellow"}


def problems_table(problems: list[Problem], limit: int = 10) -> Table:
    table = Table(title=f"{len(problems)} problems", show_lines=True)
    for column in ("id", "source", "question", "answer"):
        table.add_column(column, overflow="fold")
    for problem in problems[:limit]:
        # Text from a user's file is shown as it is, never read as rich markup ("[/x]" would break the table).
        table.add_row(
            *(
                Text(value)
                for value in (problem.id, problem.source, _clip(problem.question, 300), _clip(problem.answer, 80))
            )
        )
    return table


def problems_summary(problems: list[Problem]) -> Table:
    table = Table(title="problems by source")
    table.add_column("source")
    table.add_column("count", justify="right")
    for source, count in Counter(p.source for p in problems).most_common():
        table.add_row(Text(source), str(count))
    return table


def conversation(trajectory: Trajectory) -> Panel:
    parts = []
    for message in trajectory.messages:
        role = message["role"]
        parts.append(Text(f"── {role}", style=ROLE_STYLES.get(role, "")))
        if message.get("content"):
            parts.append(Text(_clip(message["content"], 2000)))
        for call in message_tool_calls(message):
            parts.append(Syntax(call.code, "python", theme="ansi_dark", line_numbers=False))
    verdict = "[green]correct[/]" if trajectory.correct else "[red]wrong[/]"
    title = (
        f"{escape(trajectory.id)} · {verdict} · final={escape(repr(trajectory.final_answer))} "
        f"gold={escape(repr(trajectory.answer))} · {trajectory.num_tool_calls} tool calls · "
        f"{trajectory.finish_reason}"
    )
    return Panel(Group(*parts), title=title, title_align="left")


def trajectories_stats(trajectories: Iterable[Trajectory]) -> dict[str, Any]:
    """The numbers `inspect` shows for trajectories (also its --json output)."""
    trajectories = list(trajectories)
    count = len(trajectories) or 1
    calls = sum(t.num_tool_calls for t in trajectories)
    return {
        "trajectories": len(trajectories),
        "accuracy": sum(t.correct for t in trajectories) / count,
        "mean_tool_calls": calls / count,
        "tool_error_rate": sum(t.num_tool_errors for t in trajectories) / max(calls, 1),
        "mean_completion_tokens": sum(t.completion_tokens for t in trajectories) / count,
        "finish_reasons": dict(sorted(Counter(t.finish_reason for t in trajectories).items())),
    }


def trajectories_summary(trajectories: Iterable[Trajectory], title: str = "trajectories") -> Table:
    stats = trajectories_stats(trajectories)
    table = Table(title=escape(title))
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("trajectories", str(stats["trajectories"]))
    table.add_row("accuracy", f"{stats['accuracy']:.1%}")
    table.add_row("mean tool calls", f"{stats['mean_tool_calls']:.2f}")
    table.add_row("tool error rate", f"{stats['tool_error_rate']:.1%}")
    table.add_row("mean completion tokens", f"{stats['mean_completion_tokens']:.1f}")
    for reason, number in stats["finish_reasons"].items():
        table.add_row(f"finish: {reason}", str(number))
    return table


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


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


def _share(count: int, total: int) -> str:
    return f"{100 * count / total:.1f}%" if total else "-"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def collect_table(summary: Any) -> Table:
    """collect's summary (an agent.runner.CollectSummary)."""
    data = summary.as_dict()
    table = Table(title=f"collect · {summary.run_dir}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("trajectories (new this run)", f"{summary.total} ({summary.new})")
    if summary.stale or summary.retried:
        table.add_row("redone: problem changed · error retried", f"{summary.stale} · {summary.retried}")
    table.add_row("accuracy", f"{summary.accuracy:.1%}")
    table.add_row("mean tool calls", f"{data['mean_tool_calls']:.2f}")
    table.add_row("tool calls per correct answer", _per_correct(summary.tool_use.get("calls_per_correct")))
    table.add_row("tool error rate", f"{data['tool_error_rate']:.1%}")
    table.add_row("completion tokens", f"{summary.completion_tokens:,}")
    table.add_row("trajectories/s · tokens/s", f"{summary.trajectories_per_s:.2f} · {summary.tokens_per_s:.1f}")
    for reason, count in sorted(summary.finish_reasons.items()):
        table.add_row(f"finish: {reason}", str(count))
    for check, count in summary.health.items():
        table.add_row(f"health: {check}", f"{count} ({_share(count, summary.total)})")
    return table


def scoring_line(name: str, counts: dict[str, Any]) -> str:
    """One line per scorer (PRM, judge): what it scored now, reused, tried again, and what failed (not low scores)."""
    line = (
        f"{escape(name)}: {counts['scored']:,} scored · {counts['cached']:,} from the journal · "
        f"{counts['retried']:,} retried · {counts['failed']:,} failed"
    )
    if counts["failed"]:
        line += f" (counted apart, not as low scores; first: {escape(counts['failures'][0])})"
    return line


def _per_correct(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def tool_use_table(rows: Sequence[dict[str, Any]], title: str) -> Table:
    """Tool-use efficiency per group (agent.tool_use rows): calls per trajectory and per correct answer."""
    table = Table(title=title)
    if not rows:
        return table
    name = next(iter(rows[0]))
    for column in (name, "trajectories", "correct", "calls/traj", "calls/correct", "failed calls"):
        table.add_column(column, justify="left" if column == name else "right")
    for row in rows:
        table.add_row(
            escape(str(row[name])),
            f"{row['trajectories']:,}",
            f"{row['correct']:,}",
            f"{row['calls_per_trajectory']:.2f}",
            _per_correct(row["calls_per_correct"]),
            f"{row['failed_call_share']:.1%}",
        )
    return table


def results_table(results: list[Any], title: str = "eval") -> Table:
    table = Table(title=title)
    for name in (
        "model",
        "benchmark",
        "kind",
        "tool calls ≤",
        "problems",
        "avg@k",
        "pass@k",
        "maj@k",
        "calls/resp",
        "calls/correct",
        "tool err",
        "resp tokens",
        "test s/resp",
        "failed",
        "finish reasons",
    ):
        table.add_column(name, justify="left" if name in ("model", "benchmark", "kind", "finish reasons") else "right")
    for result in results:
        m = result.metrics
        k = m.samples
        reasons = ", ".join(f"{reason} {count}" for reason, count in m.finish_reasons.items())
        table.add_row(
            result.model,
            result.benchmark,
            m.kind,
            str(result.max_tool_calls),
            str(m.num_problems),
            f"{with_interval(m.avg_at_k, m.avg_at_k_ci)} @{k}",
            f"{with_interval(m.pass_at_samples, m.pass_at_samples_ci)} @{k}",
            f"{with_interval(m.maj_at_k, m.maj_at_k_ci)} @{k}",
            f"{m.mean_tool_calls:.2f}",
            _per_correct(m.calls_per_correct),
            f"{m.tool_error_rate:.1%}",
            f"{m.mean_response_tokens:.0f}",
            f"{m.mean_test_s:.2f}" if m.kind in ("code", "mixed") else "-",
            str(m.failed_responses),
            reasons,
        )
    return table


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


def stitch_table(summary: Any) -> Table:
    """`synth stitch`'s summary (a synth.stitch.StitchSummary)."""
    table = Table(title=f"synth stitch · {summary.output}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("solutions read", str(summary.rows))
    table.add_row("stitched trajectories written", str(summary.written))
    for reason, count in summary.dropped.items():
        table.add_row(f"dropped_{reason}", str(count))
    table.add_row(
        "code cells (tool calls)",
        f"{summary.tool_calls} ({summary.tool_calls / max(summary.written, 1):.2f} per solution)",
    )
    table.add_row("cells that failed", str(summary.tool_errors))
    table.add_row(
        "calculations whose real output matched the text",
        f"{summary.calculations_matching_text} / {summary.calculations}",
    )
    table.add_row("final answer equals the gold", f"{summary.correct} / {summary.written}")
    if summary.trajectories_dir:
        table.add_row("trajectories (for `agentdata curate`)", str(summary.trajectories_dir))
    return table


def regrade_table(result: Any) -> Table:
    """`regrade`'s summary (a regrade.RegradeResult)."""
    table = Table(title=f"regrade · {escape(str(result.source))} → {escape(str(result.run_dir))}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row(
        "trajectories (graded · errors copied)",
        f"{result.trajectories:,} ({result.regraded:,} · {result.copied_errors:,})",
    )
    table.add_row("gold answers changed", f"{result.gold_changed:,}")
    if result.not_in_problems:
        table.add_row("not in the problems file (stored gold)", f"{result.not_in_problems:,}")
    table.add_row("flipped wrong → correct", f"{result.to_correct:,}")
    table.add_row("flipped correct → wrong", f"{result.to_wrong:,}")
    table.add_row("accuracy before → after", f"{result.accuracy_before:.1%} → {result.accuracy_after:.1%}")
    return table


def flips_table(flips: Sequence[Any], title: str) -> Table:
    table = Table(title=title)
    for column in ("id", "source", "verdict", "final answer", "old gold", "new gold"):
        table.add_column(column, overflow="fold")
    for flip in flips:
        verdict = "wrong → correct" if flip.now_correct else "correct → wrong"
        cells = (
            flip.id,
            flip.source,
            verdict,
            _clip(str(flip.final_answer), 60),
            _clip(flip.old_gold, 60),
            _clip(flip.new_gold, 60),
        )
        table.add_row(*(Text(cell) for cell in cells))
    return table


def validate_table(result: Any) -> Table:
    """`validate`'s summary (a validate.ValidateResult): problems per finding."""
    from agentdata.validate.run import CHECKS

    table = Table(title=f"validate · {escape(str(result.path))}")
    table.add_column("check")
    table.add_column("problems", justify="right")
    table.add_column("finds")
    table.add_row("rows", f"{result.rows:,}", "")
    for check, count in result.findings.items():
        table.add_row(check, f"{count:,}", CHECKS[check])
    table.add_row("[bold]clean[/]", f"[bold]{result.clean:,}[/]", "no finding: written to the clean file")
    return table


def findings_table(broken: Sequence[dict[str, Any]], title: str) -> Table:
    table = Table(title=title, show_lines=True)
    for column in ("row", "question", "findings"):
        table.add_column(column, overflow="fold")
    for problem in broken:
        findings = "\n".join(f"{finding['check']}: {finding['detail']}" for finding in problem["findings"])
        table.add_row(str(problem["row"]), Text(_clip(problem["question"], 120)), Text(findings))
    return table
