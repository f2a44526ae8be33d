"""The messages of chosen rows, streamed from the shards in batches: what the steps that read a whole
trajectory in Python (health measures for old runs, a PRM, an LLM judge) are given, so only the rows
left by the cheap steps are read and never all at once."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import polars as pl

from agentdata.agent.shard_files import ROW_ID
from agentdata.curate.shards import Shards
from agentdata.records import strip_none

BATCH_ROWS = 1024
TRAJECTORY_COLUMNS = ("messages", "format", "domain", "question", "answer", "final_answer")


def trajectory_batches(
    shards: Shards,
    rows: pl.Series,
    columns: Sequence[str] = TRAJECTORY_COLUMNS,
    batch_rows: int = BATCH_ROWS,
    name: str = "trajectories",
) -> Iterator[list[dict[str, Any]]]:
    """Dicts of `ROW_ID` and `columns` for the given global row numbers, in input order, `batch_rows` at a time;
    messages in canonical form (no null keys). `name`: the pass's, as `Shards.scan` counts it."""
    if rows.is_empty():
        return
    wanted = pl.DataFrame({ROW_ID: rows}).lazy()
    frame = shards.scan(name).join(wanted, on=ROW_ID, how="semi", maintain_order="left").select(ROW_ID, *columns)
    for batch in frame.collect_batches(chunk_size=batch_rows):
        records = batch.to_dicts()
        for record in records:
            if "messages" in record:
                record["messages"] = strip_none(record["messages"] or [])
        yield records
