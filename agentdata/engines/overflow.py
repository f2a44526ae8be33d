"""A server's "the prompt does not fit the model's context" answer, read from its wording.

Servers say it in an HTTP 400 message, not in a field of their own (only OpenAI adds
`code: context_length_exceeded`). The wordings met (docs/engines.md):

- vLLM, the prompt alone: "This model's maximum context length is 8192 tokens. However,
  your request has 9000 input tokens. Please reduce the length of the input messages."
- vLLM, prompt + max_tokens: "'max_tokens' or 'max_completion_tokens' is too large: 4096.
  This model's maximum context length is 8192 tokens and your request has 5000 input
  tokens (4096 > 8192 - 5000)." (older: "you requested 9100 tokens (8100 in the messages,
  1000 in the completion)"; newer: "your prompt contains at least 5000 input tokens")
- OpenAI: the same sentences, or "your messages resulted in 130000 tokens", with
  `"code": "context_length_exceeded"`.
- vLLM in process: "The decoder prompt (length 9000) is longer than the maximum model
  length of 8192." ("... plus the number of requested output tokens (at least 1) ..." when
  the prompt fills it exactly).

When both numbers are given and the prompt fits, the request can still be served with a
smaller `max_tokens` (`room`), as the local hf engine does; otherwise it ends as
`finish_reason="context"`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

OVERFLOW = re.compile(
    r"maximum context length|maximum model length|context_length_exceeded|exceeds the context window", re.IGNORECASE
)
CONTEXT_SIZE = re.compile(r"maximum (?:context|model) length (?:is|of) (\d+)", re.IGNORECASE)
PROMPT_SIZE = re.compile(
    r"(\d+) in the messages|(\d+) input tokens|messages resulted in (\d+) tokens|"
    r"prompt \(length (\d+)\)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ContextOverflow:
    message: str
    context_tokens: int | None  # the model's context, when the message says
    prompt_tokens: int | None  # the prompt's tokens, when the message says

    def room(self) -> int:
        """Tokens the model can still generate after the prompt (0: none, or not said)."""
        if self.context_tokens is None or self.prompt_tokens is None:
            return 0
        return max(self.context_tokens - self.prompt_tokens, 0)


def context_overflow(text: str) -> ContextOverflow | None:
    """The overflow that `text` (an HTTP error body, or an exception's message) reports, or None."""
    message = _error_message(text)
    if not OVERFLOW.search(text):
        return None
    return ContextOverflow(message, _first_number(CONTEXT_SIZE, message), _first_number(PROMPT_SIZE, message))


def _error_message(text: str) -> str:
    """`error.message` (OpenAI, current vLLM) or `message` (older vLLM) of a JSON body; else the text."""
    try:
        body = json.loads(text)
    except ValueError:
        return text
    error = body.get("error") if isinstance(body, dict) else None
    message = (error if isinstance(error, dict) else body if isinstance(body, dict) else {}).get("message")
    return message if isinstance(message, str) and message else text


def _first_number(pattern: re.Pattern, text: str) -> int | None:
    match = pattern.search(text)
    return int(next(group for group in match.groups() if group is not None)) if match else None
