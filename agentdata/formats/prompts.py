"""The parts of the system prompt that every protocol shares.

Short on purpose: small models have small contexts. The style is the deliberative one
that DemyAgent found best: plan first, call the tool only when it helps, and stop
calling it once the answer is known.
"""

from __future__ import annotations

import json
from typing import Any

from agentdata.records import CODE_TOOL

INTRO = "You solve problems step by step and can run Python code."

DELIBERATIVE_STYLE = (
    "Think first and make a plan. Run code only when a computation or a check helps, "
    "one call at a time, and read its output before going on. Print what you need to see. "
    "Once you know the answer, stop calling the tool."
)

ANSWER_FORMAT = "Give the final answer as \\boxed{answer} at the end."


def assemble(*sections: str) -> str:
    return "\n\n".join(section for section in sections if section)


def system_prompt(how_to_call: str) -> str:
    """A protocol's whole system prompt: the intro, how to call the tool, the style, the answer format."""
    return assemble(INTRO, how_to_call, DELIBERATIVE_STYLE, ANSWER_FORMAT)


def tools_section(tools: list[dict[str, Any]], how_to_call: str) -> str:
    """The `# Tools` section of the protocols whose results come back in `<tool_response>` tags.

    The tools' schemas stand one JSON object a line inside `<tools></tools>`, as Qwen-family
    chat templates list them; `how_to_call` shows the protocol's own call syntax.
    """
    signatures = "\n".join(json.dumps(tool, ensure_ascii=False) for tool in tools or [CODE_TOOL])
    return (
        "# Tools\n\n"
        f"You can call this tool, described in JSON inside <tools></tools> tags:\n<tools>\n{signatures}\n</tools>\n\n"
        f"{how_to_call}\n"
        "The result comes back inside <tool_response></tool_response> tags."
    )
