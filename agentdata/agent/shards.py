"""Sharded runs: `--shard I/N` runs the problems of one of N parts, into files of its own in one run dir.

A problem belongs to shard `sha1(problem id) mod N`: the same on every machine and whatever else the
problem file holds, so N processes given the same problems (or not) never make the same trajectory.
Every part writes only files whose names start with its tag, so N processes on N machines can fill one
run dir on shared storage, each resumable on its own:

    run_dir/trajectories/shard-00001-of-00004.part-00000.parquet
    run_dir/shard-00001-of-00004.journal.jsonl     (see journal.py)
    run_dir/shard-00001-of-00004.manifest.json     its settings, its shard, how many trajectories it makes
    run_dir/shard-00001-of-00004.stats.json        its summary, when it finished

Everything that reads a run dir reads the parts as one run (`RunDir(path).shards()` lists every part's
shards), and `shard_status.read_sharded` says which parts are missing or unfinished.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypeVar

from agentdata.settings import SettingValue

MAX_SHARDS = 99_999  # five digits in the file names
TAG = re.compile(r"^shard-(\d{5})-of-(\d{5})\.")
T = TypeVar("T")


def shard_index(problem_id: str, count: int) -> int:
    """The shard a problem belongs to, of `count` (a stable digest: Python's hash() differs per process)."""
    return int(hashlib.sha1(problem_id.encode("utf-8")).hexdigest()[:12], 16) % count


class Shard(tuple, SettingValue):
    """`I/N`: part I (0 to N-1) of N. A tuple `(index, count)`, recorded as the text `I/N`."""

    example = "0/4"

    def __new__(cls, index: Any, count: Any = None) -> Shard:
        if count is None:  # Shard(iterable), as dataclasses.asdict rebuilds tuples
            index, count = tuple(index)
        index, count = _whole(index), _whole(count)
        if not 1 <= count <= MAX_SHARDS:
            raise ValueError(f"needs 1 <= N <= {MAX_SHARDS} shards (e.g. {cls.example})")
        if not 0 <= index < count:
            raise ValueError(f"shard I counts from 0 to N-1: {index} is not one of 0..{count - 1}")
        return super().__new__(cls, (index, count))

    @classmethod
    def parse(cls, value: Any) -> Shard:
        """`"1/4"`, `[1, 4]` or another shard."""
        if isinstance(value, str):
            index, slash, count = value.partition("/")
            if not slash:
                raise ValueError(f"expected I/N, the shard and how many there are (e.g. {cls.example})")
            return cls(index, count)
        if isinstance(value, (list, tuple)) and len(value) == 2:
            return cls(*value)
        raise ValueError(f"expected I/N, the shard and how many there are (e.g. {cls.example})")

    @property
    def index(self) -> int:
        return self[0]

    @property
    def count(self) -> int:
        return self[1]

    @property
    def tag(self) -> str:
        """What every file of this part starts with."""
        return f"shard-{self.index:05d}-of-{self.count:05d}"

    def owns(self, problem_id: str) -> bool:
        return shard_index(problem_id, self.count) == self.index

    def select(self, items: Sequence[T], key: Any = lambda problem: problem.id) -> list[T]:
        """The items (problems) of this shard, in their order."""
        return [item for item in items if self.owns(key(item))]

    def as_setting(self) -> str:
        return str(self)

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def __repr__(self) -> str:
        return f"Shard({self.index}, {self.count})"

    def __reduce__(self):  # pickles (Ray tasks, worker processes) as itself
        return (type(self), (self.index, self.count))


def _whole(value: Any) -> int:
    try:
        if isinstance(value, bool):
            raise TypeError(value)
        number = int(value.strip()) if isinstance(value, str) else value
        if not isinstance(number, int):
            number = int(number) if float(number).is_integer() else None
    except (TypeError, ValueError):
        number = None
    if number is None:
        raise ValueError(f"expected I/N as two whole numbers (e.g. {Shard.example})")
    return number


def tag_of(name: str) -> Shard | None:
    """The shard a run-dir file name belongs to, or None (a file of an unsharded run)."""
    match = TAG.match(name)
    if not match:
        return None
    try:
        return Shard(int(match[1]), int(match[2]))
    except ValueError:
        return None


def tags_in(path: Path) -> set[Shard]:
    """Every shard with a file in the run dir `path` (manifest, journal or trajectory shard)."""
    names = [entry.name for entry in path.iterdir()] if path.is_dir() else []
    shard_dir = path / "trajectories"
    if shard_dir.is_dir():
        names += [entry.name for entry in shard_dir.iterdir()]
    return {shard for shard in map(tag_of, names) if shard is not None}
