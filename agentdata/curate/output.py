"""Write the kept rows (canonical, as collect stores them) in the form a consumer reads.

The rows are streamed twice in batches: once to find the Arrow type that holds every row's
messages and tools as plain nested structs (the union of the keys seen), once to write.
An Arrow struct has one set of fields per column, so a file where tools take differently
named arguments would read back with the other tools' keys added as nulls, which templates
then render (`"query": null`): that is refused with a pointer to the JSONL form.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from agentdata.errors import UserError
from agentdata.formats.forms import consumer_tools, hf_messages, openai_messages, target_form
from agentdata.records import atomic_write

BATCH_ROWS = 256
OPENAI_COLUMNS = ("messages", "tools")


def _without_nulls(value: Any) -> Any:
    """Arrow gives every struct field; a canonical message leaves out the keys it does not have."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def canonical_batches(source: Path) -> Iterator[list[dict[str, Any]]]:
    """The rows of a canonical SFT file, `tools` decoded from its JSON string, in batches."""
    for batch in pq.ParquetFile(source).iter_batches(batch_size=BATCH_ROWS):
        rows = []
        for row in batch.to_pylist():
            row["messages"] = _without_nulls(row["messages"])
            if isinstance(row.get("tools"), str):
                row["tools"] = json.loads(row["tools"])
            rows.append(row)
        yield rows


def hf_row(row: dict[str, Any], with_tools: bool = True) -> dict[str, Any]:
    format = row.get("format")
    try:
        messages = hf_messages(row["messages"], format)
    except json.JSONDecodeError as error:
        raise UserError(f"problem {row.get('problem_id')}: tool-call arguments are not JSON ({error.msg})") from None
    converted = {**row, "messages": messages, "tools": consumer_tools(row.get("tools"), format)}
    if not with_tools:
        del converted["tools"]
    return converted


def lists_no_tool(schema: pa.Schema) -> bool:
    """No row of the set lists a tool (e.g. all codeblock): its `tools` column holds only `[]` or nulls.

    Such a set is written without the column, as the openai form leaves the key out: the readers then
    give the template no tools (TRL's SFTTrainer `example.get("tools")`, verl's MultiTurnSFTDataset
    when `tools_key` is not a column), whereas `tools=[]` reaches the template as is, and Llama 3.1 /
    3.2's (`tools is not none`) then add their JSON function-calling instructions to a conversation
    that calls no function. A null cannot stand in: verl reads it as pandas' NA, which templates
    cannot iterate.
    """
    index = schema.get_field_index("tools")
    if index < 0:
        return True
    data_type = schema.field(index).type
    return pa.types.is_null(data_type) or (pa.types.is_list(data_type) and pa.types.is_null(data_type.value_type))


def _batch_type(rows: list[dict[str, Any]]) -> pa.Schema:
    try:
        return pa.Table.from_pylist(rows).schema
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise UserError(
            f"the SFT set cannot be written as Parquet structs ({error}); use --for openai (JSONL)"
        ) from None


def hf_schema(source: Path) -> pa.Schema:
    """One schema holding every batch: structs unified by the union of their fields."""
    schemas = [_batch_type([hf_row(row) for row in rows]) for rows in canonical_batches(source)]
    try:
        unified = pa.unify_schemas(schemas, promote_options="permissive")
        return pa.schema([field.with_type(ordered(field.type)) for field in unified])
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise UserError(
            f"tool arguments or schemas differ in type across rows ({error}); "
            "use --for openai (JSONL, arguments as JSON strings)"
        ) from None


# Struct fields in a fixed order (chat-message keys first, then tool-call and schema keys, then the
# rest by name), so two sets with the same keys have the same schema and load together.
FIELD_ORDER = (
    "role",
    "content",
    "reasoning_content",
    "tool_calls",
    "tool_call_id",
    "name",
    "id",
    "type",
    "function",
    "arguments",
    "description",
    "parameters",
    "properties",
    "required",
)


def ordered(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_struct(data_type):
        fields = sorted(
            (data_type.field(i) for i in range(data_type.num_fields)),
            key=lambda f: (FIELD_ORDER.index(f.name) if f.name in FIELD_ORDER else len(FIELD_ORDER), f.name),
        )
        return pa.struct([f.with_type(ordered(f.type)) for f in fields])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.list_(ordered(data_type.value_type))
    return data_type


def _free_form_parts(row: dict[str, Any]) -> list[Any]:
    """The values whose keys are the data's own (tool arguments, tool schemas)."""
    calls = [call for message in row["messages"] for call in message.get("tool_calls") or []]
    return [call["function"].get("arguments") for call in calls] + [row.get("tools")]


def _check_lossless(rows: list[dict[str, Any]], table: pa.Table, path: Path) -> None:
    for number, (row, stored) in enumerate(zip(rows, table.to_pylist()), start=1):
        if _free_form_parts(row) != _free_form_parts(stored):
            raise UserError(
                f"{path}: row {number}: the tools take differently named arguments, which one Parquet struct "
                "cannot hold without adding the others' keys as nulls (templates would render them); "
                "write one set per tool, or use --for openai (JSONL)"
            )


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
                _check_lossless(converted, table, target)
                writer.write_table(table)

    return atomic_write(target, write)


def write_openai(source: Path, target: Path) -> Path:
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as handle:
            for rows in canonical_batches(source):
                for row in rows:
                    line = {"messages": openai_messages(row["messages"], row.get("format"))}
                    tools = consumer_tools(row.get("tools"), row.get("format"))
                    if tools:
                        line["tools"] = tools
                    handle.write(json.dumps(line, ensure_ascii=False) + "\n")

    return atomic_write(target, write)


class EmptySFTSetError(UserError):
    """Nothing to write: `datasets` (so TRL) and verl cannot open a Parquet file with no rows."""


def write_sft_form(source: Path, target: Path, target_name: str = "hf") -> Path:
    """Write the canonical rows of `source` to `target` in the form `target_name` reads."""
    form = target_form(target_name)
    if pq.ParquetFile(source).metadata.num_rows == 0:
        raise EmptySFTSetError(
            f"{target}: the SFT set is empty, so nothing was written "
            "(a file with no rows cannot be loaded by datasets, TRL or verl)"
        )
    return write_openai(source, target) if form == "openai" else write_hf(source, target)
