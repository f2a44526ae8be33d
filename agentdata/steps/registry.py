"""Filter steps by name: the shared ones here; curate and filter register their built-in steps
in registries of their own whose parent is this one (`curate/steps.py`, `filter/steps.py`), and
look up their settings' `extra_steps` through the same path.

An entry (registered, or a plug-in path `mypkg.steps:ShortQuestion` / `steps.py:ShortQuestion`)
is a `Step` class (built with no arguments), a `Step` instance, or a function
`(settings) -> Step | None` that reads the stage's settings (None: off for these settings).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentdata.errors import UserError
from agentdata.registry import PluginError, Registry, call_plugin
from agentdata.steps.base import Step

FILTER_STEPS: Registry[Any] = Registry("filter step")
FILTER_STEPS.register("no_answer", "agentdata.steps.rules:NoAnswerFilter")
FILTER_STEPS.register("incorrect", "agentdata.steps.rules:IncorrectFilter")
FILTER_STEPS.register("malformed_tool_call", "agentdata.steps.rules:MalformedToolCallFilter")
FILTER_STEPS.register("no_model_turn", "agentdata.steps.rules:NoModelTurnFilter")
# Scored by a model (judge/steps.py), so named here as strings: nothing of the model is imported until used.
FILTER_STEPS.register("prm_low", "agentdata.judge.steps:prm_step")
FILTER_STEPS.register("judge_low", "agentdata.judge.steps:judge_step")


def build_step(name: str | Step, settings: Any = None, registry: Registry[Any] = FILTER_STEPS) -> Step | None:
    """The step `name` gives for `settings` (see the module doc), looked up in `registry`; from Python a
    `Step` instance may stand in a stage's `extra_steps` for its name."""
    entry = name if isinstance(name, Step) else registry.get(name)
    if isinstance(entry, type) and not issubclass(entry, Step):
        raise PluginError(
            str(name), f"is the class {entry.__name__}, not a Step (subclass agentdata.steps.Step) nor a function"
        )
    if isinstance(entry, type) and issubclass(entry, Step):
        entry = call_plugin(name, "filter step class", "Class()", entry)
    elif not isinstance(entry, Step) and callable(entry):
        entry = call_plugin(name, "filter step function", "function(settings)", entry, settings)
    if entry is not None and not isinstance(entry, Step):
        raise UserError(
            f"filter step {name!r} is {type(entry).__name__}, not a Step (agentdata.steps.Step) "
            "nor a function returning one"
        )
    if entry is not None and not entry.reason:
        raise UserError(f"filter step {name!r} has no drop `reason`")
    return entry


def build_steps(names: Sequence[str], settings: Any = None, registry: Registry[Any] = FILTER_STEPS) -> list[Step]:
    """The steps the names give for `settings`, in order; one that the settings turn off is left out."""
    return [step for name in names if (step := build_step(name, settings, registry)) is not None]
