"""Rendering the library's progress events (agentdata.events) with rich: bars, live rates, log lines.

On a terminal a task is a live bar (`RichRenderer`). Into a log file or CI (no terminal) a bar
cannot be redrawn and rich would leave one frame folded into 80 columns, so each task is lines
instead (`LogRenderer`): how far it got every `LOG_EVERY_S` seconds, and where it ended.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from agentdata.cli.console import console as default_console
from agentdata.events import Event, listening

LOG_EVERY_S = 60.0  # a long task's progress line in a log, at most this often
# The training numbers worth a line per logged step; the rest stays in metrics.jsonl.
CONSOLE_KEYS = (
    "loss",
    "reward",
    "accuracy",
    "tools/call_frequency",
    "tools/error_rate",
    "completions/mean_length",
    "entropy",
    "mean_token_accuracy",
    "learning_rate",
)


def stats_text(task: str, stats: dict[str, Any]) -> str:
    """The live numbers beside a bar, e.g. collect's `acc 50% · 1.20 traj/s · 35 tok/s · 4 tool calls`."""
    if task == "collect" and stats:
        parts = []
        if "accuracy" in stats:
            parts.append(
                f"acc {stats['accuracy']:.0%} · {stats['trajectories_per_s']:.2f} traj/s · "
                f"{stats['tokens_per_s']:.0f} tok/s · {stats['tool_calls']} tool calls"
            )
        if stats.get("waiting"):
            parts.append(f"[yellow]waiting: {escape(stats['waiting'])}[/]")
        return " · ".join(parts)
    if task in ("PRM", "judge") and stats:  # judge.runner's counts
        return (
            f"{stats['scored']} scored · {stats['cached']} from the journal · {stats['failed']} failed · "
            f"{stats['per_s']:.2f}/s"
        )
    return " · ".join(f"{key} {value}" for key, value in stats.items())


def log_text(event: Event) -> str | None:
    """`SFT step N/M: loss=… accuracy=…` for a training log (how far the training is, whatever the output:
    a log file shows no bar), None when it has none of the main numbers."""
    stats = event.stats
    shown = [f"{key}={stats[key]:.4g}" for key in CONSOLE_KEYS if isinstance(stats.get(key), float)]
    if not shown:
        return None
    of = f"/{event.total:,}" if event.total else ""
    return f"{escape(event.task)} step {stats.get('step')}{of}: " + "  ".join(shown)


def _scoped(event: Event, markup: str) -> str:
    """A line of a scoped event, prefixed with its scope (whose it is, when several report at once)."""
    return f"[dim]{escape(event.scope)}[/] {markup}" if event.scope else markup


class RichRenderer:
    """One rich progress display; a bar per started task, removed (transient) or kept when it ends."""

    def __init__(self, console: Console):
        self.console = console
        self.progress: Progress | None = None
        self.tasks: dict[str, Any] = {}

    def __call__(self, event: Event) -> None:
        key = event.label
        if event.kind == "start":
            self._start(event)
        elif event.kind == "advance" and key in self.tasks:
            self.progress.update(self.tasks[key], completed=event.completed, stats=stats_text(event.task, event.stats))
        elif event.kind == "log":
            line = event.message or log_text(event)
            if line:
                self.console.print(_scoped(event, line), highlight=False, soft_wrap=True)  # a step stays on one line
        elif event.kind == "end" and key in self.tasks:
            # a bar of unknown length (a one-off conversion) and the training bars go; collect's stays
            self.progress.update(
                self.tasks.pop(key), visible=event.total is not None and event.task not in ("SFT", "GRPO")
            )
            if not self.tasks:
                self.close()

    def _start(self, event: Event) -> None:
        if event.message:
            self.console.print(_scoped(event, event.message), highlight=False, soft_wrap=True)
        if self.progress is None:
            self.progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[stats]}"),
                console=self.console,
            )
            self.progress.start()
        self.tasks[event.label] = self.progress.add_task(escape(event.label), total=event.total, stats="")

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
            self.tasks.clear()


class LogRenderer:
    """The events as whole lines, for output that is no terminal: a task's progress now and then, its end."""

    def __init__(self, console: Console, every_s: float = LOG_EVERY_S):
        self.console, self.every_s = console, every_s
        self.tasks: dict[str, dict[str, Any]] = {}

    def __call__(self, event: Event) -> None:
        key = event.label
        if event.kind == "start":
            if event.message:
                self._line(_scoped(event, event.message))
            now = time.monotonic()
            state = {"task": event.task, "total": event.total, "completed": 0, "stats": {}}
            self.tasks[key] = {**state, "started": now, "shown": now}
        elif event.kind == "advance" and key in self.tasks:
            state = self.tasks[key]
            state.update(completed=event.completed, stats=event.stats)
            if time.monotonic() - state["shown"] >= self.every_s:
                state["shown"] = time.monotonic()
                self._line(self._progress(key, state))
        elif event.kind == "log":
            line = event.message or log_text(event)
            if line:
                self._line(_scoped(event, line))
        elif event.kind == "end" and key in self.tasks:
            state = self.tasks.pop(key)
            if state["total"] is not None:
                self._line(self._progress(key, state))

    def _progress(self, label: str, state: dict[str, Any]) -> str:
        elapsed = time.monotonic() - state["started"]
        stats = stats_text(state["task"], state["stats"])
        return f"[bold]{escape(label)}[/] {state['completed']:,}/{state['total']:,} · {elapsed:.0f} s" + (
            f" · {stats}" if stats else ""
        )

    def _line(self, markup: str) -> None:
        self.console.print(markup, highlight=False, soft_wrap=True)

    def close(self) -> None:
        self.tasks.clear()


@contextmanager
def rendering(enabled: bool = True, console: Console | None = None) -> Iterator[None]:
    """Render every event emitted inside the block (nothing when not `enabled`, e.g. with --json)."""
    if not enabled:
        yield
        return
    console = console or default_console
    renderer = RichRenderer(console) if console.is_terminal else LogRenderer(console)
    try:
        with listening(renderer):
            yield
    finally:
        renderer.close()
