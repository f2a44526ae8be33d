"""One conversation read from another tool's trace file, before it becomes a `Trajectory`.

Each reader (atif.py, inspect_log.py, sts.py) turns its format into `Session`s: the messages in
agentdata's canonical form (records.py), the tools offered, and what the file itself says of the
problem and the verdict. `run.py` matches them to problems, grades them and writes the run dir.
A reader raises `InputFileError` naming the file and where in it (a step, a sample, a line) for anything
it cannot read; `Unsupported` is a session it can read but agentdata cannot hold (an image), left out
and reported.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from agentdata.errors import InputFileError
from agentdata.records import FINISH_REASONS, validate_messages


@dataclass
class Session:
    """A conversation as a trace file holds it, with what the file says about it."""

    messages: list[dict[str, Any]]
    row: int  # where in the file: a step list's index, a sample's number, a line
    own_id: str | None = None  # the file's unique id for it (ATIF trajectory_id, an STS session id, Inspect's uuid)
    tools: list[dict[str, Any]] | None = None
    made_by: str = ""  # the harness, agent or eval task that made it
    teacher: str = ""  # the model that answered
    problem_id: str | None = None
    gold: list[str] = field(default_factory=list)  # the file's own gold answers (Inspect targets, our exports)
    source: str | None = None
    domain: str | None = None
    format: str | None = None  # the tool-call protocol, where the file was written by agentdata
    finish_reason: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    num_tool_errors: int = 0
    extra: dict[str, Any] = field(default_factory=dict)  # the file's own metadata, kept as provenance


class Unsupported(Exception):
    """A session agentdata's text trajectories cannot hold (an image, audio): left out, named in the result."""


def text_of(content: Any, path: object, where: str) -> str:
    """A message's content as one string: a string, or a list of text parts (others are `Unsupported`)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputFileError(path, f"{where}: content must be a string or a list of parts")
    texts = []
    for part in content:
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise InputFileError(path, f"{where}: a content part must be an object with a type")
        if part["type"] == "text":
            texts.append(_string(part.get("text"), path, f"{where}: a text part's text"))
        elif part["type"] != "reasoning":  # reasoning parts are read by the readers that have them
            raise Unsupported(f"{where} holds a {part['type']} part; agentdata's trajectories hold text only")
    return "\n".join(texts)


def _string(value: Any, path: object, what: str) -> str:
    if not isinstance(value, str):
        raise InputFileError(path, f"{what} must be a string")
    return value


def tool_call(call_id: Any, name: Any, arguments: Any, path: object, where: str) -> dict[str, Any]:
    """A canonical tool call; `arguments` a JSON object or the JSON text of one."""
    if not isinstance(name, str) or not name:
        raise InputFileError(path, f"{where}: a tool call needs a function name")
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError:
            raise InputFileError(path, f"{where}: tool call {name!r} has arguments that are not JSON") from None
        arguments = decoded
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise InputFileError(path, f"{where}: tool call {name!r} has arguments that are not a JSON object")
    text = json.dumps(arguments, ensure_ascii=False)
    return {"id": str(call_id or ""), "type": "function", "function": {"name": name, "arguments": text}}


def link_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Give each tool result the id and name of the call it answers: a result that names no call answers the
    next unanswered call of the assistant turn before it (the order harnesses run them in)."""
    linked, pending = [], []
    names: dict[str, str] = {}
    for message in messages:
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            pending = [call["id"] for call in calls]
            names.update({call["id"]: call["function"]["name"] for call in calls})
        elif message["role"] == "tool":
            call_id = message.get("tool_call_id") or (pending[0] if pending else "")
            if call_id in pending:
                pending.remove(call_id)
            message = {**message, "tool_call_id": call_id}
            if not message.get("name") and call_id in names:
                message["name"] = names[call_id]
        linked.append(message)
    return linked


def checked(messages: list[dict[str, Any]], path: object, where: str) -> list[dict[str, Any]]:
    """The messages, linked and in canonical form, with a user turn to ask the question; else an InputFileError."""
    messages = link_tool_results(messages)
    try:
        validate_messages(messages)
    except ValueError as error:
        raise InputFileError(path, f"{where}: {error}") from None
    if not any(message["role"] == "user" for message in messages):
        raise InputFileError(path, f"{where}: no user message, so nothing says what was asked")
    return messages


def finish_reason(value: Any) -> str | None:
    """An agentdata finish reason the file recorded, or None (another tool's words mean nothing here)."""
    return value if value in FINISH_REASONS else None


def count(value: Any) -> int:
    """A count the file recorded, or 0 where it recorded none (or nonsense)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def text_or_none(value: Any) -> str | None:
    """A text field the file recorded, or None where it recorded none (or something else)."""
    return value if isinstance(value, str) and value else None


def agentdata_fields(values: dict[str, Any]) -> dict[str, Any]:
    """The Session fields agentdata writes into its own exports (an STS header, ATIF's `extra`): read back the
    same from either format, each None (or empty, or 0) where the file does not carry it."""
    gold = values.get("gold_answer")
    return dict(
        problem_id=text_or_none(values.get("problem_id")),
        gold=[str(gold)] if gold not in (None, "") else [],
        source=text_or_none(values.get("source")),
        domain=text_or_none(values.get("domain")),
        format=text_or_none(values.get("protocol")) or text_or_none(values.get("format")),
        finish_reason=finish_reason(values.get("finish_reason")),
        num_tool_errors=count(values.get("num_tool_errors")),
    )
