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
import stat
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


SHOWN_CHARS = 200  # of a value in an error line (a long path fits): a 10 MB value is named, not echoed


def _show(value: Any) -> str:
    return _showcut(value) if isinstance(value, str) else cut(str(value))


def _showcut(value: Any) -> str:
    """repr(value), cut to SHOWN_CHARS with the full length said."""
    return cut(repr(value))


def cut(text: str) -> str:
    """`text` as an error line shows it: at most SHOWN_CHARS, with the full length said."""
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 20]}… ({len(text):,} characters)"


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
MAX_SETTINGS_BYTES = 16 * 2**20  # a settings file is a page of text; this bounds a mistaken path
MAX_SETTINGS_VALUES = 100_000  # values in a file once YAML aliases are expanded: an alias bomb stops here


def read_settings_file(path: str | Path) -> dict[str, Any]:
    """A YAML or JSON mapping of setting names to values (nested sections allowed).

    Refused in one line: a path that is no regular file, more than 16 MiB, a key given twice in one
    mapping (which one was meant?), a key that is not text, and YAML whose aliases expand past
    MAX_SETTINGS_VALUES values (a "billion laughs" bomb).
    """
    from agentdata.inputs import check_input, read_text

    path = Path(path)
    if stat.S_ISDIR(check_input(path, MAX_SETTINGS_BYTES).st_mode):
        raise UserError(f"{path}: is a folder, not a config file")
    text = read_text(path, MAX_SETTINGS_BYTES)  # UTF-8 (a byte-order mark is fine), else one line naming the byte
    kind = "JSON" if path.suffix == ".json" else "YAML"
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys) if kind == "JSON" else _load_yaml(text)
    except _DuplicateKey as error:
        raise UserError(f"{path}: {error}") from None
    except Exception as error:  # yaml and json raise several types for malformed text
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UserError(f"{path}: not valid {kind} ({first_line})") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of setting names to values, got {type(data).__name__}")
    _check_shape(path, data)
    return data


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _DuplicateKey(f"the key {_showcut(key)} is given twice in one mapping; keep one")
        seen[key] = value
    return seen


def _load_yaml(text: str) -> Any:
    import yaml

    class UniqueKeyLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # libyaml's parser when there
        """safe_load, but a mapping that names one key twice is refused (PyYAML keeps the last)."""

        def construct_mapping(self, node: Any, deep: bool = False) -> dict:
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: overriding its keys is the point
                    continue
                key = self.construct_object(key_node, deep=True)
                if isinstance(key, (str, int, float, bool)) or key is None:
                    if key in seen:
                        line = key_node.start_mark.line + 1
                        raise _DuplicateKey(
                            f"line {line}: the key {_showcut(key)} is given twice in one mapping; keep one"
                        )
                    seen[key] = True
            return super().construct_mapping(node, deep=deep)

    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no Python objects


def _check_shape(path: Path, data: Any) -> None:
    """Every key is text, and the values, aliases expanded, stay within MAX_SETTINGS_VALUES."""
    count = 0
    pending: list[tuple[Any, str]] = [(data, "")]
    while pending:
        value, where = pending.pop()
        count += 1
        if count > MAX_SETTINGS_VALUES:
            raise UserError(
                f"{path}: more than {MAX_SETTINGS_VALUES:,} values once YAML aliases are expanded "
                "(an alias bomb?); write the values out"
            )
        if isinstance(value, dict):
            for key, inner in value.items():
                if not isinstance(key, str):
                    raise UserError(
                        f"{path}: {where or 'top level'}: the key {_showcut(key)} is {type(key).__name__}, "
                        "not text; quote it"
                    )
                pending.append((inner, f"{where}.{key}" if where else key))
        elif isinstance(value, (list, tuple)):
            pending.extend((inner, f"{where}[{index}]") for index, inner in enumerate(value))


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
