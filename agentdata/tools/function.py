"""A user tool: a plain Python function with type hints and a Google-style docstring.

    def word_count(text: str) -> int:
        \"\"\"Count the words in a text.

        Args:
            text: The text to count.
        \"\"\"
        return len(text.split())

Its JSON schema comes from `transformers.utils.get_json_schema` (what chat templates and
TRL use). It runs in a worker process of its own (`tools/_function_worker.py`, started on first
use and kept for the next calls; a coroutine function is awaited there), so the loop's tool
timeout can stop it: a call that passes the limit has its process killed (a thread could not be
stopped, and would hold the run at exit). A user tool is trusted code, unlike the model's code,
which runs in the sandbox: the worker is not isolated. The function must therefore be found again
by a fresh process: defined at the top level of a module or a file. Its return value is shown to
the model as text (JSON for non-strings).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.formats.tool_output import truncate_middle
from agentdata.tools.base import ToolContext, ToolResult, error_result
from agentdata.worker_pool import LineWorker, WorkerDidNotStart, WorkerGone, WorkerPool, WorkerTimedOut

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


STARTUP_TIMEOUT_S = 120.0  # importing the tool's module (and what it imports) on a loaded machine


def function_spec(function: Callable[..., Any]) -> str:
    """How a fresh process finds `function`: `module:qualname`, or `path/file.py:qualname` for a file's."""
    name = getattr(function, "__qualname__", None) or ""
    module = sys.modules.get(getattr(function, "__module__", None) or "")
    if not name or "<" in name or module is None:
        shown = getattr(function, "__name__", repr(function))
        raise UserError(
            f"tool {shown!r}: define it at the top level of a module or file (not inside a function, not a "
            "lambda): a user tool runs in a process of its own, where tool_timeout= can stop it"
        )
    importable = module.__name__ != "__main__" and not module.__name__.startswith("agentdata_plugin_")
    if not importable and getattr(module, "__file__", None):
        return f"{Path(module.__file__).resolve()}:{name}"
    return f"{module.__name__}:{name}"


def _start_worker(spec: str) -> LineWorker:
    """A worker process for one tool (`tools/_function_worker.py`), the tool loaded in it."""
    worker = LineWorker([sys.executable, "-m", "agentdata.tools._function_worker"])
    try:
        started = worker.exchange({"spec": spec, "path": sys.path}, STARTUP_TIMEOUT_S)
    except WorkerGone as error:
        worker.kill()
        raise WorkerDidNotStart(f"its process did not start ({error})") from None
    if "error" in started:
        worker.kill()
        raise WorkerDidNotStart(f"could not load the tool in its process: {started['error']}")
    return worker


class FunctionTool:
    """A `Tool` around a Python function, run in worker processes (one per call in flight, reused)."""

    def __init__(self, function: Callable[..., Any], spec: str | None = None):
        """`spec`: where a fresh process finds the function (a plug-in path); derived when not given."""
        if not callable(function):
            raise UserError(f"tool {function!r} is not a function")
        self.function = function
        self.schema = function_schema(function)
        self.name: str = self.schema["function"]["name"]
        self.spec = spec or function_spec(function)
        self._workers = WorkerPool(lambda: _start_worker(self.spec))
        _OPEN.add(self)

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        problem = argument_problem(arguments, self.schema["function"].get("parameters", {}))
        if problem is not None:
            return error_result(f"{self.name}: {problem}")
        max_chars = max(4 * context.output_chars, 65536)
        try:
            reply = await asyncio.to_thread(self._call, arguments, context.timeout, max_chars)
        except WorkerTimedOut:
            return error_result(f"{self.name} timed out after {context.timeout:g} s (its process was stopped)")
        except (WorkerGone, WorkerDidNotStart) as error:
            return error_result(f"{self.name} failed: {error}")
        if not reply["ok"]:  # the tool's own failure is shown to the model, as code errors are
            return error_result(f"{self.name} raised {reply['error']}")
        return ToolResult(truncate_middle(reply["text"], context.output_chars))

    def _call(self, arguments: dict[str, Any], timeout: float, max_chars: int) -> dict[str, Any]:
        """In a thread: always returns or raises within `timeout` (plus a start-up), never hangs."""
        with self._workers.borrowed() as worker:  # a worker stopped mid-call is killed, never reused
            return worker.exchange({"arguments": arguments, "max_chars": max_chars}, timeout)

    def close(self) -> None:
        """Stop every worker process (a later call starts a fresh one)."""
        self._workers.close()

    def _forget(self) -> None:
        """In a forked child: the parent's workers are not ours to use or kill."""
        self._workers.forget()


_OPEN: weakref.WeakSet[FunctionTool] = weakref.WeakSet()


def _close_all() -> None:
    for tool in list(_OPEN):
        tool.close()


def _forget_all_after_fork() -> None:
    for tool in list(_OPEN):
        tool._forget()


atexit.register(_close_all)
os.register_at_fork(after_in_child=_forget_all_after_fork)
