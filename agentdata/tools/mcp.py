"""`--tool mcp:COMMAND` / `--tool mcp:URL`: every tool an MCP server lists, callable from the agent loop.

The server is started (COMMAND, over stdio) or reached (an http(s) URL, streamable HTTP) once per process,
when the loop's tools are loaded, so a server that cannot start stops a run before it begins. Its tools'
schemas are the ones it lists; a call goes to it with the model's arguments and its text comes back as the
tool's output, cut like any tool's, a result it marks as an error counted as a tool error.

The connection lives on a thread of its own with its own event loop: the loop's tools are loaded once and
shared by every run of the process, each with its own event loop. One connection is one MCP session, so a
server that keeps state keeps it across the trajectories of a run (agentdata's sandbox has its own
per-trajectory sessions: its `code_interpreter` is the built-in tool, not an MCP one).
"""

from __future__ import annotations

import asyncio
import os
import shlex
import threading
from typing import Any

from agentdata.errors import MissingDependencyError, UserError
from agentdata.formats.tool_output import truncate_middle
from agentdata.tools.base import ToolContext, ToolResult, error_result

PREFIX = "mcp:"
CONNECT_TIMEOUT_S = 60.0  # starting a server (its imports) on a loaded machine


def is_mcp_spec(name: str) -> bool:
    return name.startswith(PREFIX)


class MCPConnection:
    """A client session with one MCP server, held open by a task on this connection's own thread."""

    def __init__(self, target: str):
        self.target = target
        self._client = _client(target)  # a missing SDK or an empty command is refused before anything starts
        self._failure = ""
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, name="agentdata-mcp", daemon=True).start()
        self.client: Any = None
        self.listed: list[Any] = []
        self._stop: asyncio.Event | None = None
        ready = asyncio.run_coroutine_threadsafe(self._ready_signal(), self.loop).result()
        asyncio.run_coroutine_threadsafe(self._hold(ready), self.loop)
        try:
            asyncio.run_coroutine_threadsafe(asyncio.wait_for(ready.wait(), CONNECT_TIMEOUT_S), self.loop).result()
        except TimeoutError:
            raise UserError(f"--tool mcp:{target}: the server did not answer in {CONNECT_TIMEOUT_S:g} s") from None
        if self.client is None:
            raise UserError(f"--tool mcp:{target}: {self._failure}")

    async def _ready_signal(self) -> asyncio.Event:
        self._stop = asyncio.Event()
        return asyncio.Event()

    async def _hold(self, ready: asyncio.Event) -> None:
        """Enter the client, list its tools, signal, and stay inside until `close` (one task: anyio's rule)."""
        try:
            async with self._client as client:
                self.listed = list((await client.list_tools()).tools)
                self.client = client
                ready.set()
                await self._stop.wait()
        except Exception as error:  # a command that cannot start, a URL that does not answer
            self._failure = f"cannot connect: {type(error).__name__}: {error}"
            ready.set()

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The server's result for one call, awaited from any event loop."""
        future = asyncio.run_coroutine_threadsafe(self.client.call_tool(name, arguments), self.loop)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        finally:
            future.cancel()  # a call past its time is not left running on the server's connection


def _client(target: str) -> Any:
    try:
        from mcp import Client
        from mcp.client.stdio import StdioServerParameters
    except ImportError:
        raise MissingDependencyError("MCP tools (package mcp)", "'agentdata[mcp]'") from None
    if target.startswith(("http://", "https://")):
        return Client(target, mode="legacy")  # one MCP session: a stateful server keeps its state
    argv = shlex.split(target)
    if not argv:
        raise UserError("--tool mcp:COMMAND: give the command that starts the server, or its http(s) URL")
    return Client(StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ)))


class MCPTool:
    """One tool of an MCP server, as the agent loop calls tools."""

    def __init__(self, connection: MCPConnection, listed: Any):
        self.connection = connection
        self.name = listed.name
        self.schema = {
            "type": "function",
            "function": {
                "name": listed.name,
                "description": listed.description or "",
                "parameters": listed.input_schema or {"type": "object", "properties": {}},
            },
        }

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        try:
            result = await self.connection.call(self.name, arguments, context.timeout)
        except TimeoutError:
            return error_result(f"{self.name} took longer than {context.timeout:g} s")
        except Exception as error:  # the server went away, or refused the call
            return error_result(f"{self.name} failed: {type(error).__name__}: {error}")
        text = "".join(getattr(block, "text", "") or "" for block in result.content)
        return ToolResult(truncate_middle(text, context.output_chars), ok=not result.is_error)


_CONNECTIONS: dict[str, MCPConnection] = {}


def mcp_tools(spec: str) -> list[MCPTool]:
    """Every tool the server `spec` (`mcp:COMMAND` or `mcp:URL`) lists; one connection per spec per process."""
    target = spec.removeprefix(PREFIX).strip()
    if not target:
        raise UserError("--tool mcp:COMMAND: give the command that starts the server, or its http(s) URL")
    if target not in _CONNECTIONS:
        _CONNECTIONS[target] = MCPConnection(target)
    connection = _CONNECTIONS[target]
    if not connection.listed:
        raise UserError(f"--tool {spec}: the server lists no tools")
    return [MCPTool(connection, listed) for listed in connection.listed]
