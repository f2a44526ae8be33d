"""The qwen3coder protocol: Qwen3-Coder's XML-style calls, results as tool messages.

Qwen3-Coder (the teacher DemyAgent's SFT data came from) writes

    <tool_call>
    <function=code_interpreter>
    <parameter=code>
    print(1 + 1)
    </parameter>
    </function>
    </tool_call>

and generation stops at `</tool_call>`. Parameter values are raw text, not JSON, so code
needs no escaping. Results come back as in hermes: a user turn of `<tool_response>` blocks.

Rendering follows Qwen3-Coder's chat template: the content, a blank line, then the calls
one per line. Parameters other than `code` are written as the template writes them
(strings raw, anything else as JSON) and read back as strings unless they parse as JSON.

Round trip: `parse(render_assistant(m))` gives back `m`'s content and calls unless
- the content itself contains `<tool_call>` or `</tool_call>`: those are read as markup;
- the code contains a line `</parameter>` followed by a line `<parameter=...>` or by the
  end of the call (`</function>`): that closes the value, as in Qwen3-Coder's own parser.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentdata.formats import prompts
from agentdata.formats.base import ParsedTurn, Protocol, results_as_user_turns, tool_call
from agentdata.formats.hermes import CLOSE_TAG, OPEN_TAG, HermesProtocol, parse_tagged_calls
from agentdata.records import ToolCall, message_tool_calls

FUNCTION_OPEN = re.compile(r"\s*<function=([^>\n]+)>\n")
FUNCTION_CLOSE = re.compile(r"</function>\s*\Z")
PARAMETER_OPEN = re.compile(r"<parameter=([^>\n]+)>\n")
# A value ends at a `</parameter>` line followed by the next parameter or the end of the function.
PARAMETER_END = re.compile(r"\n</parameter>\s*(?=<parameter=|\Z)")


class Qwen3CoderProtocol(Protocol):
    name = "qwen3coder"
    stop_strings = (CLOSE_TAG,)

    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        example = render_call(ToolCall(code="print(2 + 3)"))
        return prompts.system_prompt(prompts.tools_section(tools, f"To call it, write:\n{example}"))

    def parse(self, text: str) -> ParsedTurn:
        return parse_tagged_calls(text, decode_call, _strip_separator)

    def stop_after(self, text: str) -> str | None:
        return CLOSE_TAG if any(error.startswith("unclosed") for error in self.parse(text).errors) else None

    def render_assistant(self, message: dict[str, Any]) -> str:
        content = message.get("content") or ""
        calls = "\n".join(render_call(call) for call in message_tool_calls(message))
        if not calls:
            return content
        return f"{content}\n\n{calls}" if content else calls

    def render_tool(self, message: dict[str, Any]) -> str:
        return HermesProtocol().render_tool(message)

    def to_plain_messages(self, messages: list[dict[str, Any]], tool_turns: bool = False) -> list[dict[str, Any]]:
        return results_as_user_turns(self, messages)


def render_call(call: ToolCall) -> str:
    parameters = "".join(
        f"<parameter={name}>\n{_value_text(value)}\n</parameter>\n" for name, value in call.arguments.items()
    )
    return f"{OPEN_TAG}\n<function={call.name}>\n{parameters}</function>\n{CLOSE_TAG}"


def _value_text(value: Any) -> str:
    """As Qwen3-Coder's template writes a value: strings raw, anything else as JSON."""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _strip_separator(piece: str) -> str:
    """Drop the blank line (or the one newline) that separates text from the call after it."""
    for separator in ("\n\n", "\n"):
        if piece.endswith(separator):
            return piece[: -len(separator)]
    return piece


def decode_call(body: str, call_id: str = "call_0") -> tuple[ToolCall | None, str]:
    """One call's `<function=...>` body -> a code call, or an error saying what is wrong."""
    opening = FUNCTION_OPEN.match(body)
    if opening is None:
        return None, "tool call has no <function=NAME> line"
    closing = FUNCTION_CLOSE.search(body, opening.end())
    if closing is None:
        return None, "unclosed <function=...>: no </function> before </tool_call>"
    arguments, error = _parameters(body[opening.end() : closing.start()])
    if arguments is None:
        return None, error
    return tool_call(opening.group(1).strip(), arguments, call_id)


def _parameters(inner: str) -> tuple[dict[str, Any] | None, str]:
    arguments: dict[str, Any] = {}
    position = 0
    while (opening := PARAMETER_OPEN.match(inner, position)) is not None:
        value_end = PARAMETER_END.search(inner, opening.end() - 1)
        if value_end is None:
            return None, f"unclosed <parameter={opening.group(1)}>"
        arguments[opening.group(1).strip()] = inner[opening.end() : value_end.start()]
        position = value_end.end()
    if inner[position:].strip():
        return None, "text inside <function> that is not a <parameter=NAME> block"
    return {name: _typed(name, value) for name, value in arguments.items()}, ""


def _typed(name: str, value: str) -> Any:
    """Code stays text; other values are JSON when they parse as JSON (numbers, lists, ...)."""
    if name == "code":
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
