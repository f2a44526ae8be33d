"""Trajectories as a `RowTable`: a run dir's shards (or a trajectory file), indexed with polars.

The index holds what the lists filter and sort on, one row per trajectory id (a row redone on
resume, in a later shard, replaces the earlier one, as curate and filter read it), plus each
problem's pass rate over its samples (a failed rollout counts in none, as in `filter`).
"""

from __future__ import annotations

import bisect
import itertools
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from agentdata.agent.inspection import read_trajectories, trajectory_from_row
from agentdata.agent.rundir import ROW_ID, damaged_shard, scan_shards, shard_paths
from agentdata.records import Trajectory, records_to_table
from agentdata.view.table import ROW, Column, RowTable, contains, preview

assert ROW == ROW_ID  # one row number for the index, the search and the fetch

COLUMNS = (
    Column("id", "text"),
    Column("problem_id", "text", "problem"),
    Column("question", "text"),
    Column("final_answer", "text", "final answer"),
    Column("correct", "bool"),
    Column("finish_reason", "category", "finish reason"),
    Column("drop_reason", "category", "drop reason"),
    Column("source", "category"),
    Column("domain", "category"),
    Column("teacher", "category"),
    Column("format", "category", "protocol"),
    Column("num_tool_calls", "number", "tool calls"),
    Column("num_tool_errors", "number", "tool errors"),
    Column("num_turns", "number", "turns"),
    Column("completion_tokens", "number", "length (tokens)"),
    Column("total_s", "number", "time (s)"),
    Column("pass_rate", "number", "problem pass rate"),
    Column("samples", "number", "problem samples"),
)
SCALARS = (
    "id",
    "problem_id",
    "source",
    "domain",
    "teacher",
    "format",
    "correct",
    "finish_reason",
    "num_tool_calls",
    "num_tool_errors",
    "num_turns",
    "prompt_tokens",
    "completion_tokens",
)


class TrajectorySource:
    """Where the rows are: Parquet shards (scanned lazily) or a JSONL/JSON file (read into memory)."""

    def __init__(self, path: Path):
        self.path = path
        if path.is_dir() or path.suffix.lower() == ".parquet":
            self.files = shard_paths([path])  # checked for the trajectory schema, one line if foreign
            self.memory = None
        else:
            self.files = [path]
            self.memory = pl.from_arrow(records_to_table(read_trajectories(path), Trajectory)).with_row_index(ROW)
        self._starts: list[int] | None = None
        self.extra = [name for name in ("drop_reason",) if name in self.scan().collect_schema().names()]

    def scan(self) -> pl.LazyFrame:
        if self.memory is not None:
            return self.memory.lazy()
        return scan_shards(self.files)

    def collect(self, frame: pl.LazyFrame) -> pl.DataFrame:
        """Run a scan; a shard that cannot be read whole is named in one line."""
        try:
            return frame.collect()
        except pl.exceptions.PolarsError as error:
            raise damaged_shard(self.files, error) from None

    def fetch(self, row: int) -> Trajectory:
        """One trajectory whole, read from its own shard."""
        if self.memory is not None:
            values = self.memory.row(row, named=True)
            return trajectory_from_row(self.path, row + 1, {k: v for k, v in values.items() if k != ROW})
        starts = self._shard_starts()
        shard = bisect.bisect_right(starts, row) - 1
        local = row - starts[shard]
        try:
            values = pl.scan_parquet(self.files[shard]).slice(local, 1).collect().row(0, named=True)
        except Exception as error:  # noqa: BLE001 - a shard changed on disk since it was opened: one line
            raise damaged_shard([self.files[shard]], error) from None
        return trajectory_from_row(self.files[shard], local + 1, _canonical(values))

    def _shard_starts(self) -> list[int]:
        """Where each shard's rows begin in the row numbering (read once, from the shards' footers)."""
        if self._starts is None:
            try:
                counts = [pq.read_metadata(path).num_rows for path in self.files]
            except Exception as error:  # noqa: BLE001 - pyarrow raises several types for a broken file
                raise damaged_shard(self.files, error) from None
            self._starts = list(itertools.accumulate(counts, initial=0))[:-1]
        return self._starts


def _canonical(values: dict[str, Any]) -> dict[str, Any]:
    """polars gives every struct field; a canonical message leaves out the keys it does not have."""
    messages = [{key: value for key, value in message.items() if value is not None} for message in values["messages"]]
    for message in messages:
        if "tool_calls" in message:
            message["tool_calls"] = [_no_nulls(call) for call in message["tool_calls"]]
    return {**values, "messages": messages}


def _no_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _no_nulls(item) for key, item in value.items() if item is not None}
    return value


def index_frame(source: TrajectorySource) -> pl.DataFrame:
    """One row per trajectory: the list's columns, the problem's pass rate and its number of samples."""
    failed = pl.col("finish_reason") == "error"
    frame = source.scan().select(
        ROW,
        *SCALARS,
        *source.extra,
        preview(pl.col("question")).alias("question"),
        preview(pl.col("final_answer")).alias("final_answer"),
        # `timings` is JSON as json.dumps writes it; a pattern reads its one number at half a JSON parser's cost
        pl.col("timings")
        .str.extract(r'"total_s": (-?[0-9][0-9.eE+-]*)')
        .cast(pl.Float64, strict=False)
        .alias("total_s"),
    )
    frame = frame.filter(pl.col("id").is_last_distinct())  # a redone row (a later shard) replaces the first
    valid = (~failed).sum().over("problem_id")
    frame = frame.with_columns(
        pl.when(valid > 0).then((pl.col("correct") & ~failed).sum().over("problem_id") / valid).alias("pass_rate"),
        pl.len().over("problem_id").alias("samples"),
    )
    return source.collect(frame)


def trajectory_table(path: Path) -> RowTable:
    source = TrajectorySource(path)
    index = index_frame(source)

    def search(needle: str) -> pl.Series:
        matches = source.scan().select(ROW, "question", "messages").filter(_full_text(needle))
        return source.collect(matches.select(ROW))[ROW]

    def fetch(row: int) -> dict[str, Any]:
        return {"trajectory": source.fetch(row)}

    return RowTable(index, COLUMNS, search, fetch)


def _full_text(needle: str) -> pl.Expr:
    """The question, every message's text and every tool call's arguments (the code)."""
    message = pl.element()
    in_content = pl.col("messages").list.eval(contains(message.struct.field("content"), needle)).list.any()
    in_calls = (
        pl.col("messages")
        .list.eval(
            message.struct.field("tool_calls")
            .list.eval(contains(pl.element().struct.field("function").struct.field("arguments"), needle))
            .list.any()
        )
        .list.any()
    )
    return contains(pl.col("question"), needle) | in_content.fill_null(False) | in_calls.fill_null(False)
