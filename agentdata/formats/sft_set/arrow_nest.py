"""Taking nested Arrow arrays (lists of structs of lists ...) apart and putting them back together.

A conversion works on the flat values of a level (every message of a batch, every tool call)
and then rebuilds the level above with the same offsets and nulls, so no row is ever a Python
object.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def list_values(values: pa.Array) -> pa.Array:
    """The flat values of a list array (only those its rows hold, whatever its slice)."""
    return pc.list_flatten(values)


def rows_of(values: pa.Array) -> np.ndarray:
    """For each flat value of a list array, the index of its row."""
    return pc.list_parent_indices(values).to_numpy()


def struct_fields(values: pa.Array) -> list[str]:
    return [field.name for field in values.type]


def rebuilt_list(original: pa.Array, values: pa.Array) -> pa.ListArray:
    """A list array with `original`'s rows and nulls holding `values` (as many as `list_values(original)`)."""
    lengths = pc.fill_null(pc.list_value_length(original), 0).to_numpy()  # a null row holds no value
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
    return pa.ListArray.from_arrays(offsets, values, mask=original.is_null() if original.null_count else None)


def rebuilt_struct(original: pa.Array, type: pa.DataType, children: dict[str, pa.Array]) -> pa.StructArray:
    """A struct array of `type` from `children` (by field name), null where `original` is."""
    return pa.StructArray.from_arrays(
        [children[field.name].cast(field.type) for field in type],
        fields=list(type),
        mask=original.is_null() if original.null_count else None,
    )


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
    """The type with every struct's fields in FIELD_ORDER."""
    if pa.types.is_struct(data_type):
        rank = {name: index for index, name in enumerate(FIELD_ORDER)}
        fields = sorted(data_type, key=lambda f: (rank.get(f.name, len(FIELD_ORDER)), f.name))
        return pa.struct([f.with_type(ordered(f.type)) for f in fields])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.list_(ordered(data_type.value_type))
    return data_type


def small_offsets(data_type: pa.DataType) -> pa.DataType:
    """Strings and lists with 32-bit offsets, as datasets and pandas read them (polars writes 64-bit ones)."""
    if pa.types.is_large_string(data_type):
        return pa.string()
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(small_offsets(field.type)) for field in data_type])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.list_(small_offsets(data_type.value_type))
    return data_type
