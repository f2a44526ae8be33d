"""Trajectories as a `RowTable`: a run dir's shards (or a trajectory file), indexed with polars.

The index holds what the lists filter and sort on, one row per trajectory id (a row redone on
resume, in a later shard, replaces the earlier one, as curate and filter read it), plus each
problem's pass rate over its samples (a failed rollout counts in none, as in `filter`). A run dir's index
is kept beside it with the home page's numbers and read back while its shards stay as they were (index_cache.py).
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq

from agentdata.agent.inspection import read_trajectories, trajectory_from_row
from agentdata.agent.rundir import shard_paths, trajectory_files
from agentdata.agent.shard_files import ROW_ID, check_shards, damaged_shard, scan_shards
from agentdata.records import Trajectory, records_to_table
from agentdata.view.index_cache import IndexCache
from agentdata.view.search_index import SearchIndex
from agentdata.view.table import ROW, Column, RowTable, contains, preview

assert ROW == ROW_ID  # one row number for the index, the search and the fetch
log = logging.getLogger("agentdata.view")

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
    """Where the rows are: Parquet shards (scanned lazily) or a JSONL/JSON file (read into memory). `files`: a run
    dir's shards, listed already (their schemas are checked unless `checked`)."""

    def __init__(self, path: Path, files: Sequence[Path] | None = None, checked: bool = False):
        self.path = path
        self.memory = None
        if files is not None:
            self.files = list(files)
            if not checked:
                check_shards(self.files)  # each one a trajectory shard, one line naming the first that is not
        elif path.is_dir() or path.suffix.lower() == ".parquet":
            self.files = shard_paths([path])  # checked for the trajectory schema, one line if foreign
        else:
            self.files = [path]
            self.memory = pl.from_arrow(records_to_table(read_trajectories(path), Trajectory)).with_row_index(ROW)
        self._starts: list[int] | None = None

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
    extra = [name for name in ("drop_reason",) if name in source.scan().collect_schema().names()]
    frame = source.collect(
        source.scan().select(
            ROW,
            *SCALARS,
            *extra,
            preview(pl.col("question")).alias("question"),
            preview(pl.col("final_answer")).alias("final_answer"),
            total_seconds(pl.col("timings")).alias("total_s"),
        )
    )
    # A redone row (a later shard) replaces the first. Distinct hashes are distinct ids, so the exact (and dearer)
    # test on the ids themselves runs only where two hashes are equal: a resumed run, or a collision.
    if frame["id"].hash().n_unique() < frame.height:
        frame = frame.filter(pl.col("id").is_last_distinct())
    failed = pl.col("finish_reason") == "error"
    per_problem = pl.struct(valid=(~failed).sum(), solved=(pl.col("correct") & ~failed).sum(), samples=pl.len()).over(
        "problem_id"
    )  # one pass over the problems for the three numbers
    problem = pl.col("_problem").struct
    return (
        frame.with_columns(per_problem.alias("_problem"))
        .with_columns(
            pl.when(problem.field("valid") > 0)
            .then(problem.field("solved") / problem.field("valid"))
            .alias("pass_rate"),
            problem.field("samples").cast(pl.UInt32).alias("samples"),
        )
        .drop("_problem")
    )


TOTAL_KEY = '"total_s": '


def total_seconds(timings: pl.Expr) -> pl.Expr:
    """`timings` is JSON as json.dumps writes it: its number after the key, found as a literal and read from the
    few characters after it (a third of a pattern over the whole text, a fifth of a JSON parser)."""
    after = timings.str.slice(timings.str.find(TOTAL_KEY, literal=True) + len(TOTAL_KEY), 32)
    return after.str.extract(r"^(-?[0-9][0-9.eE+-]*)").cast(pl.Float64, strict=False)


def trajectory_stats(index: pl.DataFrame) -> dict[str, Any]:
    """The run's numbers on the home page."""
    count = index.height
    if not count:
        return {"trajectories": 0}
    calls = int(index["num_tool_calls"].sum())
    return {
        "trajectories": count,
        # each problem's rows hold its number of samples: their reciprocals add up to one per problem (rounded, the
        # exact count), without hashing a million ids again
        "problems": round(float((1 / index["samples"]).sum())),
        "accuracy": float(index["correct"].mean()),
        "mean_tool_calls": calls / count,
        "tool_error_rate": int(index["num_tool_errors"].sum()) / max(calls, 1),
        "mean_completion_tokens": float(index["completion_tokens"].mean()),
        "finish_reasons": dict(index.group_by("finish_reason").len().sort("finish_reason").rows()),
        "solved_problems": index.filter(pl.col("correct")).select("problem_id").n_unique(),
    }


class TrajectoryTable(RowTable):
    """A run's rows, with the run's stats; `summary` (the facets and stats, as JSON gives them back) when they were
    kept with its index. `cache`: a run dir's kept files, to write after the URL (`keep`) and to search with."""

    def __init__(
        self,
        index: pl.DataFrame,
        source: TrajectorySource,
        summary: dict[str, Any] | None = None,
        origin: str = "built",
        cache: IndexCache | None = None,
    ):
        def fetch(row: int) -> dict[str, Any]:
            return {"trajectory": source.fetch(row)}

        super().__init__(index, COLUMNS, self._search_rows, fetch)
        self._source = source
        self._summary = summary
        self.origin = origin
        self._cache = cache
        self._index_kept = origin == "read back"
        # A kept search index is trusted once `keep` has checked its pages (after the URL); a search scans until then.
        self._kept_search = cache.load_search() if cache is not None else None
        self.search_index: SearchIndex | None = None

    def _search_rows(self, needle: str) -> pl.Series:
        """From the search index when it is ready and the needle long enough for it; else by scanning the shards."""
        index = self.search_index
        try:
            found = index.rows(needle) if index is not None else None
        except sqlite3.Error as error:  # damaged on disk while served: scan from now on, never a failed search
            log.warning("the search index of %s cannot be read (%s): searching by scanning", self._source.path, error)
            self.search_index = found = None
        if found is not None:
            return found
        matches = self._source.scan().select(ROW, "question", "messages").filter(_full_text(needle))
        return self._source.collect(matches.select(ROW))[ROW]

    @property
    def pending(self) -> bool:
        """Something is left to keep beside the run dir (`keep`)."""
        search = self.search_index
        return self._cache is not None and (not self._index_kept or search is None or not search.warm)

    def keep(self, stop: threading.Event, search: bool = True) -> None:
        """Keep the index and build the search index beside the run dir, after the URL: the list is served meanwhile
        (a search scans the shards until its index is ready); then read the search index's postings, so that the
        first search does not. Where the run dir cannot take them, nothing is kept."""
        if self._cache is None:
            return
        if not self._index_kept:
            self._index_kept = True  # tried once: a run dir that cannot take it is not tried again
            self.origin = "built, kept" if self._cache.store(self.index, self.summary()) else "built"
        if search and self._kept_search is not None:
            kept, self._kept_search = self._kept_search, None
            if kept.intact():
                self.search_index = kept
            else:
                kept.close()
                log.warning("the search index kept in %s is damaged: building it again", self._cache.search_path)
        if search and self.search_index is None and self.origin != "built":
            self.search_index = self._cache.store_search(stop)
        if search and self.search_index is not None:
            self.search_index.warm_up()

    def summary(self) -> dict[str, Any]:
        """The facet counts and the stats, as the page receives them (JSON), whether built now or kept."""
        if self._summary is None:
            self._summary = json.loads(json.dumps({"facets": self.facets(), "stats": trajectory_stats(self.index)}))
        return self._summary

    def facets(self) -> dict[str, list[list[Any]]]:
        return self._summary["facets"] if self._summary is not None else super().facets()

    def stats(self) -> dict[str, Any]:
        return self.summary()["stats"]


def trajectory_table(path: Path) -> TrajectoryTable:
    """A run dir's index is read from beside it when it was built from the shards as they are (index_cache.py),
    else built (and kept there by `keep`, after the URL, for the next open); a trajectory file's is built."""
    files = trajectory_files(path) if path.is_dir() else []
    if not files:
        source = TrajectorySource(path)  # a trajectory file; or a folder without shards, named in one line
        return TrajectoryTable(index_frame(source), source)
    cache = IndexCache(path, files)
    kept = cache.load()
    if kept is not None:
        source = TrajectorySource(path, files, checked=True)
        return TrajectoryTable(kept[0], source, kept[1], origin="read back", cache=cache)
    source = TrajectorySource(path, files)
    return TrajectoryTable(index_frame(source), source, origin="built, keeping", cache=cache)


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
