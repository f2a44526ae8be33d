"""Which parts of a sharded run dir (agent/shards.py) are finished, unfinished or missing.

A part is finished when its manifest says how many trajectories it makes, that many are in its shard
files, and it left no journal (a part that runs, or was stopped, has one). A part with no file at all
is missing: no process ever started it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from agentdata.agent.journal import read_journal
from agentdata.agent.rundir import RunDir
from agentdata.agent.shards import Shard, tags_in
from agentdata.errors import UserError

FINISHED, UNFINISHED, MISSING = "finished", "unfinished", "missing"


@dataclass
class PartState:
    """One shard of a run: whether it finished, and how many of its trajectories are on disk."""

    shard: str  # "I/N"
    state: str  # finished | unfinished | missing
    done: int = 0  # trajectories in its shard files
    expected: int | None = None  # how many it makes (its manifest); None before it started
    only_in_journal: int = 0  # finished, not yet in a shard file (a running or stopped part)

    @property
    def on_disk(self) -> int:
        return self.done + self.only_in_journal


@dataclass
class ShardedRun:
    """The parts of a sharded run dir, each finished, unfinished or missing."""

    path: Path
    count: int
    parts: list[PartState] = field(default_factory=list)

    def of_state(self, state: str) -> list[PartState]:
        return [part for part in self.parts if part.state == state]

    @property
    def complete(self) -> bool:
        return all(part.state == FINISHED for part in self.parts)

    def line(self) -> str:
        """`4 shards: 2 finished; unfinished: 1/4 (120 of 250 trajectories); missing (never started): 3/4`."""
        text = f"{self.count} shard{'s' if self.count > 1 else ''}: {len(self.of_state(FINISHED))} finished"
        unfinished = [
            f"{part.shard} ({part.on_disk:,} of {part.expected:,} trajectories)"
            if part.expected is not None
            else part.shard
            for part in self.of_state(UNFINISHED)
        ]
        if unfinished:
            text += f"; unfinished: {', '.join(_cut(unfinished))}"
        missing = [part.shard for part in self.of_state(MISSING)]
        if missing:
            text += f"; missing (never started): {', '.join(_cut(missing))}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "count": self.count,
            "complete": self.complete,
            "summary": self.line(),
            "parts": [asdict(part) for part in self.parts],
        }


def _cut(names: list[str], shown: int = 8) -> list[str]:
    return names if len(names) <= shown else [*names[:shown], f"… {len(names) - shown} more"]


def read_sharded(path: str | Path) -> ShardedRun | None:
    """The state of every part of a sharded run dir; None for a path that is no sharded run dir."""
    path = Path(path)
    tags = tags_in(path)
    if not tags:
        return None
    counts = sorted({shard.count for shard in tags})
    if len(counts) > 1:
        raise UserError(f"{path} holds shards of runs split {' and '.join(map(str, counts))} ways; move one aside")
    count = counts[0]
    present = {shard.index for shard in tags}
    run = ShardedRun(path, count)
    for index in range(count):
        shard = Shard(index, count)
        run.parts.append(part_state(RunDir(path, shard)) if index in present else PartState(str(shard), MISSING))
    return run


def part_state(part: RunDir) -> PartState:
    """A part (the `RunDir` of one shard) as its files say."""
    manifest = part.manifest()
    expected = manifest.get("expected") if manifest else None
    files = part.shards()
    on_disk: set[str] = set()
    if files:
        on_disk = set(pl.scan_parquet([str(file) for file in files]).select("id").unique().collect()["id"].to_list())
    journaled = {t.id for t in read_journal(part.journal_path).trajectories} - on_disk
    has_journal = part.journal_path.exists()
    finished = isinstance(expected, int) and len(on_disk) >= expected and not has_journal
    return PartState(str(part.shard), FINISHED if finished else UNFINISHED, len(on_disk), expected, len(journaled))


def incomplete_note(path: str | Path) -> str | None:
    """One line for a reader of `path` when it is a sharded run with parts unfinished or missing, else None."""
    run = read_sharded(path) if Path(path).is_dir() else None
    if run is None or run.complete:
        return None
    return f"{path} is a sharded run that is not complete ({run.line()}): only what is on disk is read"
