"""A trajectory as the text a scorer reads: its steps (for a process reward model) or a transcript
(for an LLM judge), each rendered in the trajectory's own protocol, as its model wrote and saw it."""

from __future__ import annotations

import re
from typing import Any

from agentdata.engines.defaults import DEFAULT_PROTOCOL
from agentdata.formats import protocol_of
from agentdata.formats.base import Protocol
from agentdata.formats.hermes import HermesProtocol
from agentdata.formats.tool_output import truncate_middle
from agentdata.records import message_tool_calls

PARAGRAPH = re.compile(r"\n\s*\n")
JUDGE_TOOL_OUTPUT_CHARS = 2000  # a flood of output tells a judge nothing more than its head and tail


def _protocol(format: str | None) -> Protocol:
    """The row's protocol; a row naming none was made by the default protocol, and a plug-in protocol not
    importable here has its calls shown the hermes way (tagged JSON: a judge reads them either way)."""
    return protocol_of(format or DEFAULT_PROTOCOL) or HermesProtocol()


def trajectory_steps(messages: list[dict[str, Any]], format: str | None, unit: str = "turn") -> list[str]:
    """The assistant's steps in order: each assistant turn as its model wrote it (text, then its calls), or each
    paragraph of it. The outputs of a turn's calls open the next step: a step's score then covers what the
    model wrote, and the next step is read knowing what the tool printed."""
    protocol = _protocol(format)
    steps: list[str] = []
    pending_outputs: list[str] = []
    for message in messages:
        if message.get("role") == "tool":
            pending_outputs.append(protocol.render_tool(message))
        elif message.get("role") == "assistant":
            text = protocol.render_assistant(message).strip()
            pieces = (
                [piece.strip() for piece in PARAGRAPH.split(text) if piece.strip()] if unit == "paragraph" else [text]
            )
            pieces = pieces or [""]
            if pending_outputs:
                pieces[0] = "\n".join([*pending_outputs, pieces[0]]).strip()
                pending_outputs = []
            steps.extend(pieces)
    return [step for step in steps if step] or [""]


def question_of(messages: list[dict[str, Any]], question: str | None = None) -> str:
    """The question the trajectory answers: the stored one, else its first user message."""
    if question:
        return question
    return next((m.get("content") or "" for m in messages if m.get("role") == "user"), "")


def transcript(messages: list[dict[str, Any]]) -> str:
    """What the judge reads: every turn after the question, labelled, calls and outputs marked (the same
    whatever protocol made them, so one rubric reads them all)."""
    parts: list[str] = []
    turn = 0
    for message in messages:
        role = message.get("role")
        if role == "assistant":
            turn += 1
            text = (message.get("content") or "").strip()
            calls = [f"[tool call: {name}]\n{text}" for name, text in _calls(message)]
            parts.append("\n".join([f"### Assistant (turn {turn})", *(p for p in [text, *calls] if p)]))
        elif role == "tool":
            output = truncate_middle(message.get("content") or "", JUDGE_TOOL_OUTPUT_CHARS)
            parts.append(f"### Tool output ({message.get('name') or 'tool'})\n{output}")
        elif role == "user" and parts:  # a notice of the loop (e.g. an unreadable call), after the question
            parts.append(f"### User\n{message.get('content') or ''}")
    return "\n\n".join(parts)


def _calls(message: dict[str, Any]) -> list[tuple[str, str]]:
    """(tool name, what it was asked to run) per call; a call whose arguments are not JSON as written."""
    try:
        calls = message_tool_calls(message)
    except ValueError:
        return [(c["function"].get("name"), str(c["function"].get("arguments"))) for c in message["tool_calls"]]
    return [
        (call.name, call.code or ", ".join(f"{key}={value!r}" for key, value in call.arguments.items()))
        for call in calls
    ]
