"""The responses of a benchmark run as one table: the columns the metrics read, one row per response.

Built by polars straight from a run dir's shards (or from Trajectory records, through the same
Arrow columns), so scoring a million responses builds no Python object per response: what each
metric needs from the messages (the characters the model wrote), the metadata (a code problem's
test results) and the timings is computed as column expressions.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl

from agentdata.records import Trajectory, records_to_table

RESPONSE_COLUMNS = (
    "id",
    "problem_id",
    "answer",
    "source",
    "domain",
    "final_answer",
    "correct",
    "num_tool_calls",
    "num_tool_errors",
    "completion_tokens",
    "finish_reason",
    "chars",  # what the model wrote: assistant text and the arguments of its calls
    "test_s",  # seconds of test runs (code problems), 0 elsewhere
    "tests_fraction",  # the share of tests passed; null when the response holds no test result
)


def response_columns(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The metric columns of trajectory rows (the stored Trajectory columns)."""
    tests = pl.col("metadata").str.json_path_match("$.tests")
    fraction = pl.col("metadata").str.json_path_match("$.tests.fraction").cast(pl.Float64, strict=False)
    stored = [name for name in RESPONSE_COLUMNS if name not in ("chars", "test_s", "tests_fraction")]
    return frame.select(
        *stored,
        _written_chars().alias("chars"),
        pl.col("timings").str.json_path_match("$.test_s").cast(pl.Float64, strict=False).fill_null(0.0).alias("test_s"),
        pl.when(tests.str.starts_with("{")).then(fraction.fill_null(0.0)).alias("tests_fraction"),
    )


def _written_chars() -> pl.Expr:
    """Characters of every assistant message's content and of its calls' arguments."""
    message = pl.element()
    arguments = message.struct.field("tool_calls").list.eval(
        pl.element().struct.field("function").struct.field("arguments").fill_null("").str.len_chars()
    )
    per_message = message.struct.field("content").fill_null("").str.len_chars() + arguments.list.sum().fill_null(0)
    written = pl.when(message.struct.field("role") == "assistant").then(per_message).otherwise(0)
    return pl.col("messages").list.eval(written).list.sum().fill_null(0).cast(pl.Int64)


def run_responses(shards: Sequence[Path], problem_ids: Iterable[str], samples: int) -> pl.DataFrame:
    """The responses in `shards` to the given problems, the first `samples` of each (by sample index)."""
    if not shards:
        return pl.DataFrame(schema=_schema())
    wanted = pl.Series(list(problem_ids), dtype=pl.String).implode()
    index = pl.col("sampling").str.json_path_match("$.sample_index").cast(pl.Int64, strict=False).fill_null(0)
    scan = pl.scan_parquet([str(path) for path in shards]).filter(
        pl.col("problem_id").is_in(wanted) & (index < samples)
    )
    return response_columns(scan).collect()


def trajectory_responses(trajectories: Iterable[Trajectory]) -> pl.DataFrame:
    """The same table from records (through their Parquet columns, so both paths compute alike)."""
    rows = list(trajectories)
    if not rows:
        return pl.DataFrame(schema=_schema())
    return response_columns(pl.from_arrow(records_to_table(rows, Trajectory)).lazy()).collect()


def _schema() -> dict[str, pl.DataType]:
    strings = ("id", "problem_id", "answer", "source", "domain", "final_answer", "finish_reason")
    integers = ("num_tool_calls", "num_tool_errors", "completion_tokens", "chars")
    schema: dict[str, pl.DataType] = {name: pl.String for name in strings} | {name: pl.Int64 for name in integers}
    schema |= {"correct": pl.Boolean, "test_s": pl.Float64, "tests_fraction": pl.Float64}
    return {name: schema[name] for name in RESPONSE_COLUMNS}
