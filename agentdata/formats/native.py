"""The native protocol: the model's own tool calling, as its server or chat template does it.

The tools go out as JSON schemas (`tools=[...]`) and the messages in canonical form
(assistant `tool_calls`, `role: tool` results with `tool_call_id`), so the model sees
calls and results exactly as its chat template renders them:

- `openai:` engines: the server parses the calls (`message.tool_calls`, arguments a JSON
  string or an object) — hosted APIs, `vllm serve --enable-auto-tool-choice
  --tool-call-parser ...`, SGLang with `--tool-call-parser`, `transformers serve`;
- `hf:` / `vllm:` engines: the chat template gets `tools=`, and the text the model writes
  is read here: `<tool_call>` JSON (Qwen2.5/3, Hermes, SmolLM3 templates) or
  Qwen3-Coder's `<function=...>` form.

No stop string: the model ends its turn after its calls. The system prompt says what the
task is and how to answer; how to call the tool is the template's business.
"""

from __future__ import annotations

from typing import Any

from agentdata.formats import prompts
from agentdata.formats.base import ParsedTurn, Protocol, decoded_arguments
from agentdata.formats.hermes import HermesProtocol
from agentdata.formats.qwen3coder import Qwen3CoderProtocol

# Keys of a canonical message that a chat template reads (not our `reasoning_content`:
# templates differ on it and hosted APIs refuse it; see agentdata.records).
TEMPLATE_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
USE_THE_TOOL = "Call the code_interpreter tool to run Python; its output comes back to you."


class NativeProtocol(Protocol):
    name = "native"
    stop_strings = ()
    native_tools = True

    def __init__(self) -> None:
        self._hermes = HermesProtocol()
        self._qwen3coder = Qwen3CoderProtocol()

    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        return prompts.system_prompt(USE_THE_TOOL)

    def parse(self, text: str) -> ParsedTurn:
        """Calls in the text a chat template taught (engines that do not parse calls themselves)."""
        if "<function=" in text:
            return self._qwen3coder.parse(text)
        return self._hermes.parse(text)

    def render_assistant(self, message: dict[str, Any]) -> str:
        """The text form of a call, as Qwen-family templates render it (for display and plain text)."""
        return self._hermes.render_assistant(message)

    def render_tool(self, message: dict[str, Any]) -> str:
        return message.get("content") or ""

    def to_plain_messages(self, messages: list[dict[str, Any]], tool_turns: bool = False) -> list[dict[str, Any]]:
        """The canonical messages themselves (calls and results included): the template renders them."""
        return [
            {key: message[key] for key in TEMPLATE_KEYS if message.get(key) is not None}
            | {"content": message.get("content") or ""}
            for message in messages
        ]


def template_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as a chat template reads them: the TEMPLATE_KEYS only, content a string, and
    tool-call arguments as mappings (templates iterate them; see formats/forms.py)."""
    rendered = []
    for message in messages:
        message = {key: message[key] for key in TEMPLATE_KEYS if message.get(key) is not None} | {
            "content": message.get("content") or ""
        }
        if message.get("tool_calls"):
            message["tool_calls"] = [decoded_arguments(call) for call in message["tool_calls"]]
        rendered.append(message)
    return rendered
