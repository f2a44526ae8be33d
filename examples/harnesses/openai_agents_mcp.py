"""The OpenAI Agents SDK as agentdata's teacher harness, its one tool agentdata's sandbox as an MCP server.

    agentdata collect problems.jsonl --teacher vllm:/models/Qwen3-8B \
        --harness '.peers/openaiagents/bin/python examples/harnesses/openai_agents_mcp.py'

The model is the recording gateway's, over chat completions (OPENAI_BASE_URL, OPENAI_API_KEY from collect;
the gateway serves no Responses API); the sandbox is started over stdio ($AGENTDATA_SANDBOX_MCP, default
`agentdata sandbox serve --mcp`); tracing is off (it would upload to OpenAI). The question comes on stdin;
the agent's final output is printed for collect to grade.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from openai import AsyncOpenAI

INSTRUCTIONS = "Solve the problem. Run Python with the code_interpreter tool. End with the answer in \\boxed{}."
MAX_TURNS = 6


async def solve(question: str) -> str:
    set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=os.environ["OPENAI_BASE_URL"], api_key=os.environ["OPENAI_API_KEY"])
    model = OpenAIChatCompletionsModel(model=os.environ.get("AGENTDATA_MODEL", "agentdata"), openai_client=client)
    command = shlex.split(os.environ.get("AGENTDATA_SANDBOX_MCP", "agentdata sandbox serve --mcp"))
    sandbox = MCPServerStdio(
        params={"command": command[0], "args": command[1:], "env": dict(os.environ)}, client_session_timeout_seconds=60
    )
    async with sandbox:
        agent = Agent(name="solver", instructions=INSTRUCTIONS, model=model, mcp_servers=[sandbox])
        result = await Runner.run(agent, question, max_turns=MAX_TURNS)
    return str(result.final_output)


if __name__ == "__main__":
    print(asyncio.run(solve(sys.stdin.read())))
