"""Engine options (`--engine-option KEY=VALUE`, a config's `engine_options:`) checked against the types the
engine's constructor declares, before it is built: `timeout_s=abc` or `max_batch_size=[1]` is one line
naming the option, not a crash inside the engine (or every trajectory failing) minutes later.

A factory that passes its options on (`smollm2_engine(**options)` to `HFEngine`) says where with an
`options_from = "module:Class"` attribute. Options the constructor takes as `**kwargs` are not checked here.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from typing import Any

from agentdata.errors import UserError
from agentdata.registry import load_object
from agentdata.settings.fields import show_cut
from agentdata.settings.types import describe, fits


def check_option_types(
    factory: Callable[..., Any], options: Mapping[str, Any], spec: str, flag: str = "--engine-option"
) -> None:
    """Each option whose parameter declares a type has a value of it; else a UserError naming the option and
    the flag that gave it."""
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
        if name in parameters and name in hints and not fits(value, hints[name]):
            raise UserError(
                f"engine {spec!r}: option {name}={show_cut(value)}: expected {describe(hints[name])} "
                f'({flag} KEY=VALUE takes JSON: 3, 0.5, true, "text", [...], {{...}})'
            )
