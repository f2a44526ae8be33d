"""The Hub's Session Trace Simple Format (STS-Format) read back: what `agentdata view --sts` writes
(agentdata/view/sts.py), and any other harness's sessions in that format.

One JSONL file per session: a header line `{"type": "session", "harness", "id", "name"?, ...}` (extra keys
are allowed: agentdata's carry the verdict, the gold answer and the tools), then one line per message,
`{"type": "message", "message": {"role", "content", "reasoningContent"?, "toolCalls"?, "toolCallId"?,
"model"?}}` with `toolCalls` as `[{"id", "function": {"name", "arguments"}}]`. Lines of another type are
not messages and are passed over.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.inputs import read_rows
from agentdata.traces.session import Session, agentdata_fields, checked, count, text_of, tool_call

ROLES = ("system", "user", "assistant", "tool")


def is_sts(first_line: Any) -> bool:
    return isinstance(first_line, dict) and first_line.get("type") == "session"


def read_sts(path: Path) -> list[Session]:
    """The one session of an STS file."""
    rows = iter(read_rows(path))  # a line that is not a JSON object is an InputFileError naming it
    header = next(rows, None)
    if not is_sts(header):
        raise InputFileError(path, 'not an STS session: the first line must be {"type": "session", ...}', row=1)
    for key in ("harness", "id"):
        if not isinstance(header.get(key), str) or not header[key]:
            raise InputFileError(path, f"the session header needs {key!r} (a non-empty string)", row=1)
    messages, models = [], []
    for number, line in enumerate(rows, start=2):
        if line.get("type") != "message":
            continue
        envelope = line.get("message")
        if not isinstance(envelope, dict):
            raise InputFileError(path, f"line {number}: a message line needs a message object")
        messages.append(_message(envelope, path, f"line {number}"))
        if envelope.get("role") == "assistant" and isinstance(envelope.get("model"), str):
            models.append(envelope["model"])
    tools = header.get("tools")
    return [
        Session(
            checked(messages, path, "the session"),
            row=1,
            own_id=header["id"],
            tools=tools if isinstance(tools, list) else None,
            made_by=header["harness"],
            teacher=str(header.get("teacher") or (models[-1] if models else header["harness"])),
            prompt_tokens=count(header.get("prompt_tokens")),
            completion_tokens=count(header.get("completion_tokens")),
            **agentdata_fields(header),
            extra={key: value for key, value in header.items() if key not in ("type", "tools")},
        )
    ]


def _message(shown: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    role = shown.get("role")
    if role not in ROLES:
        raise InputFileError(path, f"{where}: role must be one of {', '.join(ROLES)}, got {role!r}")
    message: dict[str, Any] = {"role": role, "content": text_of(shown.get("content"), path, where)}
    if role == "assistant":
        if isinstance(shown.get("reasoningContent"), str) and shown["reasoningContent"]:
            message["reasoning_content"] = shown["reasoningContent"]
        calls = shown.get("toolCalls") or []
        if not isinstance(calls, list):
            raise InputFileError(path, f"{where}: toolCalls must be a list")
        if calls:
            message["tool_calls"] = [_call(call, path, where) for call in calls]
    if role == "tool" and shown.get("toolCallId"):
        message["tool_call_id"] = str(shown["toolCallId"])
    return message


def _call(call: Any, path: Path, where: str) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        raise InputFileError(path, f"{where}: a tool call needs a function object")
    return tool_call(call.get("id"), function.get("name"), function.get("arguments"), path, where)
