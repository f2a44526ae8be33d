"""A small MCP server for the tests of `--tool mcp:...` (tests/test_mcp_tools.py), on the `mcp` SDK: `add`, a
tool that fails (`divide` by zero), and one that keeps state in the server (`count`). Run as a program it
serves over stdio; `app()` is its streamable-HTTP app."""

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer(name="arithmetic", log_level="WARNING")
calls = {"count": 0}


@server.tool(description="Add two integers.")
def add(a: int, b: int) -> int:
    return a + b


@server.tool(description="Divide a by b.")
def divide(a: float, b: float) -> float:
    if b == 0:
        raise ToolError("division by zero")
    return a / b


@server.tool(description="How many times this tool was called, this one included.")
def count() -> int:
    calls["count"] += 1
    return calls["count"]


def app():
    return server.streamable_http_app(streamable_http_path="/mcp")


if __name__ == "__main__":
    server.run("stdio")
