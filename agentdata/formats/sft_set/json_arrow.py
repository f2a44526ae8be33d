"""JSON text in an Arrow column -> Arrow values, read as `json.loads` reads it, at the speed of Arrow's reader.

pyarrow's JSON reader parses a whole column of objects in C++. Three of its habits differ from
`json.loads`, and each is dealt with here rather than let through:
- it reads ISO dates as timestamps: `readable_type` turns every time type it found back into a string;
- an object that lacks a key another has gets a null there, and an integer beside a fraction becomes a
  double: `maybe_changed` marks the values that could have been altered so, and `first_changed` checks
  only those against `json.loads` (almost always none);
- it refuses what is not one JSON object per line, or a key holding two types: such a column goes
  through `json.loads` value by value, which reads it as the row-by-row writer did or names the value.
An empty string is the empty object (as the agent loop reads a call without arguments); nulls stay null.
"""

from __future__ import annotations

import io
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

EXACT_DOUBLE = 2.0**53  # a double above this may be an integer that lost digits


class NotJSONError(ValueError):
    """The value at `index` is not JSON."""

    def __init__(self, index: int, reason: str):
        super().__init__(reason)
        self.index, self.reason = index, reason


class MixedTypesError(ValueError):
    """The values cannot share one Arrow type (a key holds a string in one value and a number in another)."""


def decode(texts: pa.Array, type: pa.DataType | None = None) -> pa.Array:
    """`texts` (JSON objects as strings) as one Arrow array, with `type` (a struct) or the one Arrow infers."""
    texts = texts.cast(pa.large_string())
    texts = pc.if_else(pc.equal(pc.utf8_trim_whitespace(texts), ""), "{}", texts)
    try:
        return _arrow_read(texts, type)
    except (pa.ArrowInvalid, _Misread):
        return _python_read(texts, type)


class _Misread(Exception):
    """Arrow's reader did not give one row per value."""


def _arrow_read(texts: pa.Array, type: pa.DataType | None) -> pa.Array:
    if len(texts) == 0 or pc.any(pc.match_substring_regex(texts, "[\r\n]")).as_py():
        raise _Misread  # a line per value is what the reader splits on
    valid = texts.is_valid()
    one_list = pa.LargeListArray.from_arrays([0, len(texts)], texts.fill_null("{}"))
    lines = pc.binary_join(one_list, pa.scalar("\n", pa.large_string()))[0].as_buffer()
    longest = pc.max(pc.binary_length(texts)).as_py() or 0
    options = pj.ParseOptions(
        explicit_schema=pa.schema(list(type)) if type is not None else None,
        unexpected_field_behavior="error" if type is not None else "infer",
    )
    table = pj.read_json(
        io.BytesIO(lines), read_options=pj.ReadOptions(block_size=max(1 << 20, 2 * longest + 2)), parse_options=options
    )
    if table.num_rows != len(texts) or table.num_columns == 0:
        raise _Misread  # two objects on one line; or objects with no keys, which Parquet cannot store as a struct
    table = table.combine_chunks()
    objects = pa.StructArray.from_arrays(
        [column.chunk(0) if column.num_chunks else pa.array([], column.type) for column in table.columns],
        fields=list(table.schema),
        mask=pc.invert(valid) if texts.null_count else None,
    )
    return objects if type is None else objects.cast(type)


def _python_read(texts: pa.Array, type: pa.DataType | None) -> pa.Array:
    values = []
    for index, text in enumerate(texts.to_pylist()):
        try:
            values.append(None if text is None else json.loads(text))
        except json.JSONDecodeError as error:
            raise NotJSONError(index, error.msg) from None
    try:
        return pa.array(values, type=type)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as error:
        raise MixedTypesError(str(error)) from None


def readable_type(data_type: pa.DataType) -> pa.DataType:
    """The type with every time type Arrow inferred from a string turned back into a string."""
    if pa.types.is_temporal(data_type):
        return pa.string()
    if pa.types.is_struct(data_type):
        return pa.struct([field.with_type(readable_type(field.type)) for field in data_type])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.list_(readable_type(data_type.value_type))
    return data_type


def common_type(types: list[pa.DataType]) -> pa.DataType:
    """One type holding values of every type in `types`: structs get the union of their fields."""
    try:
        schema = pa.unify_schemas([pa.schema([("value", t)]) for t in types], promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as error:
        raise MixedTypesError(str(error)) from None
    return schema.field("value").type


def maybe_changed(values: pa.Array) -> np.ndarray:
    """Per value: whether storing it in this type may have changed it (a null where the JSON may have had
    no key, a double that may have been a longer integer)."""
    data_type = values.type
    if pa.types.is_struct(data_type):
        valid = values.is_valid().to_numpy(zero_copy_only=False)
        flags = np.zeros(len(values), dtype=bool)
        for index in range(data_type.num_fields):
            child = values.field(index)
            flags |= valid & (child.is_null().to_numpy(zero_copy_only=False) | maybe_changed(child))
        return flags
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        inner = maybe_changed(pc.list_flatten(values))
        parents = pc.list_parent_indices(values).to_numpy()
        return np.bincount(parents[inner], minlength=len(values)).astype(bool)
    if pa.types.is_floating(data_type):
        return pc.fill_null(pc.greater_equal(pc.abs(values), EXACT_DOUBLE), False).to_numpy(zero_copy_only=False)
    return np.zeros(len(values), dtype=bool)


def first_changed(texts: pa.Array, values: pa.Array) -> int | None:
    """The first index whose stored value differs from `json.loads` of its text; None when all are kept."""
    for index in np.flatnonzero(maybe_changed(values)):
        text = texts[int(index)].as_py()
        if (json.loads(text) if text.strip() else {}) != values[int(index)].as_py():
            return int(index)
    return None
