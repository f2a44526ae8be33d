"""The `hf` form of an SFT set (formats/forms.py says what it holds), written column by column.

Two passes over the canonical rows, each in batches of Arrow columns, none building a Python
object per row:
1. `survey_set` reads every column but the message texts: the one Arrow type that holds every tool
   call's arguments (their JSON decoded, the union of the keys seen), the tool schemas (few
   distinct texts, decoded in Python), and which message fields are ever set (a field no row
   sets is left out, so the readers see no such key);
2. `hf_batch` converts each batch once: arguments decoded into that type, a plain-text protocol's
   rows made plain turns (`Protocol.plain_turns_arrow`; codeblock's over Arrow, codeblock_form.py),
   and a check that nothing changed on the way (json_arrow.first_changed); each batch is one row
   group of the file.

An Arrow struct has one set of fields per column, so a set whose tools take differently named
arguments would read back with the other tools' keys added as nulls, which templates then render
(`"query": null`): that is refused, with a pointer to the JSONL form.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from agentdata.errors import UserError
from agentdata.formats import protocol_of
from agentdata.formats.base import Protocol
from agentdata.formats.sft_set.arrow_nest import (
    list_values,
    ordered,
    rebuilt_list,
    rebuilt_struct,
    rows_of,
    small_offsets,
)
from agentdata.formats.sft_set.json_arrow import (
    MixedTypesError,
    NotJSONError,
    common_type,
    decode,
    first_changed,
    readable_type,
)
from agentdata.records import write_parquet_tables

BATCH_BYTES = 64 << 20  # canonical rows read and written at a time (one row group), by their size in memory


@dataclass
class Survey:
    """What every row of the set must share: one Arrow type per column."""

    arguments: pa.DataType | None = None  # the struct every kept call's arguments are stored in
    tool_texts: list[str] = field(default_factory=list)  # the distinct `tools` JSON texts of tool-calling rows
    tools: pa.Array | None = None  # those decoded (a list of schemas each); None: no row lists a tool
    message_fields: set[str] = field(default_factory=lambda: {"role", "content"})
    call_fields: set[str] = field(default_factory=set)
    function_fields: set[str] = field(default_factory=set)


def write_hf(source: Path, target: Path, metadata: dict[str, str] | None = None) -> Path:
    file = pq.ParquetFile(source)
    rows = _batch_rows(file)
    survey = survey_set(file, rows)
    schema = output_schema(file.schema_arrow, survey)
    batches = (hf_batch(batch, start, survey, schema, target) for start, batch in _batches(file, rows))
    return write_parquet_tables(target, schema, batches, metadata)


def _batch_rows(file: pq.ParquetFile) -> int:
    data = file.metadata
    row_bytes = sum(data.row_group(i).total_byte_size for i in range(data.num_row_groups)) / max(1, data.num_rows)
    return int(min(65_536, max(256, BATCH_BYTES // max(1.0, row_bytes))))


def _batches(file: pq.ParquetFile, rows: int, columns: list[str] | None = None) -> Iterator[tuple[int, pa.Table]]:
    """(number of the first row, the batch) for every batch of the file."""
    start = 0
    for batch in file.iter_batches(batch_size=rows, columns=columns):
        yield start, pa.Table.from_batches([batch])
        start += batch.num_rows


def _protocols_where(table: pa.Table, wanted: Callable[[Protocol], bool]) -> dict[str, Protocol]:
    """The protocols the rows name (their `format`) for which `wanted` holds, by name."""
    if "format" not in table.column_names:
        return {}
    names = pc.unique(table["format"].combine_chunks()).drop_null().to_pylist()
    return {name: protocol for name in names if (protocol := protocol_of(name)) is not None and wanted(protocol)}


def _rows_naming(table: pa.Table, names: Iterable[str]) -> np.ndarray:
    """Which rows name one of the protocols `names` in their `format`."""
    names = list(names)
    if not names:
        return np.zeros(table.num_rows, dtype=bool)
    value_set = pa.array(names, table.schema.field("format").type)
    return pc.fill_null(pc.is_in(table["format"], value_set=value_set), False).to_numpy(zero_copy_only=False)


def _plain_text_rows(table: pa.Table) -> np.ndarray:
    """Rows of a plain-text protocol: they are written as plain turns (formats/forms.py's module doc)."""
    return _rows_naming(table, _protocols_where(table, lambda protocol: not protocol.tagged))


# --------------------------------------------------------------------------- pass 1: the schema


def survey_set(file: pq.ParquetFile, rows: int) -> Survey:
    message_type = file.schema_arrow.field("messages").type.value_type
    columns = [name for name in ("format", "problem_id", "tools") if name in file.schema_arrow.names]
    columns += [f"messages.list.element.{f.name}" for f in message_type if f.name != "content"]
    survey, argument_types, tool_texts = Survey(), [], set()
    for _, batch in _batches(file, rows, columns):
        as_turns = _plain_text_rows(batch)
        plain, turns = batch.filter(pa.array(~as_turns)), batch.filter(pa.array(as_turns))
        argument_types += _survey_plain(plain, survey)
        _survey_turns(turns, survey)
        if "tools" in plain.column_names:
            tool_texts.update(pc.unique(plain["tools"].combine_chunks().drop_null()).to_pylist())
    if argument_types:
        survey.arguments = ordered(readable_type(_common(argument_types)))
        if not survey.arguments.num_fields:
            raise UserError("no tool call of the SFT set has an argument, which Parquet cannot store; use --for openai")
    survey.tool_texts = sorted(tool_texts)
    survey.tools = decoded_tools(survey.tool_texts)
    return survey


def _survey_plain(table: pa.Table, survey: Survey) -> list[pa.DataType]:
    """Record the fields the rows set; return the type of their calls' arguments (none without calls)."""
    messages = list_values(table["messages"].combine_chunks())
    survey.message_fields |= _set_fields(messages)
    if "tool_calls" not in _set_fields(messages):
        return []
    calls = list_values(messages.field("tool_calls"))
    survey.call_fields |= _set_fields(calls)
    if "function" not in _set_fields(calls):
        return []
    functions = calls.field("function")
    survey.function_fields |= _set_fields(functions)
    if "arguments" not in _set_fields(functions):
        return []
    return [_decoded(functions.field("arguments"), None, table).type]


def _survey_turns(table: pa.Table, survey: Survey) -> None:
    """Plain-text protocols' rows keep every field of their messages but the calls, and their tool messages become
    user turns of text only."""
    messages = list_values(table["messages"].combine_chunks())
    if len(messages):
        not_tool = pc.fill_null(pc.not_equal(messages.field("role"), "tool"), True)
        survey.message_fields |= _set_fields(messages.filter(not_tool)) - {"tool_calls"}


def _set_fields(values: pa.StructArray) -> set[str]:
    """The fields of a struct array that hold a value in at least one entry."""
    return {f.name for f in values.type if values.field(f.name).null_count < len(values)}


def _call_rows(table: pa.Table) -> np.ndarray:
    """The row (in `table`) of each of its tool calls, in order."""
    messages = table["messages"].combine_chunks()
    return rows_of(messages)[rows_of(list_values(messages).field("tool_calls"))]


def _common(types: list[pa.DataType]) -> pa.DataType:
    try:
        return common_type(types)
    except MixedTypesError as error:
        raise _mixed_types(error) from None


def _mixed_types(error: Exception) -> UserError:
    return UserError(
        f"tool arguments or schemas differ in type across rows ({error}); "
        "use --for openai (JSONL, arguments as JSON strings)"
    )


def _not_json(error: NotJSONError, table: pa.Table) -> UserError:
    row = int(_call_rows(table)[error.index])
    problem = table["problem_id"][row].as_py() if "problem_id" in table.column_names else f"in row {row + 1}"
    return UserError(f"problem {problem}: tool-call arguments are not JSON ({error.reason})")


def _decoded(texts: pa.Array, type: pa.DataType | None, table: pa.Table) -> pa.Array:
    """The calls' arguments decoded; a text that is not JSON named by its problem."""
    try:
        return decode(texts, type)
    except NotJSONError as error:
        raise _not_json(error, table) from None
    except MixedTypesError as error:
        raise _mixed_types(error) from None


def decoded_tools(texts: list[str]) -> pa.Array | None:
    """The distinct `tools` texts as lists of schemas; None when none lists a tool.

    Such a set (e.g. all codeblock) is written without the column, as the openai form leaves the key
    out: the readers then give the template no tools (TRL's SFTTrainer `example.get("tools")`, verl's
    MultiTurnSFTDataset when `tools_key` is not a column), whereas `tools=[]` reaches the template as
    is, and Llama 3.1 / 3.2's (`tools is not none`) then add their JSON function-calling instructions
    to a conversation that calls no function. A null cannot stand in: verl reads it as pandas' NA,
    which templates cannot iterate.
    """
    values = [json.loads(text) for text in texts]
    if not any(values):
        return None
    try:
        decoded = pa.array(values)
        decoded = decoded.cast(ordered(decoded.type))
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise _mixed_types(error) from None
    for text, value, stored in zip(texts, values, decoded.to_pylist()):
        if value != stored:
            raise _lossy(f"the tools {text[:60]}...")
    return decoded


def _lossy(where: str) -> UserError:
    return UserError(
        f"{where}: the tools take differently named arguments, which one Parquet struct cannot hold "
        "without adding the others' keys as nulls (templates would render them); write one set per tool, "
        "or use --for openai (JSONL)"
    )


def output_schema(canonical: pa.Schema, survey: Survey) -> pa.Schema:
    """The canonical columns with `messages` and `tools` as the survey found them."""
    canonical = pa.schema([f.with_type(small_offsets(f.type)) for f in canonical])
    message_type = canonical.field("messages").type.value_type
    call_type = message_type.field("tool_calls").type.value_type
    function = pa.struct(
        [
            f.with_type(survey.arguments) if f.name == "arguments" else f
            for f in call_type.field("function").type
            if f.name in survey.function_fields
        ]
    )
    call = pa.struct(
        [f.with_type(function) if f.name == "function" else f for f in call_type if f.name in survey.call_fields]
    )
    message = pa.struct(
        [
            f.with_type(pa.list_(call)) if f.name == "tool_calls" else f
            for f in message_type
            if f.name in survey.message_fields
        ]
    )
    columns = {f.name: f for f in canonical}
    columns["messages"] = pa.field("messages", pa.list_(message))
    if survey.tools is None:
        columns.pop("tools", None)
    else:
        columns["tools"] = pa.field("tools", survey.tools.type)
    return pa.schema(list(columns.values()))


# --------------------------------------------------------------------------- pass 2: the rows


def hf_batch(table: pa.Table, start: int, survey: Survey, schema: pa.Schema, target: Path) -> pa.Table:
    """One batch of canonical rows in the `hf` form, in order."""
    message_type = schema.field("messages").type
    as_turns = _protocols_where(table, lambda protocol: not protocol.tagged)
    plain_rows = np.flatnonzero(~_rows_naming(table, as_turns))
    parts, rows = [], [plain_rows]
    if len(plain_rows):
        plain = table.take(plain_rows)
        parts.append(_with_decoded_calls(plain, survey, message_type, lambda row: start + int(plain_rows[row]) + 1))
    for name, protocol in as_turns.items():  # each plain-text protocol writes its own rows' turns
        turn_rows = np.flatnonzero(_rows_naming(table, [name]))
        rows.append(turn_rows)
        turns = table.take(turn_rows)
        try:
            parts.append(protocol.plain_turns_arrow(turns["messages"].combine_chunks(), message_type))
        except NotJSONError as error:
            raise _not_json(error, turns) from None
    order = np.argsort(np.concatenate(rows), kind="stable")
    columns = {"messages": pa.concat_arrays(parts).take(order)}
    if "tools" in schema.names:
        no_schemas = _protocols_where(table, lambda protocol: not protocol.carries_tool_schemas)
        columns["tools"] = _tools(table, _rows_naming(table, no_schemas), survey)
    return pa.table([columns.get(f.name, table[f.name]).cast(f.type) for f in schema], schema=schema)


def _with_decoded_calls(table: pa.Table, survey: Survey, message_type: pa.DataType, row_number) -> pa.Array:
    """Messages as stored, but with each call's arguments decoded into the set's struct."""
    messages_list = table["messages"].combine_chunks()
    messages = list_values(messages_list)
    message = message_type.value_type
    children = {f.name: messages.field(f.name) for f in message}
    if "tool_calls" in children:
        calls_type = message.field("tool_calls").type
        children["tool_calls"] = _decoded_calls(children["tool_calls"], calls_type, table, survey, row_number)
    return rebuilt_list(messages_list, rebuilt_struct(messages, message, children))


def _decoded_calls(calls_list: pa.Array, calls_type: pa.DataType, table: pa.Table, survey: Survey, row_number):
    calls = list_values(calls_list)
    call = calls_type.value_type
    children = {f.name: calls.field(f.name) for f in call}
    if "function" in children and "arguments" in call.field("function").type.names:
        function, functions = call.field("function").type, children["function"]
        function_children = {f.name: functions.field(f.name) for f in function}
        texts = function_children["arguments"]
        function_children["arguments"] = arguments = _decoded(texts, survey.arguments, table)
        changed = first_changed(texts, arguments)
        if changed is not None:
            raise _lossy(f"row {row_number(int(_call_rows(table)[changed]))} of the SFT set")
        children["function"] = rebuilt_struct(functions, function, function_children)
    return rebuilt_list(calls_list, rebuilt_struct(calls, call, children))


def _tools(table: pa.Table, without: np.ndarray, survey: Survey) -> pa.Array:
    """Each row's tool schemas (the decoded distinct texts, taken by index); `[]` for the rows `without` them."""
    choices = pa.concat_arrays([survey.tools, pa.array([[]], survey.tools.type)])
    index = pc.index_in(table["tools"].combine_chunks(), value_set=pa.array(survey.tool_texts, pa.string()))
    return choices.take(pc.if_else(pa.array(without), len(survey.tool_texts), index))
