"""Engine options (`--engine-option KEY=VALUE`, a config's `engine_options:`) checked against the types the
engine's constructor declares, before it is built: `timeout_s=abc` or `max_batch_size=[1]` is one line
naming the option, not a crash inside the engine (or every trajectory failing) minutes later.

A factory that passes its options on (`smollm2_engine(**options)` to `HFEngine`) says where with an
`options_from = "module:Class"` attribute. Options the constructor takes as `**kwargs` are not checked here.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.registry import load_object


def check_option_types(factory: Callable[..., Any], options: Mapping[str, Any], spec: str) -> None:
    """Each option whose parameter declares a type has a value of it; else a UserError naming the option."""
    target = getattr(factory, "options_from", None)
    function = load_object(target) if isinstance(target, str) else factory
    if isinstance(function, type):
        function = function.__init__
    try:
        hints = typing.get_type_hints(function)
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError, NameError):  # no readable signature: the engine checks its own
        return
    for name, value in options.items():
        if name in parameters and name in hints and not _matches(value, hints[name]):
            raise UserError(
                f"engine {spec!r}: option {name}={_shown(value)}: expected {_described(hints[name])} "
                '(--engine-option KEY=VALUE takes JSON: 3, 0.5, true, "text", [...], {...})'
            )


def _matches(value: Any, annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if annotation is Any or annotation is inspect.Parameter.empty:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arm) for arm in typing.get_args(annotation))
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
    kind = origin or annotation
    if kind in (dict, Mapping):
        return isinstance(value, dict)
    if kind in (list, tuple, set, Sequence):
        return isinstance(value, (list, tuple))
    return not isinstance(kind, type) or isinstance(value, kind)


def _described(annotation: Any) -> str:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_described(arm) for arm in typing.get_args(annotation)))
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "text", Path: "a path"}
    names[type(None)] = "null"
    kind = typing.get_origin(annotation) or annotation
    return names.get(annotation) or {dict: "a JSON object", list: "a JSON list", tuple: "a JSON list"}.get(
        kind, getattr(kind, "__name__", str(kind))
    )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else f"{text[:60]}… ({len(text):,} characters)"
