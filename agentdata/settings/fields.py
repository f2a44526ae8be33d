"""The fields of a settings dataclass: their metadata, ranges, value types and how a given value becomes one.

A field's metadata (see the package doc) is read here: `range` is checked by `check_fields`, which a
settings dataclass calls from `__post_init__`; `coerce` turns what a file or a flag gave into the
field's type. A field may hold a `SettingValue` (a small type with rules of its own, e.g. `Band`):
it parses its own text form and records itself as plain JSON.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import math
import re
import types
import typing
from collections.abc import Iterable, Iterator
from dataclasses import MISSING, Field
from typing import Any

from agentdata.errors import UserError

_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])\s*$")
# The one word for "off" (None) on the command line; a file writes null (docs/settings.md).
NONE_WORD = "none"


class SettingError(UserError, ValueError):
    """A setting outside its range or of the wrong kind: `name` is the field, `where` what gave it (a flag,
    a file's section), so the message names what the user wrote."""

    def __init__(self, name: str, value: Any, message: str, where: str = "", flag: bool = False):
        self.name, self.value, self.reason, self.where, self.flag = name, value, message, where, flag
        if flag:  # a flag: `--max-steps 0: must be at least 1`; an override: `rl.max_steps=0: must be at least 1`
            text = f"{where}{'' if where.endswith('=') else ' '}{show_value(value)}: {message}"
        else:  # a file (as written there) or code (text quoted): `train.yaml rl: max_steps 0: must be at least 1`
            shown = show_value(value, quote=not where, as_json=True)
            text = f"{where + ': ' if where else ''}{name} {shown}: {message}"
        super().__init__(text)

    def at(self, where: str, flag: bool = False) -> SettingError:
        """The same mistake, named by what gave the value."""
        return SettingError(self.name, self.value, self.reason, where, flag)


class SettingValue:
    """A setting's value type with rules of its own (`Band`): built from text or a list, recorded as JSON."""

    @classmethod
    def parse(cls, value: Any) -> SettingValue:
        raise NotImplementedError

    def as_setting(self) -> Any:
        raise NotImplementedError


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


SHOWN_CHARS = 200  # of a value in an error line (a long path fits): a 10 MB value is named, not echoed


def show_value(value: Any, quote: bool = False, as_json: bool = False) -> str:
    """A value as an error line shows it (cut: a 10 MB value is named, not echoed): a list as a flag takes
    it (A,B), or `as_json` as a file holds it ([1, 2], {"a": 1})."""
    if as_json and isinstance(value, (list, tuple, dict)):
        return cut(json.dumps(value, ensure_ascii=False, default=str))
    if isinstance(value, (list, tuple)):
        return cut(",".join(map(str, value)))
    return show_cut(value) if quote and isinstance(value, str) else cut(str(value))


def show_cut(value: Any) -> str:
    """repr(value), cut to SHOWN_CHARS with the full length said."""
    return cut(repr(value))


def cut(text: str) -> str:
    """`text` as an error line shows it: at most SHOWN_CHARS, with the full length said."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 20]}… ({len(text):,} characters)"


# ------------------------------------------------------------------ fields of a settings dataclass
def is_settings(kind: Any) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def is_value_type(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, SettingValue)


@functools.cache
def field_types(config_type: type) -> dict[str, Any]:
    """The resolved annotation of each field (the modules use `from __future__ import annotations`). Cached:
    resolving them took most of a settings object's construction, and some are made once per trajectory
    (`HealthLimits`, issue 25's driver profile). A class's annotations do not change; do not mutate the dict."""
    return typing.get_type_hints(config_type)


def value_type(annotation: Any) -> tuple[Any, bool]:
    """(the type inside an `X | None`, whether None is allowed)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        inner = [arg for arg in args if arg is not type(None)]
        return (inner[0] if len(inner) == 1 else annotation), type(None) in args
    return annotation, False


def field_range(item: Field) -> Range | None:
    text = item.metadata.get("range")
    return _parsed_range(text) if text else None


@functools.cache
def _parsed_range(text: str) -> Range:  # a handful of distinct texts, read at every check of a field
    return Range.parse(text)


def default_of(item: Field) -> Any:
    if item.default is not MISSING:
        return item.default
    if item.default_factory is not MISSING:
        return item.default_factory()
    return MISSING


def leaf_fields(config_type: type, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Field, Any]]:
    """(path, field, annotation) of every non-composed field, composed settings flattened in place."""
    types_ = field_types(config_type)
    for item in dataclasses.fields(config_type):
        annotation = types_[item.name]
        if is_settings(annotation):
            yield from leaf_fields(annotation, (*prefix, item.name))
        else:
            yield (*prefix, item.name), item, annotation


def renamed_names(config_type: type) -> dict[str, str]:
    """Names of an older release (a field's metadata `was`) -> the field's name now (`teacher` -> `model`)."""
    return {old: path[-1] for path, item, _ in leaf_fields(config_type) for old in item.metadata.get("was", ())}


def gone(old: str, new: str, where: str = "") -> UserError:
    """The one line an old name gets: no alias (a 0.x package keeps none), its new spelling; `where` names the
    file that used it."""
    return UserError(f"{where + ': ' if where else ''}{old} is gone: write {new} (see CHANGELOG.md)")


def unknown_setting(
    key: str, known: Iterable[str], where: str = "", written: str = "", otherwise: str = "see docs/settings.md"
) -> UserError:
    """The one line a name no setting has gets, everywhere (a file, an override, a recipe): the closest real
    names (`written` after each: `=...` on the command line), else where to look."""
    close = difflib.get_close_matches(key, sorted(set(known)), n=3, cutoff=0.6)
    hint = f"did you mean {', '.join(name + written for name in close)}?" if close else otherwise
    return UserError(f"{where + ': ' if where else ''}unknown setting {key!r}; {hint}")


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
