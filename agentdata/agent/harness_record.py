"""A harness's recorded gateway session, read as a trajectory: its conversation, counts and final answer.

The conversation is the last answered exchange: the messages the harness sent (each request carries the
whole history so far) and the answer the model gave, in canonical form. An exchange whose messages are
not the start of that conversation (a harness's planning or summary call) is kept whole in the metadata,
so the record holds every exchange exactly; the others are kept as their settings, usage and timings.
"""

from __future__ import annotations

import json
from typing import Any

from agentdata.gateway import Exchange, Session
from agentdata.gateway.wire import content_text
from agentdata.records import ToolCall
from agentdata.verify.extract import last_boxed


def conversation(session: Session) -> list[dict[str, Any]]:
    """The last answered exchange's messages and its answer, canonical; [] when the model never answered."""
    answered = session.answered()
    if not answered:
        return []
    last = answered[-1]
    sent = [_canonical(message) for message in last.messages if isinstance(message, dict)]
    return _named_tool_results([*sent, _canonical(last.response["choices"][0]["message"])])


def _canonical(message: dict[str, Any]) -> dict[str, Any]:
    role = {"developer": "system", "function": "tool"}.get(message.get("role"), message.get("role"))
    canonical: dict[str, Any] = {"role": role, "content": content_text(message.get("content"))}
    if role == "assistant":
        if message.get("reasoning_content"):
            canonical["reasoning_content"] = str(message["reasoning_content"])
        calls = [_canonical_call(call) for call in message.get("tool_calls") or [] if isinstance(call, dict)]
        if calls:
            canonical["tool_calls"] = calls
    if role == "tool":
        canonical["tool_call_id"] = str(message.get("tool_call_id") or "")
        if message.get("name"):
            canonical["name"] = str(message["name"])
    return canonical


def _canonical_call(call: dict[str, Any]) -> dict[str, Any]:
    """A call with its arguments as a JSON string; arguments that are no JSON object are kept as sent."""
    try:
        return ToolCall.from_message(call).to_message()
    except (KeyError, TypeError, ValueError):
        function = call.get("function") or {}
        arguments = function.get("arguments")
        return {
            "id": str(call.get("id") or ""),
            "type": "function",
            "function": {
                "name": str(function.get("name") or ""),
                "arguments": arguments if isinstance(arguments, str) else json.dumps(arguments),
            },
        }


def _named_tool_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each tool result tied to its call: one that names no call (qwen-agent sends none) answers the next
    unanswered call of the assistant message before it, and one without a name (OpenAI's wire leaves it
    out) gets the name of the call it answers."""
    names: dict[str, str] = {}
    unanswered: list[str] = []
    for message in messages:
        if message["role"] == "assistant":
            calls = [call for call in message.get("tool_calls") or [] if call.get("id")]
            names.update((call["id"], call["function"]["name"]) for call in calls)
            unanswered = [call["id"] for call in calls]
        elif message["role"] == "tool":
            if not message["tool_call_id"] and unanswered:
                message["tool_call_id"] = unanswered[0]
            if message["tool_call_id"] in unanswered:
                unanswered.remove(message["tool_call_id"])
            if "name" not in message and message["tool_call_id"] in names:
                message["name"] = names[message["tool_call_id"]]
    return messages


def tool_schemas(session: Session) -> list[dict[str, Any]]:
    """The tools the harness offered the model in its last answered exchange."""
    answered = session.answered()
    return list(answered[-1].tools or []) if answered else []


def token_counts(session: Session) -> tuple[int, int]:
    """(the first prompt's tokens, every answer's tokens): what the agent loop counts."""
    usages = [exchange.response.get("usage") or {} for exchange in session.answered()]
    prompt = int(usages[0].get("prompt_tokens") or 0) if usages else 0
    return prompt, sum(int(usage.get("completion_tokens") or 0) for usage in usages)


def teacher(session: Session, engine_spec: str) -> str:
    """The model that answered the session: the engine's spec, unless every answer came from another one
    behind it (smollm2-tir answers a request it shows no worked example as plain smollm2)."""
    answered_by = {exchange.answered_by or engine_spec for exchange in session.answered()}
    return answered_by.pop() if len(answered_by) == 1 else engine_spec


def exchange_log(session: Session, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every exchange of the session, in order: its settings, status, usage and seconds, and the prompt as
    the engine rendered it (tools included); one whose messages and answer are not the start of the
    trajectory's conversation, or was not answered, also whole."""
    log = []
    for exchange in session.exchanges:
        entry = {
            "sampling": exchange.sampling,
            "status": exchange.status,
            "messages_sent": len(exchange.messages),
            "seconds": exchange.seconds,
            "started_at": exchange.started_at,
        }
        if exchange.prompt is not None:
            entry["prompt"] = exchange.prompt
        if exchange.answered_by:
            entry["answered_by"] = exchange.answered_by
        if exchange.response:
            entry["usage"] = exchange.response.get("usage")
            entry["finish_reason"] = exchange.response["choices"][0]["finish_reason"]
        if exchange.error:
            entry["error"] = exchange.error
        if not _starts(exchange, messages) or exchange.response is None:
            entry["exchange"] = exchange.as_dict()
        log.append(entry)
    return log


def _starts(exchange: Exchange, messages: list[dict[str, Any]]) -> bool:
    """Whether the exchange, its answer included, is the start of the conversation as it was kept (a harness
    that rewrites an answer in its history, as smolagents does, has the answer kept whole in the log)."""
    sent = [_canonical(message) for message in exchange.messages if isinstance(message, dict)]
    if exchange.response is not None:
        sent.append(_canonical(exchange.response["choices"][0]["message"]))
    return _named_tool_results(sent) == messages[: len(sent)]


def answer_text(stdout: str, messages: list[dict[str, Any]], domain: str) -> str:
    """What the harness's run is graded on: the last `\\boxed{}` of its output, else its output's last line
    (as the boxed answer), else its model's last reply. A code problem: its output when that holds a
    fenced program, else the model's last reply (where its program is)."""
    replies = [message["content"] for message in messages if message["role"] == "assistant"]
    last_reply = replies[-1] if replies else ""
    if domain == "code":
        return stdout if "```" in stdout else last_reply
    boxed = last_boxed(stdout)
    if boxed is not None:
        return f"\\boxed{{{boxed}}}"
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    return f"\\boxed{{{lines[-1]}}}" if lines else last_reply
