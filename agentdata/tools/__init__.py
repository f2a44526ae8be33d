"""Tools a model can call: the `Tool` protocol, the code interpreter and user functions.

    tools = load_tools(["code_interpreter", "mypkg.tools:word_count", "tools.py:lookup"])
    schemas = [tool.schema for tool in tools]   # what the model is shown

A name is a registered tool (`TOOLS`) or a plug-in path to a `Tool` object or class, or to
a plain typed function (wrapped in a `FunctionTool`), or `mcp:COMMAND` / `mcp:URL`: every tool of an
MCP server (tools/mcp.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from agentdata.errors import UserError
from agentdata.registry import Registry, call_plugin, is_builtin, is_plugin_path
from agentdata.tools.base import Tool, ToolContext, ToolResult, error_result
from agentdata.tools.code import CodeInterpreter
from agentdata.tools.function import FunctionTool, argument_problem, function_schema
from agentdata.tools.mcp import is_mcp_spec, mcp_tools

TOOLS: Registry[Any] = Registry("tool")
TOOLS.register("code_interpreter", CodeInterpreter)
DEFAULT_TOOLS = ("code_interpreter",)


def load_tool(name: str) -> Tool:
    entry = TOOLS.get(name)
    if isinstance(entry, type):
        entry = call_plugin(name, "tool class", "Class()", entry)
    if isinstance(entry, Tool):
        return entry
    if not callable(entry):
        raise UserError(f"tool {name!r} is {type(entry).__name__}: a tool is a typed function or a Tool")
    return FunctionTool(entry, spec=name if is_plugin_path(name) else None)


def load_tools(names: Sequence[str]) -> list[Tool]:
    """The tools `names` give, in order (`mcp:SERVER` gives every tool the server lists); two tools with one
    name are a UserError."""
    named: list[tuple[str, Tool]] = []
    for name in names:
        if is_mcp_spec(name):
            named.extend((name, tool) for tool in mcp_tools(name))
        else:
            named.append((name, load_tool(name)))
    seen: dict[str, str] = {}
    for name, tool in named:
        if tool.name in seen:
            raise UserError(f"tools {seen[tool.name]!r} and {name!r} are both called {tool.name!r}")
        seen[tool.name] = name
    return [tool for _, tool in named]


async def call_tool(tools: Sequence[Tool], name: str, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
    """Dispatch one call by tool name; an unknown name is a tool error the model reads."""
    tool = next((tool for tool in tools if tool.name == name), None)
    if tool is None:
        known = ", ".join(repr(tool.name) for tool in tools)
        return error_result(f"unknown tool {name!r}; the tools are {known}")
    if is_builtin(tool):  # the code interpreter: a sandbox failure is not the code's, it is raised
        return await tool.call(arguments, context)
    try:
        return await tool.call(arguments, context)
    except Exception as error:  # a plug-in Tool's failure is data the model reads, as a function tool's is
        return error_result(f"{name} raised {type(error).__name__}: {error}")


__all__ = [
    "DEFAULT_TOOLS",
    "TOOLS",
    "CodeInterpreter",
    "FunctionTool",
    "Tool",
    "ToolContext",
    "ToolResult",
    "argument_problem",
    "call_tool",
    "error_result",
    "function_schema",
    "load_tool",
    "load_tools",
]
