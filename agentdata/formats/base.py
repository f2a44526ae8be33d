"""What every tool-call protocol provides, and the pieces the protocols share.

A protocol is the text convention between a model and the code tool: how the model
writes a call, how the result is shown back, and where generation must stop so the
agent loop can run the call. Trajectories are stored in canonical message form (see
`agentdata.records`); a protocol turns model text into that form (`parse`) and back
(`render_assistant`, `render_tool`, `to_plain_messages`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from agentdata.records import TOOL_NAME, ToolCall


@dataclass
class ParsedTurn:
    """One generated assistant turn, split into its text and its tool calls."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Protocol(ABC):
    name: str
    stop_strings: tuple[str, ...]

    @abstractmethod
    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        """How to call the tool in this protocol, and how to give the final answer."""

    @abstractmethod
    def parse(self, text: str) -> ParsedTurn:
        """Split one generated assistant turn into content and tool calls; never raises."""

    @abstractmethod
    def render_assistant(self, message: dict[str, Any]) -> str:
        """Canonical assistant message -> the text the model writes for it."""

    @abstractmethod
    def render_tool(self, message: dict[str, Any]) -> str:
        """Canonical tool message -> the text the model is shown."""

    @abstractmethod
    def to_plain_messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Canonical messages -> [{"role", "content"}] that any chat template renders."""

    def __repr__(self) -> str:
        return f"<protocol {self.name}>"


def numbered_call(code: str, index: int) -> ToolCall:
    return ToolCall(code=code, id=f"call_{index}", name=TOOL_NAME)


def strip_separator(piece: str) -> str:
    """Drop the one newline that rendering puts between text and the call after it."""
    return piece[:-1] if piece.endswith("\n") else piece


def join_pieces(pieces: list[str]) -> str:
    """Join the text found around tool calls into one content string.

    Rendering writes all content before the calls, so for rendered text every piece
    after the first is empty and this is plain concatenation; for text a model wrote
    around its calls, a newline keeps the pieces from running into each other.
    """
    content = ""
    for piece in pieces:
        if content and piece and not content.endswith("\n") and not piece.startswith("\n"):
            content += "\n"
        content += piece
    return content


def plain_message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "content": message.get("content") or ""}
