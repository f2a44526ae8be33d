"""Does a value from a file or a flag fit a declared type? For settings agentdata does not own: engine
constructors' options (`--engine-option`) and TRL's config fields set under a stage's `trl` mapping.

`fits(value, annotation)` reads the common annotations (numbers, text, booleans, lists, mappings,
`X | None`, `Literal[...]`, enums by value or name); an annotation it cannot read lets the value
through (the owner still checks it). `describe(annotation)` says in words what fits, for the error line.
"""

from __future__ import annotations

import enum
import inspect
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

_UNIONS = (typing.Union, types.UnionType)


def fits(value: Any, annotation: Any) -> bool:
    """True when `value` is one of what `annotation` allows (an int for a float; not a bool for a number)."""
    origin = typing.get_origin(annotation)
    if annotation is Any or annotation is inspect.Parameter.empty or isinstance(annotation, (str, typing.TypeVar)):
        return True
    if origin in _UNIONS:
        return any(fits(value, arm) for arm in typing.get_args(annotation))
    if origin is typing.Literal:
        return value in typing.get_args(annotation)
    if annotation is type(None):
        return value is None
    if annotation is bool:
        return isinstance(value, bool)
    if annotation is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if annotation is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if annotation is str or annotation is Path:
        return isinstance(value, str)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return isinstance(value, annotation) or value in {m.value for m in annotation} | set(annotation.__members__)
    kind = origin or annotation
    if kind in (dict, Mapping):
        return isinstance(value, dict)
    if kind in (list, tuple, set, Sequence):
        return isinstance(value, (list, tuple))
    return not isinstance(kind, type) or isinstance(value, kind)


def describe(annotation: Any) -> str:
    """What fits `annotation`, in words: "a number or null"."""
    origin = typing.get_origin(annotation)
    if origin in _UNIONS:
        return " or ".join(dict.fromkeys(describe(arm) for arm in typing.get_args(annotation)))
    if origin is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(annotation)))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return "one of " + ", ".join(repr(member.value) for member in annotation)
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "text", Path: "a path"}
    names[type(None)] = "null"
    if annotation in names:
        return names[annotation]
    kind = origin or annotation
    plural = {dict: "a mapping", Mapping: "a mapping", list: "a list", tuple: "a list", Sequence: "a list"}
    return plural.get(kind, getattr(kind, "__name__", str(kind)))
