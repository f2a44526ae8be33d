"""Where collect's finished trajectories go: each journaled at once (durable against kill -9), batched into
crash-safe shards, and counted; none is kept in memory once it is in a shard."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from agentdata.agent.journal import Journal, signals_deferred
from agentdata.agent.rundir import RunDir
from agentdata.records import Trajectory, to_row

FLUSH_SECONDS = 30.0


@dataclass
class Written:
    """What a run has written so far, in counts: a run of 10^5 trajectories keeps none of them in memory;
    and how it made them: the engine that ran, and the seconds from the first rollout to the last result."""

    count: int = 0
    completion_tokens: int = 0
    engine: str = ""
    generating_s: float = 0.0
    error_ids: set[str] = field(default_factory=set)  # what a broken run takes out again (RunBroken)

    def add(self, rows: list[dict[str, Any]]) -> None:
        self.count += len(rows)
        self.completion_tokens += sum(row["completion_tokens"] for row in rows)
        self.error_ids.update(row["id"] for row in rows if row["finish_reason"] == "error")


class ShardBuffer:
    """Journals each trajectory as it finishes (durable at once), batches them into shards. A trajectory
    becomes its row once, for both (the row's conversion was a large part of the driver's CPU)."""

    def __init__(self, run: RunDir, shard_size: int, settings: dict[str, Any]):
        self.run = run
        self.shard_size = shard_size
        self.settings = settings
        self.journal = Journal(run.journal_path, settings)
        self.journaled = False
        self.pending: list[dict[str, Any]] = []  # rows (records.to_row)
        self.written = Written()
        self.last_flush = time.monotonic()

    def add(self, trajectory: Trajectory) -> None:
        row = to_row(trajectory)
        self.pending.append(row)  # first: a signal between the two lines leaves it pending, not lost
        self.journal.append(trajectory, row)
        self.journaled = True
        if len(self.pending) >= self.shard_size or time.monotonic() - self.last_flush > FLUSH_SECONDS:
            self.flush()

    def drop_errors(self) -> None:
        self.pending = [row for row in self.pending if row["finish_reason"] != "error"]

    def flush(self) -> None:
        self.last_flush = time.monotonic()
        with signals_deferred():  # the shard, forgetting its rows and the journal's reset: all or nothing
            if self.pending:
                self.run.write_shard_rows(self.pending, self.settings)
                self.written.add(self.pending)
                self.pending = []
            if self.journaled:  # everything journaled is now in a shard (or was dropped on purpose)
                self.journal.reset()
                self.journaled = False

    def close(self) -> None:
        self.flush()
        self.journal.close()
