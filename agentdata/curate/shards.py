"""Find and scan the trajectory shards of one or more collect run dirs, lazily."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import polars as pl
import pyarrow.parquet as pq

from agentdata.errors import InputFileError
from agentdata.inspection import trajectory_files
from agentdata.records import Trajectory, arrow_schema

ROW_ID = "_row"
REQUIRED_COLUMNS = tuple(arrow_schema(Trajectory).names)


def shard_paths(run_dirs: Sequence[str | os.PathLike]) -> list[Path]:
    """Every trajectory shard of the given run dirs (or Parquet files), checked for the schema."""
    paths: list[Path] = []
    for run_dir in map(Path, run_dirs):
        if not run_dir.exists():
            raise InputFileError(run_dir, "no such file or directory")
        shards = trajectory_files(run_dir)
        if not shards:
            raise InputFileError(run_dir, "no trajectory shards (expected trajectories/part-*.parquet)")
        paths.extend(shards)
    for path in paths:
        _check_schema(path)
    return paths


def scan_shards(paths: Sequence[Path]) -> pl.LazyFrame:
    """All shards as one lazy frame with a global row number, stable across scans of the same list."""
    return pl.scan_parquet([str(path) for path in paths], row_index_name=ROW_ID)


def _check_schema(path: Path) -> None:
    try:
        names = set(pq.read_schema(path).names)
    except Exception as error:  # pyarrow raises several types for a broken file
        raise InputFileError(path, f"not a readable Parquet file ({error})") from None
    missing = [name for name in REQUIRED_COLUMNS if name not in names]
    if missing:
        raise InputFileError(path, f"not a trajectory shard: missing columns {missing}")
