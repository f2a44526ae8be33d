"""A conversation as the page draws it: turns, code highlighted, each call beside its real output.

Everything here is data for the page, never markup: text stays text, and code comes as
(token class, text) pairs from pygments, which the page puts into elements with
`textContent`. Nothing a model wrote is ever parsed as HTML or Markdown.
"""

from __future__ import annotations

import json
import re
from typing import Any

from agentdata.records import Trajectory, message_tool_calls

FENCE = re.compile(r"```([A-Za-z0-9_+.-]*)[ \t]*\n(.*?)(?:\n```|\Z)", re.DOTALL)
CODE_LANGUAGES = {"python", "py", "python3"}
MAX_GOLD_CHARS = 4000


def highlight(code: str, language: str = "python") -> list[list[str]]:
    """`code` as [css class, text] pieces (pygments' short token names); joined, they are the code exactly."""
    from pygments.lexers import PythonLexer
    from pygments.token import STANDARD_TYPES

    if language not in CODE_LANGUAGES:
        return [["", code]]
    pieces: list[list[str]] = []
    for token, text in PythonLexer(stripnl=False, ensurenl=False).get_tokens(code):
        while token not in STANDARD_TYPES:
            token = token.parent
        css = STANDARD_TYPES[token]
        if pieces and pieces[-1][0] == css:
            pieces[-1][1] += text
        else:
            pieces.append([css, text])
    return pieces


def segments(text: str) -> list[dict[str, Any]]:
    """Text split at fenced blocks: {"text"} pieces and {"code", "language", "pieces"} blocks."""
    parts: list[dict[str, Any]] = []
    position = 0
    for match in FENCE.finditer(text):
        if match.start() > position:
            parts.append({"text": text[position : match.start()]})
        language = match.group(1).lower()
        parts.append({"code": match.group(2), "language": language, "pieces": highlight(match.group(2), language)})
        position = match.end()
    if position < len(text):
        parts.append({"text": text[position:]})
    return parts


def conversation(
    messages: list[dict[str, Any]], counts: list[dict[str, Any]] | None = None, seconds: list[dict] | None = None
) -> list[dict]:
    """The turns in order; a tool result is shown under the call it answers (matched by id); each assistant
    turn with what the agent loop measured of it (its tokens, failed calls and seconds), where recorded."""
    results = {m.get("tool_call_id"): m for m in messages if m["role"] == "tool" and m.get("tool_call_id")}
    shown: set[int] = set()
    turns: list[dict[str, Any]] = []
    assistant_number = 0
    for message in messages:
        role = message["role"]
        if role == "tool" and id(message) in shown:
            continue
        turn: dict[str, Any] = {"role": role, "segments": segments(message.get("content") or "")}
        if message.get("reasoning_content"):
            turn["reasoning"] = message["reasoning_content"]
        if role == "assistant":
            turn["stats"] = {**_nth(counts, assistant_number), **_nth(seconds, assistant_number)} or None
            assistant_number += 1
            turn["calls"] = []
            for call in _calls(message):
                result = results.get(call["id"])
                if result is not None:
                    shown.add(id(result))
                turn["calls"].append({**call, "output": None if result is None else result.get("content") or ""})
        if role == "tool":
            turn["tool_call_id"] = message.get("tool_call_id")
            turn["name"] = message.get("name")
        turns.append(turn)
    return turns


def _nth(entries: list[dict[str, Any]] | None, number: int) -> dict[str, Any]:
    entry = entries[number] if isinstance(entries, list) and number < len(entries) else None
    return entry if isinstance(entry, dict) else {}


def _calls(message: dict[str, Any]) -> list[dict[str, Any]]:
    try:
        calls = message_tool_calls(message)
    except (ValueError, KeyError, TypeError):  # arguments that are not JSON: shown as they are
        return [
            {"id": raw.get("id"), "name": (raw.get("function") or {}).get("name"), "arguments": str(raw), "pieces": []}
            for raw in message.get("tool_calls") or []
        ]
    shown = []
    for call in calls:
        if set(call.arguments) == {"code"}:
            shown.append({"id": call.id, "name": call.name, "code": call.code, "pieces": highlight(call.code)})
        else:
            arguments = json.dumps(call.arguments, indent=2, ensure_ascii=False)
            shown.append({"id": call.id, "name": call.name, "arguments": arguments, "pieces": []})
    return shown


def trajectory_view(trajectory: Trajectory, row: int) -> dict[str, Any]:
    """Everything the trajectory page shows, as plain data."""
    metadata = trajectory.metadata or {}
    timings = trajectory.timings or {}
    tests = metadata.get("tests")
    gold = trajectory.answer
    return {
        "row": row,
        "id": trajectory.id,
        "problem_id": trajectory.problem_id,
        "question": trajectory.question,
        "gold": gold[:MAX_GOLD_CHARS],
        "gold_clipped": len(gold) > MAX_GOLD_CHARS,
        "final_answer": trajectory.final_answer,
        "correct": trajectory.correct,
        "finish_reason": trajectory.finish_reason,
        "error": trajectory.error,
        "facts": {
            "source": trajectory.source,
            "domain": trajectory.domain,
            "teacher": trajectory.teacher,
            "protocol": trajectory.format,
            "tool calls": trajectory.num_tool_calls,
            "tool errors": trajectory.num_tool_errors,
            "turns": trajectory.num_turns,
            "prompt tokens": trajectory.prompt_tokens,
            "completion tokens": trajectory.completion_tokens,
            **{f"{key.removesuffix('_s')} (s)": value for key, value in timings.items() if key != "turns"},
            **{f"sampling {key}": value for key, value in (trajectory.sampling or {}).items()},
        },
        "tests": tests,
        "turns": conversation(trajectory.messages, metadata.get("turns"), timings.get("turns")),
        "maskable": True,
    }


def sft_row_view(record: dict[str, Any], row: int) -> dict[str, Any]:
    """An SFT set's row: its conversation and provenance columns (no verdict beyond `correct`)."""
    facts = {key: value for key, value in record.items() if key not in ("messages", "tools") and value is not None}
    return {
        "row": row,
        "id": str(record.get("problem_id") or f"row {row}"),
        "problem_id": record.get("problem_id"),
        "correct": record.get("correct"),
        "facts": facts,
        "turns": conversation(record["messages"]),
        "maskable": True,
    }
