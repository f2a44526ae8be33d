"""The baseline of bench_curate.py's writer comparison: the `hf` SFT-set writer as it was up to 8ec58c5,
row by row in Python (kept here unchanged in what it does, so the same run can measure both).

The rows are streamed twice in batches of 256: once to find the Arrow type that holds every row's
messages and tools (the union of the keys seen), once to write; every row's free-form parts are
compared with what the table stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.errors import UserError
from agentdata.formats.forms import consumer_tools, hf_messages
from agentdata.formats.sft_set.arrow_nest import ordered
from agentdata.records import atomic_write, strip_none


def canonical_batches(source: Path) -> Iterator[list[dict[str, Any]]]:
    """The rows of a canonical SFT file, `tools` decoded from its JSON string, in batches of 256."""
    for batch in pq.ParquetFile(source).iter_batches(batch_size=256):
        rows = []
        for row in batch.to_pylist():
            row["messages"] = strip_none(row["messages"])
            if isinstance(row.get("tools"), str):
                row["tools"] = json.loads(row["tools"])
            rows.append(row)
        yield rows


def hf_row(row: dict[str, Any], with_tools: bool = True) -> dict[str, Any]:
    try:
        messages = hf_messages(row["messages"], row.get("format"))
    except json.JSONDecodeError as error:
        raise UserError(f"problem {row.get('problem_id')}: tool-call arguments are not JSON ({error.msg})") from None
    converted = {**row, "messages": messages, "tools": consumer_tools(row.get("tools"), row.get("format"))}
    if not with_tools:
        del converted["tools"]
    return converted


def lists_no_tool(schema: pa.Schema) -> bool:
    index = schema.get_field_index("tools")
    if index < 0:
        return True
    data_type = schema.field(index).type
    return pa.types.is_null(data_type) or (pa.types.is_list(data_type) and pa.types.is_null(data_type.value_type))


def hf_schema(source: Path) -> pa.Schema:
    schemas = [pa.Table.from_pylist([hf_row(row) for row in rows]).schema for rows in canonical_batches(source)]
    unified = pa.unify_schemas(schemas, promote_options="permissive")
    return pa.schema([field.with_type(ordered(field.type)) for field in unified])


def _free_form_parts(row: dict[str, Any]) -> list[Any]:
    calls = [call for message in row["messages"] for call in message.get("tool_calls") or []]
    return [call["function"].get("arguments") for call in calls] + [row.get("tools")]


def write_hf(source: Path, target: Path) -> Path:
    schema = hf_schema(source)
    with_tools = not lists_no_tool(schema)
    if "tools" in schema.names and not with_tools:
        schema = schema.remove(schema.get_field_index("tools"))

    def write(tmp: str) -> None:
        with pq.ParquetWriter(tmp, schema) as writer:
            for rows in canonical_batches(source):
                converted = [hf_row(row, with_tools) for row in rows]
                table = pa.Table.from_pylist(converted, schema=schema)
                for number, (row, stored) in enumerate(zip(converted, table.to_pylist()), start=1):
                    if _free_form_parts(row) != _free_form_parts(stored):
                        raise UserError(f"{target}: row {number}: differently named arguments")
                writer.write_table(table)

    return atomic_write(target, write)
