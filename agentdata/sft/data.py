"""Turn an SFT set's canonical rows into the pre-tokenized rows SFTTrainer trains on.

`sft_set.read_sft_set` reads the set once into canonical rows (`messages`, `tools`, `format`): a
canonical set as it is, an export or a set from elsewhere converted. Here each conversation is
checked (`cleaned_messages`), rendered in its protocol as plain messages any chat template accepts,
then tokenized with a mask of the assistant's own tokens (`assistant_masks`), which SFTTrainer
turns into labels.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.formats.forms import canonical_messages
from agentdata.records import CODE_TOOL, MESSAGE_KEYS, strip_none
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


def row_tools(raw: Any, path: Path, row: int) -> list[dict[str, Any]]:
    """A row's tool schemas: a JSON string (canonical, OpenAI) or a list (the `hf` export); none: the code tool."""
    if raw is None or raw == "":
        return [CODE_TOOL]
    if isinstance(raw, str):
        try:
            return _decoded_tools(raw)
        except json.JSONDecodeError:
            raise InputFileError(path, "`tools` is not valid JSON", row=row) from None
        except TypeError:
            raise InputFileError(path, "`tools` must be a list of tool schemas", row=row) from None
    if not isinstance(raw, list):
        raise InputFileError(path, "`tools` must be a list of tool schemas", row=row)
    return strip_none(raw)  # Arrow fills a struct's missing fields with nulls; a schema has none of its own


@functools.lru_cache(maxsize=64)
def _decoded_tools(text: str) -> list[dict[str, Any]]:
    """A set repeats a few `tools` texts over all its rows: each is decoded once and the rows share the list
    (read only: rendering a prompt never changes it)."""
    tools = json.loads(text)
    if not isinstance(tools, list):
        raise TypeError("not a list")
    return tools


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


def canonical_row(row: dict[str, Any], form: str | None, protocol: str | None, path: Path, number: int) -> dict:
    """One row of an SFT set as `messages`, `tools` and `format`, canonical: a canonical set's (`form`, as its
    file records it) as it is, checked; an export's or an unmarked set's converted (`canonical_messages`)."""
    format = row_format(row, protocol, path, number)
    messages = cleaned_messages(row.get("messages"), path, number)
    if form != "canonical":
        try:
            messages = canonical_messages(messages, format)
        except (ValueError, KeyError, TypeError) as error:
            raise InputFileError(path, f"a tool call cannot be read ({error})", row=number) from None
    return {"messages": messages, "tools": row_tools(row.get("tools"), path, number), "format": format}


def ready_row(row: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    """A canonical row ready for the tokenizer: its plain conversation and the tools the template lists."""
    return plain_conversation(row["messages"], row["tools"], row["format"]), template_tools(row["tools"], row["format"])


def tokenized_rows(rows: list[dict[str, Any]], tokenizer: Any, path: Path) -> list[dict[str, Any]]:
    """Rows of `input_ids` + `assistant_masks`, one per canonical row (`canonical_row`), in order."""
    tokenized = []
    for number, row in enumerate(rows, start=1):
        conversation = _tokenized(tokenizer, row, path, number)
        tokenized.append({"input_ids": conversation.input_ids, "assistant_masks": conversation.assistant_masks})
    return tokenized


def tokenize_row(
    row: dict[str, Any], tokenizer: Any, protocol: str | None, path: Path, number: int
) -> TokenizedConversation:
    """One canonical row (of a set `view` shows, or a trajectory: `messages`, `tools`, `format`) as SFT trains
    on it: the rendered text, its tokens and the mask of the trained ones (`agentdata view` shows the same)."""
    return _tokenized(tokenizer, canonical_row(row, "canonical", protocol, path, number), path, number)


def _tokenized(tokenizer: Any, row: dict[str, Any], path: Path, number: int) -> TokenizedConversation:
    try:
        return tokenize_conversation(tokenizer, *ready_row(row))
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
