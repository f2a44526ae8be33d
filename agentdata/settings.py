"""Settings dataclasses: field metadata, ranges checked once, flat views, and settings files.

Every stage's settings are a dataclass whose fields carry their documentation:

    max_turns: int = field(default=8, metadata={"help": "Model turns per trajectory.", "range": "[1, inf)"})

- `help` (required) is what `--help`, `docs/settings.md` and errors show.
- `range` (every number has one) is an interval, `[0, 1]`, `(0, 1]`, `[1, inf)`; it is checked
  once, when the dataclass is built (`check_fields` in `__post_init__`). NaN is never accepted.
- `choices` lists the values a text setting takes.
- `split: False` keeps a repeated option's values whole (file paths may hold commas).
- `flag` / `aliases` rename the generated command-line option; `cli: False` leaves a field off
  the command line (still settable from a `--config` file).

A dataclass field whose type is another settings dataclass composes it (`loop: LoopConfig`):
its fields stay flat on the command line and in records (`--max-turns`, `"max_turns"`), so
`flatten` and `build` convert between the nested objects and the flat names.
This module imports no other part of the package but `errors` (and `inputs` to read a file).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import typing
from collections.abc import Iterator
from dataclasses import MISSING, Field, dataclass
from pathlib import Path
from typing import Any

from agentdata.errors import UserError

_INTERVAL = re.compile(r"^\s*([\[(])\s*([^,\s]+)\s*,\s*([^,\s]+)\s*([\])])\s*$")


class SettingError(UserError, ValueError):
    """A setting outside its range or of the wrong kind; `name` is the field, so the CLI can name the flag."""

    def __init__(self, name: str, value: Any, message: str):
        self.name, self.value, self.reason = name, value, message
        super().__init__(f"{name} {_show(value)}: {message}")


@dataclass(frozen=True)
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
        if math.isnan(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below and not math.isinf(value)

    def describe(self) -> str:
        if self.high == math.inf and not self.low_open:
            return f"must be at least {_number(self.low)}"
        if self.high == math.inf:
            return f"must be greater than {_number(self.low)}"
        return f"must be in {self.text}"


def _number(value: float) -> str:
    return str(int(value)) if value.is_integer() else str(value)


def _show(value: Any) -> str:
    return repr(value) if isinstance(value, str) else str(value)


# ------------------------------------------------------------------ fields of a settings dataclass
def is_settings(kind: Any) -> bool:
    return isinstance(kind, type) and dataclasses.is_dataclass(kind)


def field_types(config_type: type) -> dict[str, Any]:
    """The resolved annotation of each field (the modules use `from __future__ import annotations`)."""
    return typing.get_type_hints(config_type)


def value_type(annotation: Any) -> tuple[Any, bool]:
    """(the type inside an `X | None`, whether None is allowed)."""
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        inner = [arg for arg in args if arg is not type(None)]
        return (inner[0] if len(inner) == 1 else annotation), type(None) in args
    return annotation, False


def field_range(item: Field) -> Range | None:
    text = item.metadata.get("range")
    return Range.parse(text) if text else None


def default_of(item: Field) -> Any:
    if item.default is not MISSING:
        return item.default
    if item.default_factory is not MISSING:
        return item.default_factory()
    return MISSING


def leaf_fields(config_type: type, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Field, Any]]:
    """(path, field, annotation) of every non-composed field, composed settings flattened in place."""
    types = field_types(config_type)
    for item in dataclasses.fields(config_type):
        annotation = types[item.name]
        if is_settings(annotation):
            yield from leaf_fields(annotation, (*prefix, item.name))
        else:
            yield (*prefix, item.name), item, annotation


def check_fields(config: Any) -> None:
    """Refuse NaN anywhere and numbers outside their field's `range`; call from `__post_init__`."""
    types = field_types(type(config))
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        kind, _ = value_type(types[item.name])
        if is_settings(kind) or value is None:
            continue
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
        raise SettingError(item.name, value, bounds.describe())


# ------------------------------------------------------------------ flat views
def flatten(config: Any) -> dict[str, Any]:
    """The settings as one flat dict of field names (composed settings inlined), JSON-ready."""
    flat: dict[str, Any] = {}
    for item in dataclasses.fields(config):
        value = getattr(config, item.name)
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            flat.update(flatten(value))
        else:
            flat[item.name] = list(value) if isinstance(value, tuple) else value
    return flat


def flat_names(config_type: type) -> list[str]:
    return [path[-1] for path, _, _ in leaf_fields(config_type)]


def build(config_type: type, values: dict[str, Any], source: str | None = None) -> Any:
    """`config_type` from flat values (or `loop:`-style sections); unknown names and bad values are UserErrors.

    A composed field starts from its own default (a stage may default it differently, e.g. GRPO's
    rollouts sample at temperature 1.0), and only the names given replace its values.
    """
    values = unnest(values, [config_type])
    known = set(flat_names(config_type))
    unknown = sorted(set(values) - known - {item.name for item in dataclasses.fields(config_type)})
    where = f"{source}: " if source else ""
    if unknown:
        raise UserError(f"{where}unknown setting(s) {', '.join(unknown)}; see docs/settings.md")
    try:
        return _build(config_type, dict(values))
    except SettingError:
        raise
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


def coerce(name: str, annotation: Any, value: Any) -> Any:
    """A value from a file (YAML/JSON) or a flag made the field's type: "0.2,0.8" for a pair, 3 for 3.0."""
    kind, optional = value_type(annotation)
    if value is None:
        if optional:
            return None
        raise SettingError(name, value, "needs a value")
    origin = typing.get_origin(kind)
    if origin in (tuple, list):
        items = [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
        if not isinstance(items, (list, tuple)):
            raise SettingError(name, value, "expected a list")
        inner = typing.get_args(kind)[0] if typing.get_args(kind) else str
        converted = [coerce(name, inner, item) for item in items]
        if (
            origin is tuple
            and typing.get_args(kind)[-1] is not Ellipsis
            and len(converted) != len(typing.get_args(kind))
        ):
            raise SettingError(name, value, f"expected {len(typing.get_args(kind))} values as A,B")
        return tuple(converted) if origin is tuple else converted
    if kind is bool:
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "1", "0"):
            return value.lower() in ("true", "yes", "1")
        if not isinstance(value, bool):
            raise SettingError(name, value, "expected true or false")
        return value
    if kind in (int, float):
        if isinstance(value, bool):
            raise SettingError(name, value, f"expected a{'n integer' if kind is int else ' number'}")
        try:
            number = kind(value) if isinstance(value, str) else value
        except ValueError:
            raise SettingError(name, value, f"expected a{'n integer' if kind is int else ' number'}") from None
        if kind is int and not (isinstance(number, int) or (isinstance(number, float) and number.is_integer())):
            raise SettingError(name, value, "expected an integer")
        return kind(number) if not (isinstance(number, float) and math.isnan(number)) else number
    if kind is str and not isinstance(value, str):
        if isinstance(value, (int, float)):
            return str(value)
        raise SettingError(name, value, "expected text")
    return value


# ------------------------------------------------------------------ settings files
def read_settings_file(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON mapping of setting names to values (nested sections allowed)."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: no such config file")
    from agentdata.inputs import read_text

    text = read_text(path)  # UTF-8 (a byte-order mark is fine), else one line naming the byte
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        if kind == "JSON":
            data = json.loads(text)
        else:
            import yaml

            data = yaml.safe_load(text)
    except Exception as error:  # yaml and json raise several types for malformed text
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not valid {kind} ({first_line})") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of setting names to values, got {type(data).__name__}")
    return data


def unnest(values: dict[str, Any], config_types: list[type]) -> dict[str, Any]:
    """A file's sections named after composed fields (`loop:`) inlined into flat names."""
    composed = {
        item.name
        for kind in config_types
        for item in dataclasses.fields(kind)
        if is_settings(field_types(kind)[item.name])
    }
    flat: dict[str, Any] = {}
    for name, value in values.items():
        if name in composed and isinstance(value, dict):
            flat.update(unnest(value, config_types))
        else:
            flat[name] = value
    return flat
