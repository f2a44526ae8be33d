"""Tool-call protocols: how a model writes a code call and how the result is shown back.

- "hermes": `<tool_call>{"name": "code_interpreter", "arguments": {"code": ...}}</tool_call>`,
  results as tool messages (a `<tool_response>` user turn in plain form).
- "codeblock": ```python fences answered by ```output blocks inside the same assistant turn.
- "qwen3coder": Qwen3-Coder's `<tool_call><function=...><parameter=code>` calls, results as in hermes.
- "native": the server's / chat template's own tool calling (`tools=`, `message.tool_calls`).

    protocol = get_protocol("hermes")
    turn = protocol.parse(generation.text + (generation.stop_reason or ""))
"""

from __future__ import annotations

from agentdata.errors import UserError
from agentdata.formats.base import ParsedTurn, Protocol, parse_native_calls
from agentdata.formats.codeblock import CodeblockProtocol
from agentdata.formats.hermes import HermesProtocol
from agentdata.formats.native import NativeProtocol
from agentdata.formats.qwen3coder import Qwen3CoderProtocol
from agentdata.formats.reasoning import split_reasoning
from agentdata.formats.tool_output import DEFAULT_TOOL_OUTPUT_CHARS, tool_output_text, truncate_middle
from agentdata.registry import Registry, call_plugin

# Protocols by name; a plug-in (`module:attr` or `file.py:attr`) names a Protocol class or instance.
PROTOCOL_REGISTRY: Registry[Protocol | type[Protocol]] = Registry("tool-call format")
for _protocol in (HermesProtocol(), CodeblockProtocol(), Qwen3CoderProtocol(), NativeProtocol()):
    PROTOCOL_REGISTRY.register(_protocol.name, _protocol)
PROTOCOLS: tuple[str, ...] = PROTOCOL_REGISTRY.names()


def get_protocol(name: str) -> Protocol:
    """The protocol called `name` (or the plug-in it names); a UserError names the known ones otherwise."""
    if not isinstance(name, str):
        raise UserError(f"unknown tool-call format {name!r}: choose one of {', '.join(PROTOCOLS)}")
    protocol = PROTOCOL_REGISTRY.get(name)
    if isinstance(protocol, type):
        protocol = call_plugin(name, "protocol class", "Class()", protocol)
    if not isinstance(protocol, Protocol):
        raise UserError(f"tool-call format {name!r} is not a Protocol (agentdata.formats.base.Protocol)")
    return protocol


def protocol_of(format: str | None) -> Protocol | None:
    """The protocol a stored row names (its `format`); None when it names none, or names a plug-in that does
    not import here (a set made on another machine): the caller then treats the row as tool calls."""
    if not format:
        return None
    try:
        return get_protocol(format)
    except UserError:
        return None


__all__ = [
    "DEFAULT_TOOL_OUTPUT_CHARS",
    "PROTOCOLS",
    "PROTOCOL_REGISTRY",
    "ParsedTurn",
    "Protocol",
    "get_protocol",
    "protocol_of",
    "parse_native_calls",
    "split_reasoning",
    "tool_output_text",
    "truncate_middle",
]
