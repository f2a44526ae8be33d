"""`--tool mcp:COMMAND` / `--tool mcp:URL`: every tool an MCP server lists, callable from the agent loop.

The server is started (COMMAND, over stdio) or reached (an http(s) URL, streamable HTTP) once per process,
when the loop's tools are loaded, so a server that cannot start stops a run before it begins. Its tools'
schemas are the ones it lists; a call goes to it with the model's arguments and its text comes back as the
tool's output, cut like any tool's, a result it marks as an error counted as a tool error.

The connection lives in an anyio blocking portal (an event loop on a thread of its own): the loop's tools are
loaded once and shared by every run of the process, each with its own event loop. Every connection is closed
when the process exits (`close_all`), and a server the SDK started carries agentdata's mark
(agentdata/processes.py), so it is killed with its children even when agentdata is killed with -9.

One connection is one MCP session, so a server that keeps state keeps it across the trajectories of a run
(agentdata's sandbox has its own per-trajectory sessions: its `code_interpreter` is the built-in tool, not an
MCP one).
"""

from __future__ import annotations

import asyncio
import atexit
import os
import shlex
import threading
from typing import Any

import anyio
import anyio.from_thread

from agentdata import processes
from agentdata.errors import MissingDependencyError, UserError
from agentdata.formats.tool_output import truncate_middle
from agentdata.tools.base import ToolContext, ToolResult, error_result

PREFIX = "mcp:"
CONNECT_TIMEOUT_S = 60.0  # starting a server (its imports) on a loaded machine
CLOSE_TIMEOUT_S = 10.0  # the SDK's own shutdown: stdin closed, 2 s to exit, then its process tree killed


def is_mcp_spec(name: str) -> bool:
    return name.startswith(PREFIX)


class MCPConnection:
    """A client session with one MCP server, held open by one task in an anyio blocking portal (an event loop on
    a thread of its own), until `close`."""

    def __init__(self, target: str):
        self.target = target
        processes.supervise()  # first: the server the SDK starts inherits the mark in os.environ (see _client)
        self._client = _client(target)  # a missing SDK or an empty command is refused before anything starts
        self._failure = ""
        self.client: Any = None
        self.listed: list[Any] = []
        self._ready = threading.Event()
        self._portal_context = anyio.from_thread.start_blocking_portal(name="agentdata-mcp")
        self.portal = self._portal_context.__enter__()
        self._closing = self.portal.call(anyio.Event)
        self._held = self.portal.start_task_soon(self._hold)
        if not self._ready.wait(CONNECT_TIMEOUT_S):
            self.close()
            raise UserError(f"--tool mcp:{target}: the server did not answer in {CONNECT_TIMEOUT_S:g} s")
        if self.client is None:
            self.close()
            raise UserError(f"--tool mcp:{target}: {self._failure}")

    async def _hold(self) -> None:
        """Enter the client, list its tools, signal, and stay inside until `close` (one task: anyio's rule)."""
        try:
            async with self._client as client:
                self.listed = list((await client.list_tools()).tools)
                self.client = client
                self._ready.set()
                await self._closing.wait()
        except Exception as error:  # a command that cannot start, a URL that does not answer
            self._failure = f"cannot connect: {type(error).__name__}: {error}"
        finally:
            self._ready.set()

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The server's result for one call, awaited from any event loop."""
        future = self.portal.start_task_soon(self.client.call_tool, name, arguments)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), timeout)
        finally:
            future.cancel()  # a call past its time is not left running on the server's connection

    def close(self) -> None:
        """Leave the session (the SDK stops a server it started, its process tree included) and the portal;
        bounded: what is still running after CLOSE_TIMEOUT_S is cancelled (the server is then swept by
        agentdata/processes.py when agentdata exits)."""
        if self._portal_context is None:
            return
        try:
            self.portal.call(self._closing.set)
            self._held.result(timeout=CLOSE_TIMEOUT_S)
        except Exception:  # noqa: BLE001 - a session that failed or would not end: cancelled below
            pass
        try:
            self.portal.call(self.portal.stop, True)  # cancel what is left (a call still in flight)
        except RuntimeError:  # the portal already stopped
            pass
        context, self._portal_context = self._portal_context, None
        context.__exit__(None, None, None)


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


def close_all() -> None:
    """Every connection closed when the process ends, so no server outlives a run (registered with the first
    connection, after the process supervisor's own exit sweep, so it runs first: the servers end gracefully)."""
    while _CONNECTIONS:
        _CONNECTIONS.popitem()[1].close()


def mcp_tools(spec: str) -> list[MCPTool]:
    """Every tool the server `spec` (`mcp:COMMAND` or `mcp:URL`) lists; one connection per spec per process."""
    target = spec.removeprefix(PREFIX).strip()
    if not target:
        raise UserError("--tool mcp:COMMAND: give the command that starts the server, or its http(s) URL")
    if target not in _CONNECTIONS:
        if not _CONNECTIONS:
            processes.supervise()
            atexit.register(close_all)
        _CONNECTIONS[target] = MCPConnection(target)
    connection = _CONNECTIONS[target]
    if not connection.listed:
        raise UserError(f"--tool {spec}: the server lists no tools")
    return [MCPTool(connection, listed) for listed in connection.listed]
