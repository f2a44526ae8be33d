"""One settings dataclass from flat values, back to flat values, and settings files.

A composed field (`loop: LoopConfig`) keeps its fields flat: `max_turns` on the command line, in
a file and in records. `build` routes flat names into the composed objects (a `loop:` mapping
works too); `flatten` is the way back, JSON-ready.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agentdata.errors import UserError
from agentdata.settings.fields import (
    SettingError,
    SettingValue,
    coerce,
    default_of,
    field_types,
    gone,
    is_settings,
    leaf_fields,
    renamed_names,
)


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
