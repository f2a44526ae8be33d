"""Progress events: how library code reports long work without drawing anything itself.

Library code calls `emit(Event(...))`; nothing happens unless someone listens. The CLI
listens for the length of a command and renders the events with rich (progress bars,
one line per training log). A library call such as `collect()` therefore prints nothing.

    kind "start"    a task begins (total may be None: unknown length)
    kind "advance"  `completed` of `total` done; `stats` holds live numbers (accuracy, rates)
    kind "log"      one record worth a line (a training step's metrics in `stats`, or a `message`: `note`)
    kind "end"      the task is over

An event's `scope` says whose it is when several runs report at once (an experiment's arms in
worker processes): the same task of two scopes is two bars.

This module imports nothing from the package.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

EVENT_KINDS = ("start", "advance", "log", "end")


@dataclass(frozen=True)
class Event:
    kind: str
    task: str
    completed: int = 0
    total: int | None = None
    stats: dict[str, Any] = field(default_factory=dict)
    message: str = ""
    scope: str = ""  # whose task, when several report at once ("" for the only one)

    @property
    def label(self) -> str:
        """The task as shown: `scope · task`, or the task alone."""
        return f"{self.scope} · {self.task}" if self.scope else self.task


Listener = Callable[[Event], None]
_listeners: list[Listener] = []


def emit(event: Event) -> None:
    for listener in list(_listeners):
        listener(event)


@contextmanager
def listening(listener: Listener) -> Iterator[Listener]:
    """Deliver every event emitted inside the block to `listener`."""
    _listeners.append(listener)
    try:
        yield listener
    finally:
        _listeners.remove(listener)


def note(task: str, message: str) -> None:
    """One line for whoever listens (the CLI prints it): what a stage decided, a warning, a step begun."""
    emit(Event("log", task, message=message))


@contextmanager
def task(name: str, total: int | None = None, message: str = "") -> Iterator[Callable[..., None]]:
    """Emit start/end around a block; yields `advance(completed, **stats)`."""
    emit(Event("start", name, total=total, message=message))

    def advance(completed: int, **stats: Any) -> None:
        emit(Event("advance", name, completed=completed, total=total, stats=stats))

    try:
        yield advance
    finally:
        emit(Event("end", name, total=total))
