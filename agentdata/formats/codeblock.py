"""The codeblock protocol: fenced ```python blocks answered by ```output blocks.

This is the tool-integrated-reasoning convention of Qwen-Math TIR and ZeroTIR. The model
writes a fenced block inside its answer:

    Let me count them.
    ```python
    print(sum(range(10)))
    ```

Generation stops at the closing fence (the stop string is "\\n```\\n": a newline, three
backticks, a newline, which an opening fence "```python" never matches), the loop runs the
code, and the environment appends

    ```output
    45
    ```

after which the model continues the same turn. For the model it is all one assistant
turn; canonical form splits it into assistant (with tool_calls) / tool / assistant
messages, and `to_plain_messages` merges them back into one assistant message whose
`env_spans` mark the characters that came from the environment, so training can mask them.

Rendering writes the content, then a newline (when there is content), then each block
as "```python\\n{code}\\n```\\n". The environment's block ends right after its closing
fence, without a newline: chat templates that trim message content (many do) then leave
the prompt the loop continues from unchanged.

Round trip: `parse(render_assistant(m))` gives back `m`'s content and calls unless
- the code has a line that is only ``` (optionally followed by spaces or tabs): that
  line closes the block, as it would in Markdown;
- the content itself contains a ```python / ```py / ```python3 opening fence (before a
  newline): it is read as a call.
"""

from __future__ import annotations

import re
from typing import Any

from agentdata.formats import prompts
from agentdata.formats.base import (
    ParsedTurn,
    Protocol,
    join_pieces,
    numbered_call,
    plain_message,
    results_as_user_turns,
    strip_separator,
)
from agentdata.records import ToolCall, message_tool_calls

# ```python, ```py, ```python3, any case, spaces allowed around the language name.
OPEN_FENCE = re.compile(r"```[ \t]*(?:python3?|py)[ \t]*\n", re.IGNORECASE)
# A line that is only ``` ends the block; the newline after it belongs to the block.
CLOSE_FENCE = re.compile(r"(?:\A|\n)```[ \t]*(?:\n|\Z)")
STOP_STRING = "\n```\n"
OUTPUT_BLOCK = re.compile(r"```output\n(.*?)\n```", re.DOTALL)


class CodeblockProtocol(Protocol):
    name = "codeblock"
    stop_strings = (STOP_STRING,)
    tagged = False  # ```python fences in plain text, as the system prompt asks

    def plain_turns_arrow(self, messages_list: Any, message_type: Any) -> Any:
        """`plain_turns` of a whole batch at once, built over Arrow (what curate writes a large set with)."""
        from agentdata.formats.sft_set.codeblock_form import codeblock_turns

        return codeblock_turns(messages_list, message_type)

    def tool_outputs(self, text: str) -> list[str]:
        return OUTPUT_BLOCK.findall(text)

    def code_answer(self, messages: list[dict[str, Any]]) -> str:
        """A ```python block is a call here, so the program is found in the whole final turn with its blocks
        (after the last user message): the last program the model wrote is graded."""
        last_user = max((index for index, m in enumerate(messages) if m["role"] == "user"), default=-1)
        pieces = []
        for message in messages[last_user + 1 :]:
            if message["role"] == "assistant":
                pieces.append(message["content"])
                pieces.extend(f"```python\n{call.code}\n```" for call in message_tool_calls(message))
        return "\n".join(pieces)

    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        example = render_block(ToolCall(code="print(2 + 3)"))
        how_to_call = (
            "To run Python, write the code in a fenced block, for example:\n"
            f"{example}"
            "The code runs as soon as the block closes, and its output is shown in an ```output "
            "block right after it; then continue your answer."
        )
        return prompts.system_prompt(how_to_call)

    def parse(self, text: str) -> ParsedTurn:
        pieces: list[str] = []  # the text between blocks
        calls: list[ToolCall] = []
        errors: list[str] = []
        position = 0
        while opening := OPEN_FENCE.search(text, position):
            code_start = opening.end()
            closing = CLOSE_FENCE.search(text[code_start:])
            if closing is None:
                errors.append("unclosed ```python block: no closing ``` line after the code")
                break  # the rest stays content, as the model wrote it
            pieces.append(strip_separator(text[position : opening.start()]))
            calls.append(numbered_call(text[code_start : code_start + closing.start()], len(calls)))
            position = code_start + closing.end()
        pieces.append(text[position:])
        return ParsedTurn(content=join_pieces(pieces), tool_calls=calls, errors=errors)

    def render_assistant(self, message: dict[str, Any]) -> str:
        content = message.get("content") or ""
        blocks = "".join(render_block(call) for call in message_tool_calls(message))
        if not blocks:
            return content
        return f"{content}\n{blocks}" if content else blocks

    def render_tool(self, message: dict[str, Any]) -> str:
        return f"```output\n{message.get('content') or ''}\n```"

    def stop_after(self, text: str) -> str | None:
        """The closing fence when the text ends inside a block (a call, or a ```bash block)."""
        if any(error.startswith("unclosed") for error in self.parse(text).errors):
            return STOP_STRING
        return STOP_STRING if _ends_inside_fence(text) else None

    def to_plain_messages(self, messages: list[dict[str, Any]], tool_turns: bool = False) -> list[dict[str, Any]]:
        if tool_turns:
            # for servers that cannot continue a message: each output block a user turn
            return results_as_user_turns(self, messages)
        plain: list[dict[str, Any]] = []
        previous_role = None
        for index, message in enumerate(messages):
            role = message["role"]
            if role == "tool":
                if not plain or plain[-1]["role"] != "assistant":
                    raise ValueError(f"message {index}: a tool message must follow an assistant message")
                self._append_output(plain[-1], self.render_tool(message), joined=previous_role == "tool")
            elif role == "assistant" and previous_role == "tool":
                self._append_continuation(plain[-1], self.render_assistant(message))
            elif role == "assistant":
                plain.append({"role": "assistant", "content": self.render_assistant(message)})
            else:
                plain.append(plain_message(message))
            previous_role = role
        return plain

    @staticmethod
    def _append_continuation(assistant: dict[str, Any], text: str) -> None:
        """Append what the model wrote after an output block.

        A model continues after the block's closing fence, nearly always with a newline.
        When the text has none (the model ran on, or the message came from another
        protocol) a newline is added as part of the environment's span, so the training
        text never has prose glued to the fence and the model's own text stays as written.
        """
        if text and not text.startswith("\n"):
            assistant["content"] += "\n"
            assistant["env_spans"][-1][1] += 1
        assistant["content"] += text

    @staticmethod
    def _append_output(assistant: dict[str, Any], output: str, joined: bool) -> None:
        """Append one tool output; outputs of calls from the same turn share one span."""
        spans = assistant.setdefault("env_spans", [])
        if joined:
            assistant["content"] += "\n" + output
            spans[-1][1] = len(assistant["content"])
        else:
            start = len(assistant["content"])
            assistant["content"] += output
            spans.append([start, len(assistant["content"])])


def _ends_inside_fence(text: str) -> bool:
    """Whether a fenced block (any language) is still open at the end of `text`."""
    inside = False
    for line in text.split("\n"):
        if not inside and line.startswith("```"):
            inside = True
        elif inside and re.fullmatch(r"```[ \t]*", line):
            inside = False
    return inside


def render_block(call: ToolCall) -> str:
    return f"```python\n{call.code}\n```\n"
