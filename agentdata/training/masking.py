"""Tokenize a conversation so that only what the assistant wrote is trained.

Works for any chat template, with or without `{% generation %}` markers: each assistant
message's character span is found by rendering growing prefixes of the conversation
(the text before the span is the prefix rendered with a generation prompt, the span ends
where the prefix including the message ends), environment text inside a message
(`env_spans`, e.g. codeblock ```output``` blocks) is cut out of the span, and the spans
are mapped to tokens with the tokenizer's offset mapping.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentdata.formats.native import template_messages


@dataclass
class TokenizedConversation:
    input_ids: list[int]
    assistant_masks: list[int]  # 1 on tokens the model wrote (trained), 0 elsewhere
    text: str  # the rendered conversation
    prompt_chars: int  # length of the text before the first assistant message's content
    offsets: list[tuple[int, int]] = field(default_factory=list)  # each token's character span in `text`


def render(
    tokenizer: Any,
    messages: list[dict[str, Any]],
    add_generation_prompt: bool = False,
    tools: list[dict[str, Any]] | None = None,
) -> str:
    """The chat template applied to the messages: their tool calls and tool results (native
    conversations) included, and `tools` for templates that list them in the prompt."""
    options = {"tools": tools} if tools else {}
    return tokenizer.apply_chat_template(
        template_messages(messages), tokenize=False, add_generation_prompt=add_generation_prompt, **options
    )


def _subtract(span: tuple[int, int], holes: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Cut the holes out of one span; returns the pieces left, in order."""
    pieces = [span]
    for hole_start, hole_end in sorted(holes):
        next_pieces = []
        for start, end in pieces:
            if hole_end <= start or hole_start >= end:
                next_pieces.append((start, end))
                continue
            if start < hole_start:
                next_pieces.append((start, hole_start))
            if hole_end < end:
                next_pieces.append((hole_end, end))
        pieces = next_pieces
    return pieces


def trained_char_spans(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> tuple[str, list[tuple[int, int]]]:
    """The rendered text and the character spans of assistant text to train on.

    A span runs from the start of the assistant's content through the template's end of turn
    (so the model learns to stop; a native message's calls, which the template writes there,
    included), minus the message's `env_spans`.
    """
    text = render(tokenizer, messages, tools=tools)
    spans: list[tuple[int, int]] = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(tokenizer, messages[:index], add_generation_prompt=True, tools=tools)
        through = render(tokenizer, messages[: index + 1], tools=tools)
        if not text.startswith(before) or not text.startswith(through):
            raise ValueError(
                "the chat template does not render conversations prefix-consistently "
                "(a prefix of the conversation renders differently from the start of the whole); "
                "use a template that does, or pre-tokenize with your own masks"
            )
        content_start = text.find(message["content"], len(before)) if message["content"] else len(before)
        if content_start < 0 or content_start > len(through):
            raise ValueError(f"assistant message {index}: its content was not found in the rendered text")
        end = len(through.rstrip("\n")) if through.rstrip("\n") else len(through)
        holes = [(content_start + start, content_start + stop) for start, stop in message.get("env_spans") or []]
        spans.extend(_subtract((len(before), end), holes))
    return text, spans


def tokenize_conversation(
    tokenizer: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None
) -> TokenizedConversation:
    """input_ids of the rendered conversation and a mask of the tokens to train on; `tools`
    for native conversations (the template lists them, as it did when the model was asked)."""
    text, spans = trained_char_spans(tokenizer, messages, tools)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    masks = []
    offsets = [(int(start), int(end)) for start, end in encoded["offset_mapping"]]
    for token_start, token_end in offsets:
        # A token is trained when its first character lies in a trained span; a token that
        # straddles the edge of a span goes with the side it starts on.
        inside = any(start <= token_start < end for start, end in spans) if token_end > token_start else False
        masks.append(int(inside))
    first = min((start for start, _ in spans), default=len(text))
    return TokenizedConversation(list(encoded["input_ids"]), masks, text, first, offsets)
