"""The sandbox as an MCP server (`agentdata sandbox serve --mcp`), on the `mcp` SDK (the `mcp` extra).

One tool, `code_interpreter(code)`: Python run in the client's own sandbox session, which keeps its
variables, imports and files between calls, as the agent loop's code interpreter does. The same
`Sandbox` as the HTTP service runs it, so the same isolation and limits hold: each call at most the
server's `--timeout-s` and `--memory-mb`, no network, a private view of the filesystem.

Whose session a call runs in: over stdio the one client of the process; over streamable HTTP the
client's MCP session (its `mcp-session-id`); a call that comes with neither (a stateless HTTP client)
runs in a session of its own, closed after it. Sessions beyond `--max-sessions` close the least
recently used idle one, as the sandbox always does.
"""

# No `from __future__ import annotations`: the SDK reads the tool's annotations at run time, and its
# `Context` is imported inside `build_mcp_server` (the SDK is optional).
import uuid
from typing import Any

from agentdata.errors import MissingDependencyError
from agentdata.sandbox.local import Sandbox
from agentdata.sandbox.result import ExecResult

TOOL_NAME = "code_interpreter"
TOOL_DESCRIPTION = (
    "Run Python code in a stateful interpreter (variables, imports and files persist between calls) and "
    "return what it prints; the value of a last bare expression is shown, as in a notebook."
)
STDIO_SESSION = "mcp-stdio"  # a stdio server has one client: its session
SESSION_HEADER = "mcp-session-id"
STATUS_NOTES = {
    "timeout": "the code ran past the time limit and was stopped",
    "oom": "the code ran out of memory",
    "killed": "the code was killed",
}


def load_mcp() -> Any:
    """The SDK's server class; a missing SDK is one line saying how to install it."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:
        raise MissingDependencyError("the MCP server (package mcp)", "'agentdata[mcp]'") from None
    return MCPServer


def tool_text(result: ExecResult) -> str:
    """What the model reads back: stdout, then stderr, then why the call stopped when it did not finish."""
    parts = [result.stdout.rstrip("\n")] if result.stdout else []
    if result.stderr:
        parts.append(result.stderr.rstrip("\n"))
    if result.status in STATUS_NOTES:
        parts.append(f"[{STATUS_NOTES[result.status]}]")
    elif result.status == "error" and not result.stderr:
        parts.append(f"[exit code {result.exit_code}]")
    return "\n".join(parts) or "[no output]"


def build_mcp_server(sandbox: Sandbox, stdio: bool) -> Any:
    """An MCP server whose one tool runs code in `sandbox`, a session per client (module docstring)."""
    from mcp.server.mcpserver import Context
    from mcp.server.mcpserver.exceptions import ToolError

    server = load_mcp()(name="agentdata-sandbox", instructions=TOOL_DESCRIPTION, log_level="WARNING")

    @server.tool(name=TOOL_NAME, description=TOOL_DESCRIPTION)
    async def code_interpreter(code: str, ctx: Context) -> str:
        session, throwaway = _session_of(ctx, stdio)
        try:
            result = await sandbox.arun(code, session_id=session, timeout=sandbox.config.timeout_s)
        finally:
            if throwaway:
                await sandbox.aclose_session(session)
        if not result.ok:
            raise ToolError(tool_text(result))  # the client's `isError`: the model reads what went wrong
        return tool_text(result)

    return server


def _session_of(ctx: Any, stdio: bool) -> tuple[str, bool]:
    """(the sandbox session a call runs in, whether it is closed after the call)."""
    if stdio:
        return STDIO_SESSION, False
    headers = ctx.headers or {}
    client = headers.get(SESSION_HEADER)
    if client:
        return f"mcp-{client}", False
    return f"mcp-call-{uuid.uuid4().hex}", True


MCP_PATH = "/mcp"


def serve_mcp_stdio(sandbox: Sandbox) -> None:
    """Serve over stdin/stdout until the client closes them (the process an MCP client starts)."""
    import anyio

    anyio.run(build_mcp_server(sandbox, stdio=True).run_stdio_async)


def mcp_http_app(sandbox: Sandbox, host: str) -> Any:
    """The streamable-HTTP app (POST/GET/DELETE on /mcp), stateful: a session per client."""
    return build_mcp_server(sandbox, stdio=False).streamable_http_app(streamable_http_path=MCP_PATH, host=host)


def serve_mcp_http(sandbox: Sandbox, sock: Any, host: str, log_level: str = "warning") -> None:
    """Serve streamable HTTP on `sock` (from `service.listen`) until interrupted."""
    import uvicorn

    config = uvicorn.Config(mcp_http_app(sandbox, host), log_level=log_level, access_log=False)
    uvicorn.Server(config).run(sockets=[sock])
