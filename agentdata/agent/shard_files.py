"""The trajectory shards of many run dirs read as one: each file checked against the trajectory schema, all
scanned as one lazy frame with a global row number, and the damaged file named when a scan fails.

`RunDir` (rundir.py) finds a run's shards; this module reads any list of them (curate, filter, view, regrade).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.errors import InputFileError
from agentdata.records import Trajectory, arrow_schema

ROW_ID = "_row"
TRAJECTORY_SCHEMA = arrow_schema(Trajectory)  # built once: each shard's schema is checked against it
REQUIRED_COLUMNS = tuple(TRAJECTORY_SCHEMA.names)


def check_shards(paths: Sequence[Path]) -> None:
    """Each file is a readable trajectory shard: an `InputFileError` naming the first that is not."""
    for path in paths:
        check_schema(path)


def scan_shards(paths: Sequence[Path]) -> pl.LazyFrame:
    """All shards as one lazy frame with a global row number, stable across scans of the same list."""
    return pl.scan_parquet([str(path) for path in paths], row_index_name=ROW_ID)


def damaged_shard(paths: Sequence[Path], error: Exception) -> Exception:
    """After a scan of many shards failed: the error naming the first shard that cannot be read whole,
    or `error` itself when each reads alone (then the fault is not in the files)."""
    for path in paths:
        try:
            pq.read_table(path)
        except Exception as damage:  # pyarrow raises several types for a broken file
            return InputFileError(
                path,
                f"damaged Parquet data ({' '.join(str(damage).split())[:200]}); move this shard aside or restore it",
            )
    return error


def check_schema(path: Path) -> int:
    """The shard's row count, after checking it is a trajectory shard (its footer is read once, for both)."""
    try:
        footer = pq.read_metadata(path)
        schema = footer.schema.to_arrow_schema()
    except Exception as error:  # pyarrow raises several types for a broken file
        raise InputFileError(path, f"not a readable Parquet file ({' '.join(str(error).split())[:200]})") from None
    missing = [name for name in REQUIRED_COLUMNS if name not in schema.names]
    if missing:
        raise InputFileError(path, f"not a trajectory shard: missing columns {missing}")
    for expected in TRAJECTORY_SCHEMA:
        actual = schema.field(expected.name).type if schema.get_field_index(expected.name) >= 0 else None
        if actual is None or not _same_shape(actual, expected.type):
            raise InputFileError(
                path, f"not a trajectory shard: column {expected.name!r} is {actual}, expected {expected.type}"
            )
    return footer.num_rows


def _same_shape(actual: pa.DataType, expected: pa.DataType) -> bool:
    """Types that read the same: large and small strings/lists alike, struct fields matched by name (a field
    added to the schema later, such as a message's `reasoning_content`, may be missing from older shards)."""
    if pa.types.is_string(expected):
        return pa.types.is_string(actual) or pa.types.is_large_string(actual) or pa.types.is_string_view(actual)
    if pa.types.is_integer(expected):
        return pa.types.is_integer(actual)
    if pa.types.is_list(expected):
        return (pa.types.is_list(actual) or pa.types.is_large_list(actual)) and _same_shape(
            actual.value_type, expected.value_type
        )
    if pa.types.is_struct(expected):
        if not pa.types.is_struct(actual):
            return False
        fields = {actual.field(index).name: actual.field(index).type for index in range(actual.num_fields)}
        return all(_same_shape(fields[field.name], field.type) for field in expected if field.name in fields)
    return actual == expected
