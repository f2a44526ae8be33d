"""A scripted model for the real harnesses' tests (tests/test_real_harnesses.py), loadable as a plug-in engine
spec (`tests/scripted_agents.py:ScriptedAgentModel`): it solves "What is A*B?" in two turns in the form each
harness asks for, so a test's outcome depends on the harness and agentdata, never on a model.

- `tools` offered (a ToolCallingAgent, qwen-agent with use_raw_api): call `code_interpreter` on the sum, then,
  once a result is back, call `final_answer` when offered, else answer `\\boxed{N}` in text;
- smolagents' CodeAgent (no tools, a `<code>` block convention): a code block computing the sum, then one
  calling `final_answer(N)`.
Tool calls are written as `<tool_call>` JSON text, as a chat template teaches: the gateway reads them.
"""

from __future__ import annotations

import json
import re

from agentdata.engines.base import Engine, Generation, GenerationRequest

SUM = re.compile(r"(\d+)\s*\*\s*(\d+)")


class ScriptedAgentModel(Engine):
    def __init__(self, target: str = "", spec: str = "scripted-agent"):
        self.spec = spec

    async def generate(self, request: GenerationRequest) -> Generation:
        question = next(m["content"] for m in request.messages if m["role"] == "user" and SUM.search(m["content"]))
        first, second = SUM.search(question).groups()
        expression, value = f"{first} * {second}", int(first) * int(second)
        answered = any(_holds_a_result(message) for message in request.messages)
        if request.tools:
            names = {tool["function"]["name"] for tool in request.tools}
            if not answered:
                return _call("code_interpreter", {"code": f"print({expression})"})
            if "final_answer" in names:
                return _call("final_answer", {"answer": str(value)})
            return _text(f"The sandbox printed {value}, so the answer is \\boxed{{{value}}}.")
        if not answered:
            return _text(f"Thought: compute it.\n<code>\nresult = {expression}\nprint(result)\n</code>")
        return _text(f"Thought: I have it.\n<code>\nfinal_answer({value})\n</code>")


def _holds_a_result(message: dict) -> bool:
    return message["role"] == "tool" or (message["role"] == "user" and "Observation:" in message["content"])


def _call(name: str, arguments: dict) -> Generation:
    return _text(f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>")


def _text(text: str) -> Generation:
    return Generation(text, None, "stop", 100, 20)
