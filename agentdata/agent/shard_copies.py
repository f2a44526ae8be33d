"""A run dir never holds two rows for one trajectory id (a rerun takes the old row out before it writes the new
one), so a shard whose ids are all in an earlier shard is a copy: a file copied into a second part of a sharded
run, or beside the original. Reading a run as one leaves such a copy out instead of counting its rows twice;
a shard that shares only some ids with another is refused in one line, since no reading of it is right.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from agentdata.errors import UserError

logger = logging.getLogger(__name__)
_told: set[Path] = set()  # the copies already named: a command reads a run's file list more than once


def without_copies(shards: Sequence[Path]) -> list[Path]:
    """`shards` (one run's, in order) less every file whose trajectory ids were all read in an earlier one."""
    seen: dict[str, Path] = {}  # id -> the shard it was first read in
    kept: list[Path] = []
    for shard in shards:
        ids = _ids(shard)
        if ids is None:  # unreadable: the schema check names it
            kept.append(shard)
            continue
        earlier = [seen[row_id] for row_id in ids if row_id in seen]
        if earlier and len(earlier) == len(ids):
            if shard not in _told:
                _told.add(shard)
                logger.warning("%s holds only trajectories already in %s (a copy): read once", shard, earlier[0])
            continue
        if earlier:
            raise UserError(
                f"{shard} shares {len(earlier):,} of its {len(ids):,} trajectory ids with {earlier[0]}: a run never "
                "holds one trajectory twice; move the stray file aside"
            )
        seen.update(dict.fromkeys(ids, shard))
        kept.append(shard)
    return kept


def _ids(shard: Path) -> list[str] | None:
    try:
        return pq.read_table(shard, columns=["id"]).column("id").to_pylist()
    except Exception:  # pyarrow raises several types for a broken or foreign file
        return None
