"""The hermes protocol: `<tool_call>{json}</tool_call>` calls and tool-role results.

This is the convention of Qwen-family chat templates and of verl's multi-turn code tool
(DemyAgent trains with it). The model writes

    <tool_call>
    {"name": "code_interpreter", "arguments": {"code": "print(1 + 1)"}}
    </tool_call>

and generation stops at `</tool_call>`. The result comes back as a tool message, shown to
the model as a user turn `<tool_response>\\n...\\n</tool_response>`; consecutive results
share one user turn, as Qwen's template renders them.

Rendering follows Qwen's template byte for byte (content, then each call after a newline;
JSON with `json.dumps` defaults, which is what transformers' `tojson` filter produces), so
text the loop shows a model matches what the model's own chat template would produce.

Round trip: `parse(render_assistant(m))` gives back `m`'s content and calls for any code,
including code that contains `</tool_call>` (parse extends a call to the first closing tag
at which its JSON is complete). It cannot for content that itself contains `<tool_call>`
or `</tool_call>`: those are read as markup.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from agentdata.formats import prompts
from agentdata.formats.base import ParsedTurn, Protocol, join_pieces, results_as_user_turns, strip_separator, tool_call
from agentdata.records import TOOL_NAME, ToolCall, message_tool_calls

OPEN_TAG = "<tool_call>"
CLOSE_TAG = "</tool_call>"
# A call whose JSON only completes after this many closing tags is treated as broken:
# it bounds the work on adversarial text; real code rarely holds even one such tag.
MAX_CLOSE_TAGS_TRIED = 16
# How a decoder's error says that the body may go on past this closing tag
# (hermes: the JSON is cut short; qwen3coder: the function is).
INCOMPLETE_BODY = ("bad JSON", "unclosed <function")
# Reads one call's body: (the call, "") or (None, what is wrong with it).
Decoder = Callable[[str], "tuple[ToolCall | None, str]"]


class HermesProtocol(Protocol):
    name = "hermes"
    stop_strings = (CLOSE_TAG,)

    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        example = render_call(ToolCall(code="print(2 + 3)"))
        how_to_call = (
            "To call it, write a JSON object with the tool name and its arguments between "
            f"tool_call tags, like this:\n{example}"
        )
        return prompts.system_prompt(prompts.tools_section(tools, how_to_call))

    def parse(self, text: str) -> ParsedTurn:
        return parse_tagged_calls(text, decode_call, strip_separator)

    def render_assistant(self, message: dict[str, Any]) -> str:
        content = message.get("content") or ""
        blocks = [render_call(call) for call in message_tool_calls(message)]
        return "\n".join(([content] if content else []) + blocks)

    def render_tool(self, message: dict[str, Any]) -> str:
        return f"<tool_response>\n{message.get('content') or ''}\n</tool_response>"

    def stop_after(self, text: str) -> str | None:
        """`</tool_call>` when the text has a call left open (the stop string closed it)."""
        return CLOSE_TAG if any(error.startswith("unclosed") for error in self.parse(text).errors) else None

    def to_plain_messages(self, messages: list[dict[str, Any]], tool_turns: bool = False) -> list[dict[str, Any]]:
        return results_as_user_turns(self, messages)


def render_call(call: ToolCall) -> str:
    payload = {"name": call.name, "arguments": call.arguments}
    return f"{OPEN_TAG}\n{json.dumps(payload, ensure_ascii=False)}\n{CLOSE_TAG}"


def parse_tagged_calls(text: str, decode: Decoder, strip: Callable[[str], str]) -> ParsedTurn:
    """The content and calls of text whose calls stand between `<tool_call>` and `</tool_call>`.

    `decode` reads one call's body (hermes: JSON, qwen3coder: `<function=...>`); `strip`
    drops the separator rendering puts between the content and a call.
    """
    pieces: list[str] = []  # the text between well-formed calls
    current = ""
    calls: list[ToolCall] = []
    errors: list[str] = []
    position = 0
    while (start := text.find(OPEN_TAG, position)) != -1:
        current += text[position:start]
        found = _find_call(text, start + len(OPEN_TAG), decode)
        if found is None:
            errors.append(f"unclosed {OPEN_TAG}: no {CLOSE_TAG} after it")
            position = start
            break
        end, call, error = found
        if call is not None:
            pieces.append(strip(current))
            current = ""
            calls.append(replace(call, id=f"call_{len(calls)}"))
        else:
            errors.append(error)
            current += text[start:end]  # keep what the model wrote, so nothing is lost
        position = end
    else:
        if CLOSE_TAG in text[position:]:
            errors.append(f"{CLOSE_TAG} without an opening {OPEN_TAG}")
    pieces.append(current + text[position:])
    return ParsedTurn(content=join_pieces(pieces), tool_calls=calls, errors=errors)


def _find_call(text: str, body_start: int, decode: Decoder) -> tuple[int, ToolCall | None, str] | None:
    """Find where the call opened before body_start ends: (end, call, error) or None if unclosed.

    The first closing tag ends the call unless the body before it is incomplete (`decode`
    says so with an error in INCOMPLETE_BODY) and a later tag completes it:
    code that prints "</tool_call>". A broken call ends at the first tag.
    """
    first: tuple[int, ToolCall | None, str] | None = None
    close = text.find(CLOSE_TAG, body_start)
    for _ in range(MAX_CLOSE_TAGS_TRIED):
        if close == -1:
            break
        call, error = decode(text[body_start:close])
        end = close + len(CLOSE_TAG)
        if call is not None:
            return end, call, ""
        if first is None:
            first = (end, None, error)
        if not error.startswith(INCOMPLETE_BODY):
            break  # the body was complete, so a later tag cannot fix it
        close = text.find(CLOSE_TAG, close + 1)
    return first


def decode_call(body: str) -> tuple[ToolCall | None, str]:
    """One call's JSON body as a ToolCall, or an error saying what is wrong with it.

    Any tool name is a call (the agent loop answers a name it has no tool for with a tool
    error); the code tool's call must carry a "code" string.
    """
    try:
        # strict=False: models often write raw newlines inside the code string.
        payload = json.loads(body, strict=False)
    except json.JSONDecodeError as error:
        return None, f"bad JSON in tool call: {error.msg} at character {error.pos}"
    if not isinstance(payload, dict):
        return None, f"tool call must be a JSON object, got {type(payload).__name__}"
    call, error = tool_call(payload.get("name"), payload.get("arguments", payload.get("parameters")), "call_0")
    if call is not None and call.name == TOOL_NAME:
        call = ToolCall(call.code)  # hermes code calls have always kept only `code`
    return call, error
