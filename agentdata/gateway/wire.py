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

from agentdata.engines.base import Generation, GenerationRequest, Sampling
from agentdata.formats.native import NativeProtocol

# Deeper JSON than any chat request holds: refused before it is read (Python's parser would overflow its stack).
MAX_JSON_DEPTH = 64
LARGEST = 2**63 - 1  # the largest number the engines take (a seed is an int64 to vLLM and torch)
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


def read_body(raw: bytes) -> Any:
    """A request's JSON body; BadRequest for one that is not JSON or nests deeper than MAX_JSON_DEPTH (which
    the parser, or a later writer of the record, would overflow its stack on)."""
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as error:
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise BadRequest(f"body: not valid JSON ({reason})") from None
    if _too_deep(body):
        raise BadRequest(f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels")
    return body


def _too_deep(value: Any) -> bool:
    waiting = [(value, 1)]
    while waiting:
        value, depth = waiting.pop()
        children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
        for child in children:
            if isinstance(child, dict | list):
                if depth + 1 > MAX_JSON_DEPTH:
                    return True
                waiting.append((child, depth + 1))
    return False


def read_request(body: Any, session: str, run: Sampling | None = None) -> ChatRequest:
    """The body of POST /v1/chat/completions, checked field by field; `run` (the run's sampling) fills the
    sampling fields it leaves unset, and its max_new_tokens caps the request's budget."""
    run = run or Sampling()
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
    stream_options = body.get("stream_options") or {}
    asked = _number(body, ("max_completion_tokens", "max_tokens"), run.max_new_tokens, int, minimum=1)
    sampling = Sampling(
        temperature=_number(body, ("temperature",), run.temperature, float, minimum=0),
        top_p=_number(body, ("top_p",), run.top_p, float, minimum=0, maximum=1),
        max_new_tokens=min(asked, run.max_new_tokens),
        seed=_number(body, ("seed",), run.seed, int),
        stop=_stop(body.get("stop"), run.stop),
    )
    generation = GenerationRequest(
        messages=[_engine_message(message, index) for index, message in enumerate(messages)],
        tools=tools,
        session=session,
        **sampling.request_fields(),
    )
    return ChatRequest(
        generation=generation,
        stream=bool(body.get("stream")),
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        model=str(body.get("model") or ""),
    )


def _number(
    body: dict, names: tuple[str, ...], default: Any, kind: type, minimum: float | None = None, maximum: float = LARGEST
) -> Any:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or (kind is int and isinstance(value, float)):
            raise BadRequest(f"{name}: {'an integer' if kind is int else 'a number'} is expected, got {_shown(value)}")
        if not -LARGEST < value <= maximum or (minimum is not None and value < minimum):  # NaN fails the first
            raise BadRequest(f"{name}: {_shown(value)} is out of range")
        return kind(value)
    return default


def _stop(stop: Any, default: tuple[str, ...]) -> tuple[str, ...]:
    """`stop`: a string or a list of strings; unset (or empty), the run's."""
    if stop is None or stop == [] or stop == "":
        return default
    if isinstance(stop, str):
        return (stop,)
    if isinstance(stop, list) and all(isinstance(item, str) for item in stop):
        return tuple(stop)
    raise BadRequest(f"stop: a string or a list of strings is expected, got {_shown(stop)}")


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


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
