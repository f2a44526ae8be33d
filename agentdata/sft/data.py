"""Read an SFT set and turn it into the pre-tokenized rows SFTTrainer trains on.

Input: Parquet or JSONL with `messages` (OpenAI / HF chat messages, tool calls and `tool`
results included; arguments as a JSON string or a mapping) and `tools` (a JSON string or a
list of tool schemas): every form `agentdata curate` writes (`--for hf|trl|verl|openai`,
codeblock sets as plain turns included) and what Open-AgentRL releases. Each is read back
into canonical form first (`agentdata.formats.forms.canonical_messages`). Each conversation is rendered in
its protocol as plain messages any chat template accepts, then tokenized with a mask of
the assistant's own tokens (`assistant_masks`), which SFTTrainer turns into labels.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.formats.forms import canonical_messages
from agentdata.inputs import read_nonempty_rows
from agentdata.records import CODE_TOOL, MESSAGE_KEYS
from agentdata.sft.config import LONG_ROW_POLICIES
from agentdata.training.masking import TokenizedConversation, tokenize_conversation


def cleaned_messages(raw: Any, path: Path, row: int) -> list[dict[str, Any]]:
    """Messages with null keys dropped, content as a string and unknown keys removed."""
    if not isinstance(raw, (list, tuple)) or not raw:
        raise InputFileError(path, "`messages` must be a non-empty list of chat messages", row=row)
    messages = []
    for message in raw:
        if not isinstance(message, dict) or "role" not in message:
            raise InputFileError(path, "every message needs a `role`", row=row)
        clean = {key: value for key, value in message.items() if key in MESSAGE_KEYS and value is not None}
        clean["content"] = clean.get("content") or ""
        if not isinstance(clean["content"], str):
            raise InputFileError(
                path, "message content must be a string (multimodal content is not supported)", row=row
            )
        messages.append(clean)
    if not any(message["role"] == "assistant" for message in messages):
        raise InputFileError(path, "the conversation has no assistant message to train on", row=row)
    return messages


def _without_nulls(value: Any) -> Any:
    """Arrow fills a struct's missing fields with nulls (the union of keys over the file); a tool
    schema has none of its own."""
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def row_tools(raw: Any, path: Path, row: int) -> list[dict[str, Any]]:
    if raw is None or raw == "":
        return [CODE_TOOL]
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except json.JSONDecodeError:
            raise InputFileError(path, "`tools` is not valid JSON", row=row) from None
    if not isinstance(raw, list):
        raise InputFileError(path, "`tools` must be a list of tool schemas", row=row)
    return _without_nulls(raw)


def plain_conversation(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], protocol_name: str
) -> list[dict[str, Any]]:
    """Canonical messages -> plain messages in the protocol, with its system prompt when none is given."""
    from agentdata.formats import get_protocol

    protocol = get_protocol(protocol_name)
    if messages[0]["role"] != "system":
        messages = [{"role": "system", "content": protocol.system_prompt(tools)}, *messages]
    return protocol.to_plain_messages(messages)


def template_tools(tools: list[dict[str, Any]], protocol_name: str) -> list[dict[str, Any]] | None:
    """The tools the chat template lists: a native conversation's (its template wrote the calls); none
    for the others, whose system prompt already says how to call."""
    from agentdata.formats import get_protocol

    return tools if get_protocol(protocol_name).native_tools else None


def row_format(row: dict[str, Any], protocol: str | None, path: Path, number: int) -> str:
    """The protocol a row is trained in: its `format`, else `protocol`, else the default. A `protocol` given
    that the row's own `format` contradicts is refused: SFT would teach one syntax while the run (GRPO's
    rollouts, the record of the trained model) believes another."""
    from agentdata.engines.defaults import DEFAULT_PROTOCOL

    own = row.get("format") or None
    if own and protocol and own != protocol:
        raise InputFileError(
            path,
            f"this row is in {own} (its `format` column) but protocol {protocol} was given: each row is trained "
            f"in its own format, so the run would teach {own} and use {protocol}; leave protocol unset to "
            f"use {own}, or curate the set in {protocol}",
            row=number,
        )
    return own or protocol or DEFAULT_PROTOCOL


def tokenize_sft_set(
    path: str | Path, tokenizer: Any, protocol: str | None, limit: int | None = None
) -> list[dict[str, Any]]:
    """Rows of `input_ids` + `assistant_masks`, one per conversation, in file order."""
    path = Path(path)
    rows = read_nonempty_rows(path)  # Parquet, JSONL, JSON, CSV or a saved dataset
    if not rows:
        raise InputFileError(path, "the SFT set is empty")
    if "messages" not in rows[0]:
        raise InputFileError(path, f"no `messages` column (columns: {sorted(rows[0])})")
    tokenized = []
    for number, row in enumerate(rows[:limit] if limit else rows, start=1):
        conversation = tokenize_row(row, tokenizer, protocol, path, number)
        tokenized.append({"input_ids": conversation.input_ids, "assistant_masks": conversation.assistant_masks})
    return tokenized


def tokenize_row(
    row: dict[str, Any], tokenizer: Any, protocol: str | None, path: Path, number: int
) -> TokenizedConversation:
    """One row of an SFT set (or a trajectory: `messages`, `tools`, `format`) as SFT trains on it: the
    rendered text, its tokens and the mask of the trained ones (`agentdata view` shows the same)."""
    format = row_format(row, protocol, path, number)
    try:
        messages = canonical_messages(cleaned_messages(row.get("messages"), path, number), format)
    except (ValueError, KeyError, TypeError) as error:
        raise InputFileError(path, f"a tool call cannot be read ({error})", row=number) from None
    tools = row_tools(row.get("tools"), path, number)
    plain = plain_conversation(messages, tools, format)
    try:
        return tokenize_conversation(tokenizer, plain, template_tools(tools, format))
    except ValueError as error:
        raise InputFileError(path, str(error), row=number) from None


MAX_LENGTH_CAP = 4096  # the default max_length covers the longest row up to this: memory grows with it


def fitting_max_length(rows: list[dict[str, Any]]) -> tuple[int, int]:
    """(the default max_length: the longest row's tokens up to MAX_LENGTH_CAP, the longest row's tokens)."""
    longest = max(len(row["input_ids"]) for row in rows)
    return max(16, min(longest, MAX_LENGTH_CAP)), longest


def handle_long_rows(
    rows: list[dict[str, Any]], max_length: int, policy: str = "drop", path: str | Path = "SFT set"
) -> tuple[list[dict[str, Any]], int]:
    """Rows longer than `max_length` tokens: dropped (default), kept for TRL to cut at the end
    (`truncate`: the final answer is what goes), or refused (`error`). Returns (rows, how many long).

    Real trajectories are long, and a row cut before its final answer teaches the model to stop
    mid-solution, so the default leaves such rows out and counts them rather than cut them.
    """
    if policy not in LONG_ROW_POLICIES:
        raise ValueError(f"long rows: {policy!r} is not one of {', '.join(LONG_ROW_POLICIES)}")
    long_numbers = [number for number, row in enumerate(rows, start=1) if len(row["input_ids"]) > max_length]
    if not long_numbers or policy == "truncate":
        return rows, len(long_numbers)
    if policy == "error":
        first = long_numbers[0]
        raise InputFileError(
            Path(path),
            f"{len(rows[first - 1]['input_ids'])} tokens, over max_length {max_length} "
            f"({len(long_numbers)} such rows); raise max_length or choose long rows "
            "drop or truncate",
            row=first,
        )
    kept = [row for row in rows if len(row["input_ids"]) <= max_length]
    if not kept:
        longest = max(len(row["input_ids"]) for row in rows)
        raise InputFileError(
            Path(path),
            f"every row is longer than max_length {max_length} (the shortest of them "
            f"is {min(len(r['input_ids']) for r in rows)} tokens, the longest {longest}): "
            "raise max_length",
        )
    return kept, len(long_numbers)
