"""The run dir's journal: every finished trajectory is on disk within a second, before it reaches a shard.

    run_dir/journal.jsonl     line 1: {"settings": {...}}; then one trajectory row per line

Shards are written in batches (many rows per Parquet file), so between two shards the
finished trajectories would live only in memory. The journal closes that gap: each one is
appended as one JSON line and flushed to the OS at once (a `kill -9` keeps it), and the file
is fsync'ed at most once a second (a power cut loses at most that second). When a batch
becomes a shard, the journal is replaced by a fresh one holding only the header; on
resume, the rows of a leftover journal become a shard ("compaction"). A line cut short by
a kill in the middle of a write is the one thing dropped, and it is the last line.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.errors import OutputWriteError, UserError, write_refusal
from agentdata.records import Trajectory, atomic_write, from_row, to_row

JOURNAL_NAME = "journal.jsonl"
FSYNC_EVERY_S = 1.0
KEPT = "every trajectory finished before is kept (shards and journal): run the same command again to resume"


@dataclass
class JournalContents:
    settings: dict[str, Any] | None = None
    trajectories: list[Trajectory] = field(default_factory=list)


def _header(settings: dict[str, Any]) -> str:
    return json.dumps({"settings": settings}, sort_keys=True, default=str) + "\n"


def read_journal(path: Path) -> JournalContents:
    """The settings and trajectories of a journal left by an interrupted run; a damaged one is a UserError."""
    if not path.exists():
        return JournalContents()
    if not path.is_file():
        raise UserError(f"{path} is not a file: move it aside to resume")
    try:
        lines = path.read_bytes().decode("utf-8").split("\n")
    except (OSError, UnicodeDecodeError) as error:
        raise UserError(
            f"{path} is not readable ({error}): move it aside to resume (trajectories it held are redone)"
        ) from None
    complete = lines[:-1]  # what follows the last newline was cut short by a kill: never a finished row
    contents = JournalContents()
    for number, line in enumerate(complete, start=1):
        if number == 1:
            contents.settings = _parse_header(path, line)
        elif line.strip():
            contents.trajectories.append(_parse_row(path, number, line))
    return contents


def _parse_header(path: Path, line: str) -> dict[str, Any]:
    try:
        header = json.loads(line)
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or not isinstance(header.get("settings"), dict):
        raise UserError(
            f"{path}, line 1: not a journal header: move it aside to resume (trajectories it held are redone)"
        )
    return header["settings"]


def _parse_row(path: Path, number: int, line: str) -> Trajectory:
    try:
        return from_row(Trajectory, json.loads(line))
    except (json.JSONDecodeError, TypeError, ValueError) as error:
        raise UserError(
            f"{path}, line {number}: not a trajectory ({error}); move it aside to resume "
            "(trajectories it held are redone)"
        ) from None


class Journal:
    """Append-only, one flush per trajectory; `reset` once its rows are in a shard."""

    def __init__(self, path: Path, settings: dict[str, Any]):
        self.path = path
        self.settings = settings
        self.handle = None
        self.last_sync = 0.0
        self.reset()

    def append(self, trajectory: Trajectory, row: dict[str, Any] | None = None) -> None:
        """`row`: the trajectory's `to_row`, where the caller has made it already."""
        try:
            row = to_row(trajectory) if row is None else row
            self.handle.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
            self.handle.flush()  # in the OS's hands now: a killed process no longer loses it
            now = time.monotonic()
            if now - self.last_sync >= FSYNC_EVERY_S:
                os.fsync(self.handle.fileno())
                self.last_sync = now
        except OSError as error:
            number = write_refusal(error)
            if number is None:
                raise
            # A full disk cut this line short: reading drops it, the ones before are whole and kept.
            with contextlib.suppress(OSError):
                self._close_handle()
            raise OutputWriteError(self.path, number, KEPT) from None

    def reset(self) -> None:
        """Start over with only the header: called after the rows so far are committed to a shard."""
        self._close_handle()
        header = _header(self.settings)
        atomic_write(self.path, lambda tmp: Path(tmp).write_text(header, encoding="utf-8"), KEPT)
        self.handle = open(self.path, "a", encoding="utf-8")

    def close(self) -> None:
        """The run ended with every row in a shard: the journal is no longer needed."""
        self._close_handle()
        self.path.unlink(missing_ok=True)

    def _close_handle(self) -> None:
        handle, self.handle = self.handle, None
        if handle is not None:
            handle.close()  # a flush that fails still closes the file, then raises


@contextlib.contextmanager
def signals_deferred():
    """Ctrl-C or SIGTERM waits until the block ends: a shard and its bookkeeping are written as one step.

    Otherwise a signal landing between a shard's rename and the line that forgets its rows would
    write them twice. The block is short (one shard write), so a stop is delayed by milliseconds.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, lambda signum, frame: received.append(signum))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        for number in received:
            _deliver(number, previous[number])


def _deliver(number: int, handler: object) -> None:
    if callable(handler):
        handler(number, None)  # default_int_handler raises KeyboardInterrupt; asyncio's cancels its task
    elif handler == signal.SIG_DFL:
        signal.raise_signal(number)
