"""A user tool: a plain Python function with type hints and a Google-style docstring.

    def word_count(text: str) -> int:
        \"\"\"Count the words in a text.

        Args:
            text: The text to count.
        \"\"\"
        return len(text.split())

Its JSON schema comes from `transformers.utils.get_json_schema` (what chat templates and
TRL use). It runs in this process, in a worker thread (a coroutine function is awaited),
with the loop's tool timeout: a user tool is trusted code, unlike the model's code, which
runs in the sandbox. Its return value is shown to the model as text (JSON for non-strings).
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Callable
from typing import Any

from agentdata.errors import UserError
from agentdata.formats.tool_output import truncate_middle
from agentdata.tools.base import ToolContext, ToolResult, error_result

# JSON schema types -> the Python values that satisfy them (bool is not a number here).
_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list, tuple),
    "object": (dict,),
    "null": (type(None),),
}


def function_schema(function: Callable[..., Any]) -> dict[str, Any]:
    """The tool schema of `function`; a UserError says what its hints or docstring lack."""
    from transformers.utils import get_json_schema

    try:
        return get_json_schema(function)
    except Exception as error:  # transformers' TypeHintParsingException / DocstringParsingException
        name = getattr(function, "__name__", repr(function))
        raise UserError(
            f"tool {name!r}: cannot derive its JSON schema ({error}); give every argument a type "
            "hint and describe it under Args: in the docstring"
        ) from None


def argument_problem(arguments: dict[str, Any], parameters: dict[str, Any]) -> str | None:
    """What is wrong with `arguments` for a JSON-schema `parameters` object, or None."""
    properties = parameters.get("properties", {})
    missing = [name for name in parameters.get("required", []) if name not in arguments]
    if missing:
        return f"missing argument(s) {missing}"
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        return f"unknown argument(s) {unknown}; the arguments are {sorted(properties)}"
    for name, value in arguments.items():
        if not _matches(value, properties[name]):
            return f"argument {name!r} should be {_type_names(properties[name])}, got {type(value).__name__}"
    return None


def _matches(value: Any, schema: dict[str, Any]) -> bool:
    if "enum" in schema and value not in schema["enum"]:
        return False
    kinds = schema.get("type")
    if kinds is None:
        return True
    kinds = kinds if isinstance(kinds, list) else [kinds]
    for kind in kinds:
        python_types = _JSON_TYPES.get(kind)
        if python_types is None or (
            isinstance(value, python_types) and not (isinstance(value, bool) and kind in ("integer", "number"))
        ):
            return True
    return False


def _type_names(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return f"one of {schema['enum']}"
    kinds = schema.get("type", "any")
    return " or ".join(kinds) if isinstance(kinds, list) else str(kinds)


class FunctionTool:
    """A `Tool` around a Python function."""

    def __init__(self, function: Callable[..., Any]):
        if not callable(function):
            raise UserError(f"tool {function!r} is not a function")
        self.function = function
        self.schema = function_schema(function)
        self.name: str = self.schema["function"]["name"]

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        problem = argument_problem(arguments, self.schema["function"].get("parameters", {}))
        if problem is not None:
            return error_result(f"{self.name}: {problem}")
        try:
            value = await asyncio.wait_for(self._invoke(arguments), timeout=context.timeout)
        except asyncio.TimeoutError:
            return error_result(f"{self.name} timed out after {context.timeout:g} s")
        except Exception as error:  # the tool's own failure is shown to the model, as code errors are
            return error_result(f"{self.name} raised {type(error).__name__}: {error}")
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
        return ToolResult(truncate_middle(text, context.output_chars))

    async def _invoke(self, arguments: dict[str, Any]) -> Any:
        if inspect.iscoroutinefunction(self.function):
            return await self.function(**arguments)
        return await asyncio.to_thread(self.function, **arguments)
