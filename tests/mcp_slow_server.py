"""An MCP server whose one tool, `wait`, sleeps, and the engine that calls it: for the tests of what becomes of
an MCP server when a call times out or agentdata is killed (tests/test_processes.py). Run as a program it
serves over stdio and writes its pid to $MCP_SLOW_PIDS; a call to `wait` appends the pid of a child it starts
(a grandchild of agentdata's) and sleeps until that child ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from agentdata.engines.base import Engine, Generation, GenerationRequest


class CallsWait(Engine):
    """hermes: calls `wait` for 600 seconds, then answers 1 once a tool response (the timeout's) is shown."""

    def __init__(self, target: str = "", spec: str = "calls-wait"):  # a plug-in engine spec's signature
        self.spec = spec

    async def generate(self, request: GenerationRequest) -> Generation:
        if any("<tool_response>" in str(m["content"]) for m in request.messages if m["role"] == "user"):
            return Generation("So \\boxed{1}.", None, "stop", 10, 5)
        call = json.dumps({"name": "wait", "arguments": {"seconds": 600}})
        return Generation(f"<tool_call>\n{call}\n", "</tool_call>", "stop", 10, 5)


def serve() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="slow", log_level="WARNING")

    @server.tool(description="Wait this many seconds.")
    def wait(seconds: int) -> str:
        child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
        with open(os.environ["MCP_SLOW_PIDS"], "a") as pids:
            pids.write(f" {child.pid}")
        child.wait()
        return "waited"

    with open(os.environ["MCP_SLOW_PIDS"], "w") as pids:
        pids.write(str(os.getpid()))
    server.run("stdio")


if __name__ == "__main__":
    serve()
