"""`--tool mcp:COMMAND` / `--tool mcp:URL`: the agent loop calls an MCP server's tools (tests/mcp_arithmetic_server.py),
their schemas read from the server, their calls and results recorded like the code interpreter's."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")  # the `mcp` extra

from agentdata.agent.config import CollectConfig, LoopConfig  # noqa: E402
from agentdata.agent.inspection import read_trajectories  # noqa: E402
from agentdata.agent.runner import collect  # noqa: E402
from agentdata.engines.base import Engine, Generation, GenerationRequest  # noqa: E402
from agentdata.errors import UserError  # noqa: E402
from agentdata.records import Problem  # noqa: E402
from agentdata.tools import ToolContext, load_tools  # noqa: E402
from tests.fakes import InProcessSandbox  # noqa: E402
from tests.sandboxfusion_standin import ServedApp  # noqa: E402

SERVER = Path(__file__).with_name("mcp_arithmetic_server.py")
STDIO = f"mcp:{sys.executable} {SERVER}"
CONTEXT = ToolContext(None, "trajectory-1", 10.0, 100)


class CallsAdd(Engine):
    """hermes: calls `add` (or `divide` on a question saying divide) on the question's two numbers, then
    answers with what the tool returned."""

    spec = "calls-add"

    async def generate(self, request: GenerationRequest) -> Generation:
        question = request.messages[1]["content"]
        results = [m["content"] for m in request.messages if m["role"] == "user" and "<tool_response>" in m["content"]]
        if not results:
            first, second = (int(word) for word in question.split() if word.isdigit())
            tool = "divide" if "divide" in question else "add"
            call = json.dumps({"name": tool, "arguments": {"a": first, "b": second}})
            return Generation(f"<tool_call>\n{call}\n", "</tool_call>", "stop", 10, 5)
        seen = results[-1].split("<tool_response>\n")[1].split("\n</tool_response>")[0]
        return Generation(f"So \\boxed{{{seen}}}.", None, "stop", 10, 5)


def test_the_servers_tools_are_listed_with_its_schemas_and_called():
    add, divide, count = load_tools([STDIO])
    assert (add.name, divide.name, count.name) == ("add", "divide", "count")
    assert add.schema["function"]["description"] == "Add two integers."
    assert add.schema["function"]["parameters"]["properties"]["a"]["type"] == "integer"

    async def calls():
        return await add.call({"a": 6, "b": 7}, CONTEXT), await divide.call({"a": 1, "b": 0}, CONTEXT)

    added, divided = asyncio.run(calls())
    assert (added.content, added.ok) == ("13", True)
    assert not divided.ok and "division by zero" in divided.content  # the server's error is a tool error


def test_the_agent_loop_records_mcp_calls_like_code_calls(tmp_path):
    problems = [Problem("Add 6 and 7", "13"), Problem("Now divide 4 by 0", "2")]
    config = CollectConfig(loop=LoopConfig(protocol="hermes", tools=[STDIO]), concurrency=2)
    collect(problems, tmp_path / "run", config, engine=CallsAdd(), sandbox=InProcessSandbox())
    added, divided = sorted(read_trajectories(tmp_path / "run"), key=lambda t: t.question)
    assert added.correct and (added.num_tool_calls, added.num_tool_errors) == (1, 0)
    call = added.messages[2]["tool_calls"][0]["function"]
    assert (call["name"], json.loads(call["arguments"])) == ("add", {"a": 6, "b": 7})
    assert {tool["function"]["name"] for tool in added.tools} == {"add", "divide", "count"}
    assert divided.num_tool_errors == 1 and "division by zero" in divided.messages[3]["content"]


def test_a_url_reaches_a_server_over_streamable_http():
    sys.path.insert(0, str(SERVER.parent))
    from mcp_arithmetic_server import app

    served = ServedApp(app())
    try:
        (add, _, count) = load_tools([f"mcp:{served.url}/mcp"])

        async def calls():
            return [await tool.call(arguments, CONTEXT) for tool, arguments in ((add, {"a": 1, "b": 2}), (count, {}))]

        added, counted = asyncio.run(calls())
        assert added.content == "3" and counted.ok
    finally:
        served.stop()


def test_a_server_that_cannot_start_is_one_line_before_the_run(tmp_path):
    with pytest.raises(UserError, match=r"--tool mcp:/no/such/server: cannot connect"):
        load_tools(["mcp:/no/such/server"])
    with pytest.raises(UserError, match="give the command"):
        load_tools(["mcp:  "])
    with pytest.raises(UserError, match="are both called 'add'"):
        load_tools([STDIO, f"mcp:{sys.executable}  {SERVER}"])  # the same tools twice
