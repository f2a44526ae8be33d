"""A collect run dir on disk: crash-safe trajectory shards, a manifest and stats.

    run_dir/manifest.json                 settings, versions, counts
    run_dir/stats.json                    the summary of the last finished pass
    run_dir/trajectories/part-NNNNN.parquet

Shards are written whole to a temporary file and renamed into place, so a killed run
leaves only complete shards behind. A trajectory's id is `<problem_id>-<sample_index>`,
so a resumed run knows exactly which ones are done and writes none twice.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable, Sequence

import polars as pl
import pyarrow.parquet as pq

from agentdata.errors import InputFileError, UserError
from agentdata.records import Trajectory, arrow_schema, read_records, write_json, write_parquet

SHARD_PATTERN = re.compile(r"part-(\d{5,})\.parquet$")
# Settings that change what a trajectory is: a resumed run must not mix two of them.
IDENTITY_KEYS = ("teacher", "protocol", "max_tool_calls", "max_turns", "max_new_tokens", "temperature", "top_p",
                 "seed", "system_prompt", "tool_output_chars")


class RunDir:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.shard_dir = self.path / "trajectories"
        self.manifest_path = self.path / "manifest.json"
        self.stats_path = self.path / "stats.json"

    # ---------------------------------------------------------------- reading
    def shards(self) -> list[Path]:
        """The committed shards, in write order (temp files of an unfinished write are not shards)."""
        if not self.shard_dir.is_dir():
            return []
        return sorted(p for p in self.shard_dir.iterdir() if SHARD_PATTERN.search(p.name))

    def done_ids(self) -> set[str]:
        ids: set[str] = set()
        for shard in self.shards():
            ids.update(pq.read_table(shard, columns=["id"]).column("id").to_pylist())
        return ids

    def trajectories(self) -> list[Trajectory]:
        return [t for shard in self.shards() for t in read_records(shard, Trajectory)]

    def manifest(self) -> dict[str, Any] | None:
        if not self.manifest_path.exists():
            return None
        return json.loads(self.manifest_path.read_text(encoding="utf-8"))

    # ---------------------------------------------------------------- writing
    def prepare(self, settings: dict[str, Any], extra: dict[str, Any]) -> None:
        """Create the dir or check that a resumed run uses the same settings; drop stale temp files."""
        previous = self.manifest()
        if previous is not None:
            changed = {key: (previous["settings"].get(key), settings.get(key)) for key in IDENTITY_KEYS
                       if previous["settings"].get(key) != settings.get(key)}
            if changed:
                described = ", ".join(f"{key}: {old!r} → {new!r}" for key, (old, new) in changed.items())
                raise UserError(f"{self.path} holds a run with other settings ({described}); "
                                "use another --out or the same settings")
        self.shard_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.shard_dir.glob(".part-*.tmp"):
            stale.unlink(missing_ok=True)  # left by a run killed mid-write; its rows were never committed
        self.write_manifest({"settings": settings, **extra})

    def write_manifest(self, manifest: dict[str, Any]) -> None:
        write_json(self.manifest_path, manifest)

    def write_stats(self, stats: dict[str, Any]) -> None:
        write_json(self.stats_path, stats)

    def next_shard_path(self) -> Path:
        numbers = [int(SHARD_PATTERN.search(p.name).group(1)) for p in self.shards()]
        return self.shard_dir / f"part-{max(numbers, default=-1) + 1:05d}.parquet"

    def write_shard(self, trajectories: Iterable[Trajectory]) -> Path:
        return write_parquet(list(trajectories), self.next_shard_path(), Trajectory)


# ------------------------------------------------------------------ reading many run dirs at once
ROW_ID = "_row"
REQUIRED_COLUMNS = tuple(arrow_schema(Trajectory).names)


def trajectory_files(path: str | os.PathLike) -> list[Path]:
    """The trajectory shards of a run dir, or the file itself."""
    path = Path(path)
    return RunDir(path).shards() if path.is_dir() else [path]


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
