"""A given value as its field's type, checked; one settings dataclass from flat values; and back.

What a file, a flag or code gave becomes the field's type (`coerce`: "0.2,0.8" for a pair, 3 for 3.0, `none`
for None), and a built dataclass checks its fields against their `range` (`check_fields`, from
`__post_init__`). A composed field (`loop: LoopConfig`) keeps its fields flat: `max_turns` on the command
line, in a file and in records. `build` routes flat names into the composed objects (a `loop:` mapping
works too); `flatten` is the way back, JSON-ready. The layers a command's values come from are
`sections.py`'s; what a field declares is `fields.py`'s.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import typing
from dataclasses import Field
from typing import Any

from agentdata.errors import UserError
from agentdata.settings.fields import (
    NONE_WORD,
    SettingError,
    SettingValue,
    default_of,
    field_types,
    gone,
    is_settings,
    is_value_type,
    leaf_fields,
    renamed_names,
    value_type,
)


# ------------------------------------------------------------------ a given value as the field's type
def coerce(name: str, annotation: Any, value: Any) -> Any:
    """A value from a file (YAML/JSON), a flag or code made the field's type: "0.2,0.8" for a pair, 3 for 3.0,
    `none` for None where None is allowed."""
    kind, optional = value_type(annotation)
    if optional and isinstance(value, str) and kind is not str and value.strip().lower() in (NONE_WORD, ""):
        return None
    if value is None:
        if optional:
            return None
        raise SettingError(name, value, "needs a value")
    if is_value_type(kind):
        if isinstance(value, kind):
            return value
        try:
            return kind.parse(value)
        except (TypeError, ValueError) as error:
            raise SettingError(name, value, str(error)) from None
    origin = typing.get_origin(kind)
    if origin in (tuple, list):
        return _coerce_items(name, kind, value)
    if kind is bool:
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        if not isinstance(value, bool):
            raise SettingError(name, value, "expected true or false")
        return value
    if kind in (int, float):
        return _coerce_number(name, kind, value)
    if kind is dict or origin is dict:
        return _coerce_mapping(name, kind, value)
    if kind is str and not isinstance(value, str):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        raise SettingError(name, value, "expected text")
    return value


def _coerce_mapping(name: str, kind: Any, value: Any) -> dict[str, Any]:
    """A mapping of text keys, each value made the declared value type (`dict[str, float]`); Any stays as given."""
    if not isinstance(value, dict):
        raise SettingError(name, value, "expected a mapping of names to values")
    args = typing.get_args(kind)
    inner = args[1] if len(args) == 2 else Any
    mapping = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise SettingError(name, value, f"the key {key!r} is not text")
        mapping[key] = item if inner is Any else coerce(f"{name}.{key}", inner, item)
    return mapping


def _coerce_items(name: str, kind: Any, value: Any) -> Any:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    items = [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)):
        raise SettingError(name, value, "expected a list")
    inner = args[0] if args else str
    converted = [coerce(name, inner, item) for item in items]
    if origin is tuple and args[-1] is not Ellipsis and len(converted) != len(args):
        raise SettingError(name, value, f"expected {len(args)} values as A,B")
    return tuple(converted) if origin is tuple else converted


def _coerce_number(name: str, kind: type, value: Any) -> Any:
    expected = f"expected a{'n integer' if kind is int else ' number'}"
    if isinstance(value, bool):
        raise SettingError(name, value, expected)
    try:
        number = kind(value) if isinstance(value, str) else value
    except ValueError:  # int() of more than 4,300 digits is refused too: a number, but too large
        raise SettingError(name, value, TOO_LARGE if _WHOLE.fullmatch(value) else expected) from None
    if not isinstance(number, (int, float)):
        raise SettingError(name, value, expected)
    if kind is int and not (isinstance(number, int) or (isinstance(number, float) and number.is_integer())):
        raise SettingError(name, value, "expected an integer")
    if isinstance(number, float) and not math.isfinite(number):  # told by the range check, as written
        return number
    if isinstance(number, int) and abs(number) > MAX_WHOLE:  # kept whole: its range is checked on the int itself
        return number
    return kind(number)


# ------------------------------------------------------------------ a field's range, checked
_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])\s*$")


@dataclasses.dataclass(frozen=True)
class Range:
    """A closed, open or half-open interval; `inf` ends are open."""

    low: float
    high: float
    low_open: bool
    high_open: bool
    text: str

    @classmethod
    def parse(cls, text: str) -> Range:
        match = _INTERVAL.match(text)
        if not match:
            raise ValueError(f"range {text!r} is not an interval like [0, 1] or (0, inf)")
        opening, low, high, closing = match.groups()
        return cls(float(low), float(high), opening == "(", closing == ")", text.strip())

    def contains(self, value: float) -> bool:
        """Whether `value` is inside; an int is compared as it is (never made a float: 10**400 has none)."""
        if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def describe(self, value: float | None = None) -> str:
        """What a value must be; for an infinite `value`, that it is finite first (it may be above the low end)."""
        if isinstance(value, float) and math.isinf(value):
            return f"must be a finite number ({self.describe().removeprefix('must be ')})"
        if self.high == math.inf and not self.low_open:
            return f"must be at least {_number(self.low)}"
        if self.high == math.inf:
            return f"must be greater than {_number(self.low)}"
        return f"must be in {self.text}"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def field_range(item: Field) -> Range | None:
    text = item.metadata.get("range")
    return _parsed_range(text) if text else None


@functools.cache
def _parsed_range(text: str) -> Range:  # a handful of distinct texts, read at every check of a field
    return Range.parse(text)


def check_fields(config: Any) -> None:
    """Read old spellings of "off" as None and a value type's text as that type (a band given as "0.05,0.8"),
    then refuse NaN anywhere and numbers outside their field's `range`; call from `__post_init__`."""
    types_ = field_types(type(config))
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        kind, _ = value_type(types_[item.name])
        if "none_alias" in item.metadata and value == item.metadata["none_alias"] and value is not None:
            setattr(config, item.name, None)  # e.g. `max_per_problem: 0`, as "no cap" was written before
            continue
        if is_value_type(kind) and value is not None and not isinstance(value, kind):  # Band("0.05,0.8") in code
            value = coerce(item.name, types_[item.name], value)
            setattr(config, item.name, value)
        if is_settings(kind) or value is None:
            continue
        if isinstance(value, SettingValue):
            value = value.as_setting()
        values = (
            list(value.values()) if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else [value]
        )
        choices = item.metadata.get("choices")
        for one in values:
            if choices and one not in choices:
                raise SettingError(item.name, one, f"must be one of {', '.join(map(str, choices))}")
        for one in values:
            _check_number(item, one)


def _check_number(item: Field, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return
    if isinstance(value, float) and math.isnan(value):
        raise SettingError(item.name, value, "not a number")
    bounds = field_range(item)
    if bounds is not None and not bounds.contains(value):
        raise SettingError(item.name, value, bounds.describe(value))
    if isinstance(value, int) and abs(value) > MAX_WHOLE:
        raise SettingError(item.name, value, TOO_LARGE)


# The largest whole number a setting holds: what int64 holds (Arrow, NumPy, torch, a record's JSON reader), so
# 10**400 is one line here, not an OverflowError where a float or an array first meets it.
MAX_WHOLE = 2**63 - 1
TOO_LARGE = f"too large (at most {MAX_WHOLE:,})"
_WHOLE = re.compile(r"\s*[+-]?\d[\d_]*\s*")


# ------------------------------------------------------------------ a dataclass from flat values, and back
def flatten(config: Any) -> dict[str, Any]:
    """The settings as one flat dict of field names (composed settings inlined), JSON-ready."""
    flat: dict[str, Any] = {}
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            flat.update(flatten(value))
        elif isinstance(value, SettingValue):
            flat[item.name] = value.as_setting()
        else:
            flat[item.name] = list(value) if isinstance(value, tuple) else value
    return flat


def flat_names(config_type: type) -> list[str]:
    return [path[-1] for path, _, _ in leaf_fields(config_type)]


def composed_names(config_type: type) -> list[str]:
    """The names of composed settings at any depth (`loop`, `validation`, ...): a file may use them as sections."""
    names = []
    for item in dataclasses.fields(config_type):
        kind = field_types(config_type)[item.name]
        if is_settings(kind):
            names += [item.name, *composed_names(kind)]
    return names


def build(config_type: type, values: dict[str, Any], source: str | None = None) -> Any:
    """`config_type` from flat values (or `loop:`-style sections); unknown names and bad values are UserErrors.

    A composed field starts from its own default (a stage may default it differently, e.g. GRPO's
    rollouts sample at temperature 1.0), and only the names given replace its values.
    """
    values = unnest(values, [config_type])
    known = set(flat_names(config_type))
    unknown = sorted(set(values) - known - {item.name for item in dataclasses.fields(config_type)})
    where = f"{source}: " if source else ""
    renamed = renamed_names(config_type)
    for name in unknown:
        if name in renamed:
            raise gone(name, renamed[name], source or "")
    if unknown:
        raise UserError(f"{where}unknown setting(s) {', '.join(unknown)}; see docs/settings.md")
    try:
        return _build(config_type, dict(values))
    except SettingError as error:
        raise error.at(source) if source else error from None
    except (TypeError, ValueError) as error:  # a check across fields in __post_init__
        raise UserError(f"{where}{error}") from None


def _build(config_type: type, values: dict[str, Any], base: Any = None) -> Any:
    types = field_types(config_type)
    kwargs: dict[str, Any] = {}
    for item in dataclasses.fields(config_type):
        kind = types[item.name]
        if is_settings(kind):
            given = values.pop(item.name, None)
            if dataclasses.is_dataclass(given):
                inner_base = given
            else:
                inner_base = getattr(base, item.name) if base is not None else default_of(item)
            inner = _take(kind, values)
            kwargs[item.name] = _build(kind, inner, inner_base) if inner else inner_base
        elif item.name in values:
            kwargs[item.name] = coerce(item.name, kind, values.pop(item.name))
        elif base is not None:
            kwargs[item.name] = getattr(base, item.name)
    return config_type(**kwargs)


def _take(config_type: type, values: dict[str, Any]) -> dict[str, Any]:
    names = set(flat_names(config_type)) | {item.name for item in dataclasses.fields(config_type)}
    return {name: values.pop(name) for name in list(values) if name in names}


def unnest(values: dict[str, Any], config_types: list[type]) -> dict[str, Any]:
    """A file's sections named after composed fields (`loop:`) inlined into flat names."""
    composed = {name for kind in config_types for name in composed_names(kind)}
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if name in composed and isinstance(value, dict):
            flat.update(unnest(value, config_types))
        else:
            flat[name] = value
    return flat
