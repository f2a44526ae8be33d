"""The OpenAI chat-completions wire of the gateway: a harness's request in, a `GenerationRequest` out,
and a `Generation` back as the response (a JSON body, or server-sent events when it asked to stream).

Tools: an engine whose server parses calls (`openai:`, `vllm serve --enable-auto-tool-choice`) gives
`tool_calls` itself and they pass through; an engine that writes text (`hf:`, the embedded SmolLM2,
`vllm:`) is sent the tools for its chat template, and the calls its text holds are read with the
native protocol's parser (`<tool_call>` JSON or Qwen3-Coder's `<function=...>`), as the agent loop does.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from agentdata.engines.base import Generation, GenerationRequest
from agentdata.formats.native import NativeProtocol

# What a request that names no budget gets: enough for a tool call or an answer, not a runaway.
DEFAULT_MAX_TOKENS = 1024
MESSAGE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
ROLES = ("system", "developer", "user", "assistant", "tool")


class BadRequest(ValueError):
    """A request the gateway cannot read: HTTP 400 naming the field."""


@dataclass
class ChatRequest:
    """One chat-completions request as the gateway read it."""

    generation: GenerationRequest
    stream: bool
    include_usage: bool  # stream_options.include_usage: a last chunk with the usage
    model: str


def read_request(body: Any, session: str) -> ChatRequest:
    """The body of POST /v1/chat/completions, checked field by field."""
    if not isinstance(body, dict):
        raise BadRequest("body: a JSON object is expected")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: a non-empty list is expected")
    tools = body.get("tools") or None
    if tools is not None and not isinstance(tools, list):
        raise BadRequest("tools: a list is expected")
    if body.get("n") not in (None, 1):
        raise BadRequest(f"n: the gateway answers one choice per request, got {body.get('n')!r}")
    stop = body.get("stop") or ()
    stream_options = body.get("stream_options") or {}
    generation = GenerationRequest(
        messages=[_engine_message(message, index) for index, message in enumerate(messages)],
        tools=tools,
        max_new_tokens=_number(body, ("max_completion_tokens", "max_tokens"), DEFAULT_MAX_TOKENS, int),
        temperature=_number(body, ("temperature",), 1.0, float),
        top_p=_number(body, ("top_p",), 1.0, float),
        stop=(stop,) if isinstance(stop, str) else tuple(str(item) for item in stop),
        seed=body.get("seed") if isinstance(body.get("seed"), int) else None,
        session=session,
    )
    return ChatRequest(
        generation=generation,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        model=str(body.get("model") or ""),
    )


def _number(body: dict, names: tuple[str, ...], default: Any, kind: type) -> Any:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise BadRequest(f"{name}: a number is expected, got {value!r}")
        return kind(value)
    return default


def _engine_message(message: Any, index: int) -> dict[str, Any]:
    """A message as an engine takes it: the chat keys, content as text (a list of parts joined)."""
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        raise BadRequest(f"messages[{index}]: an object with a role of {', '.join(ROLES)} is expected")
    kept = {key: message[key] for key in MESSAGE_KEYS if message.get(key) is not None}
    kept["role"] = "system" if message["role"] == "developer" else message["role"]
    kept["content"] = content_text(message.get("content"))
    return kept


def content_text(content: Any) -> str:
    """A message's content as text: a string as is, a list of parts as their text joined."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text") or "" for part in content if isinstance(part, dict))
    return str(content)


_NATIVE = NativeProtocol()


def answer_message(generation: Generation, tools_sent: bool) -> tuple[dict[str, Any], str]:
    """The assistant message of a response and its finish reason: the server's calls as they came, else
    the calls the text holds when tools were sent (the native protocol's reading), else the text."""
    message: dict[str, Any] = {"role": "assistant", "content": generation.text}
    calls = generation.tool_calls
    if not calls and tools_sent:
        parsed = _NATIVE.parse(generation.text)
        if parsed.tool_calls:
            calls = [_call_message(call) for call in parsed.tool_calls]
            message["content"] = parsed.content
    if calls:
        message["tool_calls"] = calls
    if generation.reasoning:
        message["reasoning_content"] = generation.reasoning
    if generation.finish_reason == "length":
        return message, "length"
    return message, "tool_calls" if calls else "stop"


def _call_message(call: Any) -> dict[str, Any]:
    wire = call.to_message()
    wire["id"] = f"call_{uuid.uuid4().hex[:12]}"  # ids unique across a session's turns
    return wire


def usage(generation: Generation) -> dict[str, Any]:
    counts: dict[str, Any] = {
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "total_tokens": generation.prompt_tokens + generation.completion_tokens,
    }
    if generation.reasoning_tokens is not None:
        counts["completion_tokens_details"] = {"reasoning_tokens": generation.reasoning_tokens}
    return counts


def completion_body(generation: Generation, request: ChatRequest, completion_id: str) -> dict[str, Any]:
    message, finish_reason = answer_message(generation, bool(request.generation.tools))
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": usage(generation),
    }


def stream_events(body: dict[str, Any], include_usage: bool) -> list[str]:
    """A finished completion as server-sent events: the role, the reasoning, the text, each call, the
    finish reason, the usage when asked for, and [DONE]. The gateway streams what the engine finished
    (engines answer whole), so a streaming client reads the same answer as a plain one."""
    choice, message = body["choices"][0], body["choices"][0]["message"]
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    if message.get("reasoning_content"):
        deltas.append({"reasoning_content": message["reasoning_content"]})
    if message.get("content"):
        deltas.append({"content": message["content"]})
    for index, call in enumerate(message.get("tool_calls") or []):
        deltas.append({"tool_calls": [{"index": index, **call}]})
    chunks = [_chunk(body, delta, None) for delta in deltas]
    chunks.append(_chunk(body, {}, choice["finish_reason"]))
    if include_usage:
        chunks.append({**_chunk(body, {}, None), "choices": [], "usage": body["usage"]})
    return [f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish_reason: str | None) -> dict[str, Any]:
    return {
        "id": body["id"],
        "object": "chat.completion.chunk",
        "created": body["created"],
        "model": body["model"],
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
