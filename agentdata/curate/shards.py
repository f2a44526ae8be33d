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
    def __init__(self, rows: dict[Path, int], run_starts: Sequence[int] = (0,)):
        self.rows = rows  # per shard, in input order: its row count (from the footer read when it was checked)
        self.paths = list(rows)
        # the global row number each input (a run dir or a file) starts at: ids repeat only within one input
        # (two teachers' runs of the same problems hold the same ids, and both are kept)
        self.run_starts = list(run_starts)
        # the passes made so far, by name, in order (a pass read piece by piece counts once)
        self.passes: list[str] = []
        self._scan: pl.LazyFrame | None = None

    @classmethod
    def of(cls, run_dirs: Sequence[str | os.PathLike]) -> Shards:
        """The shards of run dirs (or trajectory files), each checked for the schema."""
        rows: dict[Path, int] = {}
        starts = []
        for run_dir in run_dirs:
            starts.append(sum(rows.values()))
            rows.update(shard_rows([run_dir]))
        return cls(rows, starts or [0])

    @property
    def total(self) -> int:
        """Rows on disk, a row that a later one of the same id replaced included (what a scan numbers)."""
        return sum(self.rows.values())

    @cached_property
    def replaced(self) -> pl.Series:
        """The global row numbers of rows a later row of the same trajectory id in the same input replaces (a
        redone rollout, or a row two merged parts' files both hold): read once, as one trajectory, like every
        reader of a run."""
        starts = pl.Series(self.run_starts, dtype=pl.Int64)
        run = pl.lit(starts).search_sorted(pl.col(ROW_ID).cast(pl.Int64), side="right").alias("input")
        ids = self.scan("ids").select(ROW_ID, "id", run)
        later = ids.filter(pl.col(ROW_ID) != pl.col(ROW_ID).max().over("input", "id"))
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
