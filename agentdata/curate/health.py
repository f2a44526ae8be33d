"""The rollout health measures of the rows curate is filtering, as `health_<measure>` columns.

Trajectories collected since the measures were stored carry them in `metadata.health`, read here
as a column (no message is read); older ones, or ones measured by another version of the checks,
are measured now from their messages (formats.health), streamed in batches.
"""

from __future__ import annotations

import polars as pl

from agentdata.agent.shard_files import ROW_ID
from agentdata.curate.messages import trajectory_batches
from agentdata.curate.shards import Shards
from agentdata.formats.health import HEALTH_KEY, HEALTH_VERSION, MEASURE_NAMES, measure_health
from agentdata.steps.health import COLUMN_PREFIX, HEALTH_COLUMNS

VERSION_COLUMN = "_health_version"
_STORED_TYPE = pl.Struct({"version": pl.Int64, **{name: pl.Int64 for name in MEASURE_NAMES}})


def stored_health_columns() -> list[pl.Expr]:
    """The stored measures as columns (null where a trajectory has none), read from the metadata JSON."""
    stored = pl.col("metadata").str.json_path_match(f"$.{HEALTH_KEY}").str.json_decode(dtype=_STORED_TYPE)
    return [
        stored.struct.field("version").alias(VERSION_COLUMN),
        *(stored.struct.field(name).alias(COLUMN_PREFIX + name) for name in MEASURE_NAMES),
    ]


def with_health(shards: Shards, features: pl.DataFrame) -> pl.DataFrame:
    """`features` (with the stored columns) where every row has this version's measures; measured where missing."""
    stale = features.filter(pl.col(VERSION_COLUMN).fill_null(0) != HEALTH_VERSION)[ROW_ID]
    measured = []
    for batch in trajectory_batches(shards, stale, ("messages", "format", "domain"), name="health"):
        for row in batch:
            measures = measure_health(row["messages"], row["format"], row["domain"])
            measured.append({ROW_ID: row[ROW_ID], **{COLUMN_PREFIX + k: v for k, v in vars(measures).items()}})
    if measured:
        fresh = pl.DataFrame(
            measured, schema={ROW_ID: features.schema[ROW_ID], **dict.fromkeys(HEALTH_COLUMNS, pl.Int64)}
        )
        features = features.update(fresh, on=ROW_ID, how="left")
    return features.drop(VERSION_COLUMN)
