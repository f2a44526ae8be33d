"""The `Tool` protocol: what the agent loop calls when a model makes a tool call.

A tool has a `name`, a JSON `schema` (the OpenAI / Hugging Face `{"type": "function",
"function": {...}}` form that chat templates and system prompts show the model) and an
async `call(arguments, context)`. Whatever goes wrong inside a call (bad arguments, an
exception in user code, a timeout) comes back as a `ToolResult` with `ok=False` and a
message the model can read: a tool failure is data, not an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from agentdata.sandbox.base import CodeSandbox


@dataclass
class ToolContext:
    """What one call may use: the trajectory's sandbox session and the loop's limits."""

    sandbox: CodeSandbox | None
    session_id: str
    timeout: float
    output_chars: int | None


@dataclass
class ToolResult:
    content: str  # what the model is shown, already cut to the output limit
    ok: bool = True  # False counts as a tool error


@runtime_checkable
class Tool(Protocol):
    name: str
    schema: dict[str, Any]

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        """Run the tool; never raises for anything the model or the tool's own code did."""
        ...


def error_result(message: str) -> ToolResult:
    return ToolResult(f"Error: {message}", ok=False)
