"""Codeblock rows as plain turns (formats.forms.codeblock_turns), for a whole batch of rows at once.

Each assistant message gets its calls' code as fenced blocks after its text, the outputs of one
turn's calls become one `user` turn of ```output blocks, and every other field of a message is
kept: the same text CodeblockProtocol.render_assistant and render_tool write, built by polars
over one frame of all the batch's messages.
"""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pyarrow as pa

from agentdata.formats.sft_set.arrow_nest import list_values, rebuilt_list, rows_of, struct_fields
from agentdata.formats.sft_set.json_arrow import MixedTypesError, decode

CODE_BLOCK = ("```python\n", "\n```\n")
OUTPUT_BLOCK = ("```output\n", "\n```")


def codeblock_turns(messages_list: pa.Array, message_type: pa.DataType) -> pa.Array:
    """The rows' messages as plain turns of `message_type` (a list of structs). A call whose arguments are
    not JSON raises json_arrow.NotJSONError with the call's index among the rows' calls."""
    messages = list_values(messages_list)
    struct_type = message_type.value_type
    kept = [f.name for f in struct_type if f.name not in ("role", "content", "tool_calls")]
    calls_list = messages.field("tool_calls")
    codes = rebuilt_list(calls_list, call_codes(list_values(calls_list).field("function").field("arguments")))
    frame = pl.from_arrow(
        pa.table(
            {"row": rows_of(messages_list), "role": messages.field("role"), "content": messages.field("content")}
            | {name: messages.field(name) for name in kept}
            | {"codes": codes}
        )
    )
    turns = _merged_outputs(frame.with_columns(content=_rendered()), kept)
    values = pa.StructArray.from_arrays(
        [
            turns[f.name].to_arrow().cast(f.type) if f.name in turns.columns else pa.nulls(turns.height, f.type)
            for f in struct_type
        ],
        fields=list(struct_type),
    )
    counts = np.bincount(turns["row"].to_numpy(), minlength=len(messages_list))
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, mask=messages_list.is_null() if messages_list.null_count else None)


def _rendered() -> pl.Expr:
    """CodeblockProtocol.render_assistant and render_tool as one expression over a message frame."""
    role, content = pl.col("role"), pl.col("content").fill_null("")
    blocks = pl.col("codes").list.eval(pl.lit(CODE_BLOCK[0]) + pl.element() + pl.lit(CODE_BLOCK[1])).list.join("")
    with_blocks = pl.when(content == "").then(blocks).otherwise(content + "\n" + blocks)
    has_blocks = pl.col("codes").list.len().fill_null(0) > 0
    return (
        pl.when(role == "tool")
        .then(pl.lit(OUTPUT_BLOCK[0]) + content + pl.lit(OUTPUT_BLOCK[1]))
        .when(role == "assistant")
        .then(pl.when(has_blocks).then(with_blocks).otherwise(content))
        .otherwise(pl.col("content"))
    )


def _merged_outputs(frame: pl.DataFrame, kept: list[str]) -> pl.DataFrame:
    """Consecutive tool messages of a row as one `user` turn, their outputs joined by a newline."""
    is_tool = pl.col("role") == "tool"
    continues = is_tool & is_tool.shift(1).fill_null(False) & (pl.col("row") == pl.col("row").shift(1))
    grouped = frame.with_columns(turn=(~continues).cum_sum()).group_by("turn", maintain_order=True)
    tool_turn = pl.col("role").first() == "tool"
    return grouped.agg(
        pl.col("row").first(),
        pl.when(tool_turn).then(pl.lit("user")).otherwise(pl.col("role").first()).alias("role"),
        pl.when(tool_turn).then(pl.col("content").str.join("\n")).otherwise(pl.col("content").first()).alias("content"),
        *(pl.when(tool_turn).then(None).otherwise(pl.col(name).first()).alias(name) for name in kept),
    )


def call_codes(texts: pa.Array) -> pa.Array:
    """The `code` argument of each call ("" when it has none or it is not a string), as ToolCall.code reads it."""
    try:
        arguments = decode(texts)
    except MixedTypesError:  # e.g. `code` a string in one call and a number in another: read them one by one
        arguments = None
    if arguments is not None and pa.types.is_struct(arguments.type):
        if "code" not in struct_fields(arguments):
            return pa.array([""] * len(texts), pa.string())
        code = arguments.field("code")
        if pa.types.is_string(code.type) or pa.types.is_large_string(code.type):
            return code.cast(pa.string()).fill_null("")
    loaded = [json.loads(text) if text and text.strip() else {} for text in texts.to_pylist()]
    return pa.array([v.get("code") if isinstance(v, dict) and isinstance(v.get("code"), str) else "" for v in loaded])
