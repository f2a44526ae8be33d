"""The code interpreter: the model's Python runs in the trajectory's sandbox session."""

from __future__ import annotations

from typing import Any

from agentdata.formats.tool_output import tool_output_text
from agentdata.records import CODE_TOOL, TOOL_NAME
from agentdata.tools.base import ToolContext, ToolResult, error_result


class CodeInterpreter:
    """Runs `arguments["code"]` in the sandbox; the session keeps variables between calls."""

    name = TOOL_NAME
    schema: dict[str, Any] = CODE_TOOL

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        code = arguments.get("code")
        if not isinstance(code, str):
            return error_result(f'{self.name} needs a "code" string argument, got {sorted(arguments)}')
        if context.sandbox is None:
            return error_result(f"{self.name} has no sandbox in this run")
        result = await context.sandbox.arun(code, session_id=context.session_id, timeout=context.timeout)
        shown = tool_output_text(result.stdout, result.stderr, result.status, context.output_chars)
        return ToolResult(shown, ok=result.status == "ok")
