"""A model's thinking: `<think>` spans in the text, kept apart from the answer.

Reasoning models write `<think>...</think>` before their answer (Qwen3, DeepSeek-R1 and
their distillations), or the server's reasoning parser hands it over separately as
`reasoning_content`. Either way the trajectory keeps it on the assistant message as
`reasoning_content`, the key Qwen3's chat template reads, and the content holds only the
answer. Whitespace is trimmed the way that template trims it, so rendering the message
gives back the model's text.
"""

from __future__ import annotations

from typing import Any

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"


def split_reasoning(text: str) -> tuple[str | None, str]:
    """(reasoning or None, the rest) for a turn's text.

    A leading `<think>...</think>` span is reasoning; so is everything before a lone
    `</think>` (templates that open `<think>` in the prompt), and all of an unclosed
    leading `<think>` (the token budget ran out while thinking).
    """
    stripped = text.lstrip()
    if stripped.startswith(THINK_OPEN):
        body = stripped[len(THINK_OPEN) :]
        end = body.find(THINK_CLOSE)
        if end == -1:
            return body.strip("\n"), ""
        return body[:end].strip("\n"), body[end + len(THINK_CLOSE) :].lstrip("\n")
    end = text.find(THINK_CLOSE)
    if end != -1 and THINK_OPEN not in text[:end]:
        return text[:end].strip("\n"), text[end + len(THINK_CLOSE) :].lstrip("\n")
    return None, text


def strip_reasoning(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without `reasoning_content` (for a set that trains answers only)."""
    return [{key: value for key, value in message.items() if key != "reasoning_content"} for message in messages]
