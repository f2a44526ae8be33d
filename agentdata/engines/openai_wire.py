"""What goes over the wire to an OpenAI-compatible server and what comes back.

Servers differ in ways a client must live with (see docs/engines.md):
- vLLM and SGLang name the stop string that ended a completion in `stop_reason`; OpenAI's
  API and `transformers serve` do not, and `transformers serve` leaves it in the text.
  A stop string found in the text is cut and named; a server that says only "stop" leaves
  the question open (`Generation.stop_known=False`) for the caller, who can read the text.
- Strict servers refuse fields they do not know (`transformers serve`: HTTP 422 on
  `continue_final_message`); OpenAI's reasoning models refuse `max_tokens`, `stop` and
  sampling settings (HTTP 400 naming the field). `refused_fields` reads which field a
  refusal names, so the engine can send the request again without it.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from agentdata.engines.base import Generation, GenerationRequest, cut_at_first_stop

CONTINUE_FIELDS = ("continue_final_message", "add_generation_prompt")
# Fields a server may refuse that the request can do without (stop strings are also cut here).
DROPPABLE_FIELDS = ("stop", "temperature", "top_p", "seed")
TOKEN_FIELDS = ("max_tokens", "max_completion_tokens")
ADAPTABLE_FIELDS = CONTINUE_FIELDS + DROPPABLE_FIELDS + TOKEN_FIELDS
# Keys of a message that an OpenAI-style server reads; the rest (a tool message's `name`,
# our `reasoning_content`) stays out: strict servers refuse them, DeepSeek refuses reasoning.
WIRE_KEYS = {
    "system": ("role", "content"),
    "user": ("role", "content"),
    "assistant": ("role", "content", "tool_calls"),
    "tool": ("role", "content", "tool_call_id"),
}


@dataclass
class WireSettings:
    """How requests are written for one engine; the engine learns from refusals and updates it."""

    continue_final_message: bool | None = None  # None: send it until a server refuses it
    max_tokens_field: str = "max_tokens"
    drop_fields: set[str] = field(default_factory=set)

    def continues(self, request: GenerationRequest) -> bool:
        return request.continue_final and self.continue_final_message is not False

    def learn(self, refused: list[str]) -> list[str]:
        """Stop sending the refused fields; returns what changed (empty: nothing left to try)."""
        changes = []
        for name in refused:
            if name in CONTINUE_FIELDS and self.continue_final_message is not False:
                self.continue_final_message = False
                changes.append("continue turns as new messages (no continue_final_message)")
            elif name in TOKEN_FIELDS and name == self.max_tokens_field:
                self.max_tokens_field = TOKEN_FIELDS[1 - TOKEN_FIELDS.index(name)]
                changes.append(f"send {self.max_tokens_field} instead of {name}")
            elif name in DROPPABLE_FIELDS and name not in self.drop_fields:
                self.drop_fields.add(name)
                changes.append(f"stop sending {name}")
        return changes


def request_body(request: GenerationRequest, model: str, settings: WireSettings, extra_body: dict) -> dict:
    """The chat-completions body for `request` under what the engine knows of its servers."""
    continuing = settings.continues(request)
    messages = request.messages
    if request.continue_final and not continuing and request.turn_messages is not None:
        messages = request.turn_messages
    body: dict = {
        "model": model,
        "messages": [wire_message(message) for message in messages],
        settings.max_tokens_field: request.max_new_tokens,
        "temperature": request.temperature,
        "top_p": request.top_p,
    }
    if request.stop:
        body["stop"] = list(request.stop)
    if request.seed is not None:
        body["seed"] = request.seed
    if request.tools:
        body["tools"] = request.tools
    if continuing:
        # vLLM's extension: continue the last assistant message instead of opening a new turn.
        body["continue_final_message"] = True
        body["add_generation_prompt"] = False
    body.update(extra_body)
    for name in settings.drop_fields:
        body.pop(name, None)
    return body


def wire_message(message: dict) -> dict:
    keys = WIRE_KEYS.get(message.get("role"), ("role", "content"))
    return {key: message[key] for key in keys if key in message}


def refused_fields(status: int, text: str, body: dict) -> list[str]:
    """The fields of `body` that an HTTP 400/422 answer names as refused (quoted, or as `param`)."""
    if status not in (400, 422):
        return []
    param = None
    try:
        error = json.loads(text).get("error")
        param = error.get("param") if isinstance(error, dict) else None
    except (ValueError, AttributeError):
        pass
    return [
        name for name in ADAPTABLE_FIELDS if name in body and (name == param or re.search(rf"['\"`]{name}['\"`]", text))
    ]


def parse_completion(payload: dict, request: GenerationRequest, stop_sent: bool = True) -> Generation:
    """A chat-completions response -> Generation, with the stop string that ended it when known.

    `stop_sent=False`: the request went without `stop` (a server that refuses it), so the
    server can only have stopped at the end of the turn; stop strings are cut here instead.
    """
    choice = (payload.get("choices") or [None])[0]
    if not choice:
        raise RuntimeError(f"response has no choices: {str(payload)[:300]}")
    message = choice.get("message") or {}
    finish_reason = choice.get("finish_reason") or "stop"
    usage = payload.get("usage") or {}
    text, stop_reason, stop_known = _stop(choice, message.get("content") or "", request, finish_reason, stop_sent)
    details = usage.get("completion_tokens_details") or {}
    return Generation(
        text=text,
        stop_reason=stop_reason,
        finish_reason="length" if finish_reason == "length" else "stop",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        stop_known=stop_known,
        tool_calls=list(message.get("tool_calls") or []) or None,
        # vLLM and SGLang's reasoning parsers, DeepSeek: reasoning_content; newer vLLM: reasoning.
        reasoning=message.get("reasoning_content") or message.get("reasoning") or None,
        reasoning_tokens=details.get("reasoning_tokens") if isinstance(details, dict) else None,
        prompt=payload.get("prompt_text") if isinstance(payload.get("prompt_text"), str) else None,  # vLLM's, asked for
    )


def _stop(
    choice: dict, text: str, request: GenerationRequest, finish_reason: str, stop_sent: bool
) -> tuple[str, str | None, bool]:
    """(text without the stop string, the stop string or None, whether that is known)."""
    # `transformers serve` leaves the stop string in the text; a server that ignored `stop` may run past it.
    text, stop_in_text = cut_at_first_stop(text, tuple(request.stop))
    if stop_in_text is not None:
        return text, stop_in_text, True
    if finish_reason != "stop" or not request.stop or not stop_sent:
        return text, None, True
    if "stop_reason" in choice:
        # vLLM-style servers say what stopped them: the stop string, or null / a token id at end of turn.
        reason = choice["stop_reason"]
        return text, reason if isinstance(reason, str) and reason in request.stop else None, True
    return text, None, False  # "stop" at a stop string and at the end of the turn alike
