"""Rich views for the terminal: each command's result as the tables and lines it prints. Only cli/ renders.

A `*_views(result)` function gives what one command shows at its end, in order; `cli.render.show`
prints them (or the result's `as_dict()` with `--json`). eval's, the widest, are in `eval_views.py`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from rich.console import Group
from rich.markup import escape
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from agentdata.agent.inspection import trajectory_stats
from agentdata.agent.journal import JOURNAL_NAME
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


def trajectories_summary(trajectories: Iterable[Trajectory], title: str = "trajectories") -> Table:
    stats = trajectory_stats(trajectories)
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
    table.add_row("tool calls per correct answer", per_correct(summary.tool_use.get("calls_per_correct")))
    table.add_row("tool error rate", f"{data['tool_error_rate']:.1%}")
    table.add_row("completion tokens", f"{summary.completion_tokens:,}")
    table.add_row("engine", escape(summary.engine) if summary.engine else "none (nothing to generate)")
    table.add_row(
        "trajectories/s · tokens/s (while generating)", f"{summary.trajectories_per_s:.2f} · {summary.tokens_per_s:.1f}"
    )
    seconds = f"{summary.generating_s:.1f} · {summary.elapsed_s:.1f}"
    table.add_row("seconds generating · whole run (start-up too)", seconds)
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


def per_correct(value: float | None) -> str:
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
            per_correct(row["calls_per_correct"]),
            f"{row['failed_call_share']:.1%}",
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
    if result.from_journal:
        table.add_row("of them only in the killed run's journal", f"{result.from_journal:,}")
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


# ------------------------------------------------------------------ what each command shows at its end
def collect_views(summary: Any) -> Iterator[Any]:
    yield collect_table(summary)
    for rows, name in ((summary.tool_use_by_source, "source"), (summary.tool_use_by_domain, "domain")):
        if len(rows) > 1:
            yield tool_use_table(rows, title=f"tool use per {name}")
    yield f"Inspect with: [cyan]agentdata inspect {summary.run_dir}[/]"


def curate_views(result: Any) -> Iterator[Any]:
    for warning in result.warnings:
        yield f"[yellow]warning:[/] {escape(warning)}"
    yield drop_table(result.input_rows, result.counts, result.kept_rows, title="curate: rows per drop reason")
    yield rows_table(result.per_source, title="per source")
    tool_use = result.tool_use
    yield tool_use_table([{"rows": "input", **tool_use["input"]}, {"rows": "kept", **tool_use["kept"]}], "tool use")
    for name, counts in result.scoring.items():
        yield scoring_line(name, counts)
    if result.secrets.get("rows"):
        yield secrets_line(result.secrets, "kept rows")
    if not result.empty:
        yield (
            f"SFT set: [cyan]{result.output}[/] · card: {result.card} · report: {result.report}"
            + (f" · pushed to {result.pushed['url']}" if result.pushed else "")
            + (f" · rejects: {result.rejects}" if result.rejects else "")
        )


def secrets_line(secrets: dict, what: str) -> str:
    """What a secret scan found (publish/secrets.py's counts) and what became of it."""
    found = ", ".join(f"{kind}: {count}" for kind, count in secrets["found"].items())
    done = {"redact": "redacted", "drop": "rows dropped as `secret`"}[secrets["mode"]]
    return f"[yellow]secrets:[/] {secrets['rows']} {what} held {found} ({done})"


def shard_profile_views(profiled: Any, count: int) -> Iterator[Any]:
    """`filter --shard I/N`'s end (a filter.run.ProfileRun): one shard's profile, of `count` shards."""
    yield (
        f"profile of shard {profiled.shard}: {profiled.rates.height} problems in {profiled.profile_dir} "
        f"({profiled.generated:,} rollouts generated now). When all {count} shards are profiled, the same "
        "filter without --shard builds the pool from them"
    )


def filter_views(run: Any, k: int, k_adaptive: int | None, pool_format: str) -> Iterator[Any]:
    """filter's end (a filter.run.FilterRun); `k`, `k_adaptive` and `pool_format` are the run's settings."""
    for warning in run.warnings:
        yield f"[yellow]warning:[/] {escape(warning)}"
    yield (
        f"profile: {run.profile_dir} ({run.generated:,} rollouts generated now, "
        f"{'cache hit' if not run.generated else 'cache filled'})"
    )
    if k_adaptive:
        yield (
            f"k-adaptive: {run.reprofiled} problem(s) straddled a band edge at k={k} and "
            f"were profiled up to k={k_adaptive}; {run.still_straddling} still do"
        )
    yield drop_table(run.problems, run.result.counts, run.selected, title="filter: problems per drop reason")
    yield rows_table(run.per_source, title="per source")
    if len(run.per_domain) > 1:
        yield rows_table(run.per_domain, title="per domain")
    if run.secrets.get("rows"):
        yield secrets_line(run.secrets, "problems")
    if not run.empty:
        yield (
            f"RL pool: [cyan]{run.output}[/] ({pool_format}) · card: {run.card} · report: {run.report} · "
            f"plot: {run.plot}" + (f" · pushed to {run.pushed['url']}" if run.pushed else "")
        )


def inspect_views(inspection: Any, show: int) -> Iterator[Any]:
    """`show` records in full, then the summary; a set's provenance."""
    if inspection.kind == "sft set":
        yield f"[bold]{escape(str(inspection.path))}[/]: an SFT set of {inspection.rows:,} rows"
    elif inspection.kind == "trajectories":
        yield from (conversation(trajectory) for trajectory in inspection.records[:show])
        yield trajectories_summary(inspection.records, title=f"{inspection.path}")
        sharded = inspection.sharded
        if inspection.only_in_journal:
            journal = (
                f"the journals of {inspection.path} (a journal per shard)"
                if sharded
                else inspection.path / JOURNAL_NAME
            )
            yield (
                f"{inspection.only_in_journal} of them are only in {journal}: the run was stopped before they "
                "reached a shard; running the same command again keeps them and does the rest"
            )
        if sharded:
            yield f"[{'green' if sharded.complete else 'yellow'}]a sharded run of {escape(sharded.line())}[/]"
    else:
        yield problems_table(inspection.records, limit=show)
        yield problems_summary(inspection.records)
    if inspection.provenance:
        yield provenance_table(inspection.provenance)


def provenance_table(provenance: dict[str, Any]) -> Table:
    """How a set was made, from its Parquet metadata (publish/provenance.py)."""
    table = Table(title="provenance", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value", overflow="fold")
    table.add_row("made by", f"agentdata {provenance.get('stage')} (settings {provenance.get('settings_digest')})")
    table.add_row("rebuild", f"{provenance.get('command') or 'made from Python'} (in {provenance.get('cwd')})")
    for source in provenance.get("sources", []):
        table.add_row(
            "source",
            f"{source.get('path')}: teacher {source.get('teacher')}, protocol {source.get('protocol')}, "
            f"settings {source.get('settings_digest')}, {source.get('kept')} of {source.get('rows')} rows kept",
        )
    for key, counts in provenance.get("counts", {}).items():
        table.add_row(key.replace("_", " "), ", ".join(f"{name}: {count}" for name, count in counts.items()))
    dropped = {reason: count for reason, count in provenance.get("dropped", {}).items() if count}
    if dropped:
        table.add_row("dropped", ", ".join(f"{reason}: {count}" for reason, count in dropped.items()))
    if provenance.get("band"):
        table.add_row("band", str(provenance["band"]))
    versions = provenance.get("versions", {})
    table.add_row("versions", ", ".join(f"{name} {version}" for name, version in versions.items()))
    return table


def problems_written_views(written: Any) -> Iterator[Any]:
    """`synth problems`' end (a synth.generators.WrittenProblems): problems per kind and level."""
    table = Table(title=f"{len(written.problems)} problems -> {written.output}")
    for column in ("kind", *(f"level {level}" for level in written.levels), "total"):
        table.add_column(column, justify="left" if column == "kind" else "right")
    for kind, row in written.counts().items():
        table.add_row(kind, *map(str, row), str(sum(row)))
    yield table


def stitch_views(summary: Any) -> Iterator[Any]:
    yield stitch_table(summary)


def regrade_views(result: Any) -> Iterator[Any]:
    for warning in result.warnings:
        yield f"[yellow]warning:[/] {escape(warning)}"
    yield regrade_table(result)
    if result.flips:
        yield flips_table(result.flips[:20], title=f"flipped verdicts (first {min(20, len(result.flips))})")
    yield f"report: {result.report} · curate, filter (--profile-dir) and eval read {result.run_dir} like any run"


def validate_views(result: Any) -> Iterator[Any]:
    yield validate_table(result)
    if result.broken:
        yield findings_table(result.broken[:20], title=f"broken problems (first {min(20, len(result.broken))})")
    clean = f"clean problems: [cyan]{result.clean_file}[/]"
    if not result.clean:
        clean = f"[yellow]no problem is clean:[/] [cyan]{result.clean_file}[/] is written empty"
    yield f"{clean} · report: {result.report}"
