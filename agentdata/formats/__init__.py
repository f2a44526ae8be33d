"""Tool-call protocols: how a model writes a code call and how the result is shown back.

- "hermes": `<tool_call>{"name": "code_interpreter", "arguments": {"code": ...}}</tool_call>`,
  results as tool messages (a `<tool_response>` user turn in plain form).
- "codeblock": ```python fences answered by ```output blocks inside the same assistant turn.

    protocol = get_protocol("hermes")
    turn = protocol.parse(generation.text + (generation.stop_reason or ""))
"""

from __future__ import annotations

from agentdata.errors import UserError
from agentdata.formats.base import ParsedTurn, Protocol
from agentdata.formats.codeblock import CodeblockProtocol
from agentdata.formats.hermes import HermesProtocol
from agentdata.formats.tool_output import DEFAULT_TOOL_OUTPUT_CHARS, tool_output_text, truncate_middle

_PROTOCOLS: dict[str, Protocol] = {protocol.name: protocol for protocol in (HermesProtocol(), CodeblockProtocol())}
PROTOCOLS: tuple[str, ...] = tuple(_PROTOCOLS)


def get_protocol(name: str) -> Protocol:
    """The protocol called `name`; a UserError names the known ones otherwise."""
    try:
        return _PROTOCOLS[name]
    except (KeyError, TypeError):
        raise UserError(f"unknown tool-call format {name!r}: choose one of {', '.join(PROTOCOLS)}") from None


__all__ = [
    "DEFAULT_TOOL_OUTPUT_CHARS",
    "PROTOCOLS",
    "ParsedTurn",
    "Protocol",
    "get_protocol",
    "tool_output_text",
    "truncate_middle",
]
