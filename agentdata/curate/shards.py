"""The shards one curate reads: each footer read once, one lazy scan that every pass shares, the passes named.

Polars reads a Parquet file's footer the first time a scan is collected and keeps it with the scan, so every
later query built on the same scan opens each shard once; a fresh `scan_parquet` per query opened each shard
twice (a default curate of 12 rows opened each shard 13-14 times). A pass is one read of the shards' data by
one part of curate (the scalar columns, the text features, the secrets scan, the write of the kept rows...):
`scan(name)` names it, so the report can say how many passes the run made and which.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from functools import cached_property
from pathlib import Path

import polars as pl

from agentdata.agent.rundir import shard_rows
from agentdata.agent.shard_files import ROW_ID, scan_shards


class Shards:
    def __init__(self, rows: dict[Path, int]):
        self.rows = rows  # per shard, in input order: its row count (from the footer read when it was checked)
        self.paths = list(rows)
        # the passes made so far, by name, in order (a pass read piece by piece counts once)
        self.passes: list[str] = []
        self._scan: pl.LazyFrame | None = None

    @classmethod
    def of(cls, run_dirs: Sequence[str | os.PathLike]) -> Shards:
        """The shards of run dirs (or trajectory files), each checked for the schema."""
        return cls(shard_rows(run_dirs))

    @property
    def total(self) -> int:
        """Rows on disk, a row that a later one of the same id replaced included (what a scan numbers)."""
        return sum(self.rows.values())

    @cached_property
    def replaced(self) -> pl.Series:
        """The global row numbers of rows a later row of the same trajectory id replaces (a redone rollout, or
        a row two merged parts' files both hold): read once, as one trajectory, like every reader of a run."""
        ids = self.scan("ids").select(ROW_ID, "id")
        later = ids.filter(pl.col(ROW_ID) != pl.col(ROW_ID).max().over("id"))
        return later.collect(engine="streaming")[ROW_ID]

    @property
    def trajectories(self) -> int:
        """The trajectories the shards hold: each id once."""
        return self.total - len(self.replaced)

    def scan(self, name: str) -> pl.LazyFrame:
        """All shards as one lazy frame with a global row number (`ROW_ID`), for the pass `name`."""
        if name not in self.passes:
            self.passes.append(name)
        if self._scan is None:
            self._scan = scan_shards(self.paths)
        return self._scan
