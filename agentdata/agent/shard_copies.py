"""Reading the parts of a sharded run as one: a shard copied into another part's files is read once.

The parts of a sharded run split the problems by id (agent/shards.py), so no trajectory is in two
parts; a shard whose ids were all read in another part's shards is a copy (a file copied into a
second part, or back), and reading it would count every row twice (17 rows for 12). It is left out,
with a warning. Within one part (or an unsharded run) a later shard may hold ids of an earlier one
on purpose: a redone rollout replaces the earlier (the readers keep the last written of an id).

A file that holds some rows of another part beside its own (two parts' shards merged into one file) is no
copy and stays; its rows are read as one trajectory each all the same, since every reader keeps the last
written row of an id (`superseded` names the rows a later one replaces, for readers that go row by row).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from agentdata.agent.shards import Shard, tag_of

logger = logging.getLogger(__name__)
_told: set[Path] = set()  # the copies already named: a command reads a run's file list more than once


def without_copies(shards: Sequence[Path]) -> list[Path]:
    """`shards` (one run's, in order) less every file whose trajectory ids were all read in another part's."""
    if len({tag_of(shard.name) for shard in shards}) < 2:
        return list(shards)  # one part, or an unsharded run: nothing is merged
    read_in: dict[str, Shard | None] = {}  # id -> the part it was first read in
    kept: list[Path] = []
    for shard in shards:
        part, ids = tag_of(shard.name), _ids(shard)
        if ids is None:  # unreadable: the schema check names it
            kept.append(shard)
            continue
        if ids and all(row_id in read_in and read_in[row_id] != part for row_id in ids):
            if shard not in _told:
                _told.add(shard)
                logger.warning("%s holds only trajectories of another part (a copy): read once", shard)
            continue
        for row_id in ids:
            read_in.setdefault(row_id, part)
        kept.append(shard)
    return kept


def superseded(shards: Sequence[Path]) -> dict[Path, set[int]]:
    """Per shard (in read order), the numbers of its rows whose trajectory id a later row writes again."""
    ids = {shard: _ids(shard) or [] for shard in shards}
    last = {row_id: (shard, number) for shard in shards for number, row_id in enumerate(ids[shard])}
    kept = {(shard, number) for shard, number in last.values()}
    return {shard: {n for n in range(len(ids[shard])) if (shard, n) not in kept} for shard in shards}


def _ids(shard: Path) -> list[str] | None:
    try:
        return pq.read_table(shard, columns=["id"]).column("id").to_pylist()
    except Exception:  # pyarrow raises several types for a broken or foreign file
        return None
