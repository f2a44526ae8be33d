"""smolagents as agentdata's teacher harness: `collect --harness` runs this once per problem (docs/harnesses.md).

    agentdata collect problems.jsonl --teacher vllm:/models/Qwen3-8B \
        --harness '.peers/smolagents/bin/python examples/harnesses/smolagents_agent.py code'

`code`: a CodeAgent, its code run by smolagents' own local executor. `tools`: a ToolCallingAgent whose one
tool is agentdata's sandbox as an MCP server (`agentdata sandbox serve --mcp`, started over stdio; the
command is $AGENTDATA_SANDBOX_MCP, default `agentdata sandbox serve --mcp`). The model is the recording
gateway's: OPENAI_BASE_URL and OPENAI_API_KEY come from collect, the question on stdin. The answer is
printed last, boxed, for collect to grade.
"""

from __future__ import annotations

import os
import shlex
import sys

from mcp import StdioServerParameters
from smolagents import CodeAgent, OpenAIServerModel, ToolCallingAgent, ToolCollection

MAX_STEPS = 6


def model() -> OpenAIServerModel:
    return OpenAIServerModel(
        model_id=os.environ.get("AGENTDATA_MODEL", "agentdata"),
        api_base=os.environ["OPENAI_BASE_URL"],
        api_key=os.environ["OPENAI_API_KEY"],
    )


def run_code_agent(question: str) -> object:
    return CodeAgent(tools=[], model=model(), max_steps=MAX_STEPS).run(question)


def run_tool_calling_agent(question: str) -> object:
    command = shlex.split(os.environ.get("AGENTDATA_SANDBOX_MCP", "agentdata sandbox serve --mcp"))
    # the MCP client passes a bare environment by default; the sandbox server needs this one (PATH, PYTHONPATH)
    sandbox = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
    with ToolCollection.from_mcp(sandbox, trust_remote_code=True) as sandbox_tools:
        return ToolCallingAgent(tools=list(sandbox_tools.tools), model=model(), max_steps=MAX_STEPS).run(question)


def main() -> None:
    kind = sys.argv[1] if len(sys.argv) > 1 else "code"
    if kind not in ("code", "tools"):
        sys.exit(f"usage: {sys.argv[0]} [code|tools]")
    question = sys.stdin.read()
    answer = run_code_agent(question) if kind == "code" else run_tool_calling_agent(question)
    print(f"\\boxed{{{answer}}}")


if __name__ == "__main__":
    main()
