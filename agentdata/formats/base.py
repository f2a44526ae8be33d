"""What every tool-call protocol provides, and the pieces the protocols share.

A protocol is the text convention between a model and the code tool: how the model
writes a call, how the result is shown back, and where generation must stop so the
agent loop can run the call. Trajectories are stored in canonical message form (see
`agentdata.records`); a protocol turns model text into that form (`parse`) and back
(`render_assistant`, `render_tool`, `to_plain_messages`).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any

from agentdata.records import TOOL_NAME, ToolCall, assistant_message, strip_none, tool_message


@dataclass
class ParsedTurn:
    """One generated assistant turn, split into its text and its tool calls."""

    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


class Protocol(ABC):
    """A protocol is one file and one registration line (`formats/__init__.py`, or a `module:Class` plug-in):
    what the rest of agentdata needs to know of it is asked here, never by comparing its name."""

    name: str
    stop_strings: tuple[str, ...]
    # True: the tools go to the server / chat template as JSON schemas (`tools=`), calls come
    # back as `tool_calls` and the messages sent are canonical ones, not plain text.
    native_tools: bool = False
    # Tagged: calls are markup a chat template writes from `tool_calls` (`<tool_call>`), so an SFT set keeps
    # them as calls and lists the tools' JSON schemas. Plain text (tagged = False): the model writes its calls
    # as text it was prompted to write (codeblock's ```python fences); no template renders them as calls, so an
    # SFT set holds such a row as plain turns, and lists no tools (a template given tools adds its own calling
    # instructions, which would contradict the ones the model was prompted with).
    tagged: bool = True

    @property
    def carries_tool_schemas(self) -> bool:
        """Whether an SFT set lists the tools' JSON schemas beside this protocol's rows."""
        return self.tagged

    @abstractmethod
    def system_prompt(self, tools: list[dict[str, Any]]) -> str:
        """How to call the tool in this protocol, and how to give the final answer."""

    @abstractmethod
    def parse(self, text: str) -> ParsedTurn:
        """Split one generated assistant turn into content and tool calls; never raises."""

    @abstractmethod
    def render_assistant(self, message: dict[str, Any]) -> str:
        """Canonical assistant message -> the text the model writes for it."""

    @abstractmethod
    def render_tool(self, message: dict[str, Any]) -> str:
        """Canonical tool message -> the text the model is shown."""

    @abstractmethod
    def to_plain_messages(self, messages: list[dict[str, Any]], tool_turns: bool = False) -> list[dict[str, Any]]:
        """Canonical messages -> [{"role", "content"}] that any chat template renders.

        tool_turns: show tool output as its own user turn even where the protocol puts it
        inside the assistant's turn, for servers that cannot continue a message.
        """

    def plain_turns(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Canonical messages -> the plain turns an SFT set holds for a plain-text protocol: each assistant
        turn as the model wrote it, the results of one turn's calls as one `user` turn; other fields kept."""
        return results_as_user_turns(self, messages, keep_fields=True)

    def plain_turns_arrow(self, messages_list: Any, message_type: Any) -> Any:
        """`plain_turns` of a batch of rows (an Arrow list of messages) as Arrow lists of `message_type`: row
        by row here; a protocol may build them over the whole batch at once (codeblock does)."""
        import pyarrow as pa

        names = [f.name for f in message_type.value_type]
        rows = [
            None
            if row is None
            else [{name: turn.get(name) for name in names} for turn in self.plain_turns(strip_none(row))]
            for row in messages_list.to_pylist()
        ]
        return pa.array(rows, type=message_type)

    def tool_outputs(self, text: str) -> list[str] | None:
        """The outputs a `user` turn of `plain_turns` shows, one per call; None where the protocol cannot
        tell them apart (its plain turns are then read back as they are)."""
        return None

    def code_answer(self, messages: list[dict[str, Any]]) -> str:
        """How a program is found in an answer to a code problem: the text graded for it. The last reply,
        unless the protocol's calls are themselves programs in the text (codeblock)."""
        replies = [m for m in messages if m["role"] == "assistant"]
        return replies[-1]["content"] if replies else ""

    def stop_after(self, text: str) -> str | None:
        """The stop string that ended `text`, judged from the text alone (for servers that say
        "stop" at a stop string and at the end of a turn alike): the one that closes what `text`
        leaves open, or None when nothing is open and the model ended its turn."""
        return None

    def __repr__(self) -> str:
        return f"<protocol {self.name}>"


def decoded_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call whose `function.arguments` is a mapping (it is stored as a JSON string)."""
    function = dict(call["function"])
    arguments = function.get("arguments")
    if isinstance(arguments, str):
        function["arguments"] = json.loads(arguments) if arguments.strip() else {}
    return {**call, "function": function}


def numbered_call(code: str, index: int) -> ToolCall:
    return ToolCall(code=code, id=f"call_{index}", name=TOOL_NAME)


def strip_separator(piece: str) -> str:
    """Drop the one newline that rendering puts between text and the call after it."""
    return piece[:-1] if piece.endswith("\n") else piece


def join_pieces(pieces: list[str]) -> str:
    """Join the text found around tool calls into one content string.

    Rendering writes all content before the calls, so for rendered text every piece
    after the first is empty and this is plain concatenation; for text a model wrote
    around its calls, a newline keeps the pieces from running into each other.
    """
    content = ""
    for piece in pieces:
        if content and piece and not content.endswith("\n") and not piece.startswith("\n"):
            content += "\n"
        content += piece
    return content


def plain_message(message: dict[str, Any]) -> dict[str, Any]:
    return {"role": message["role"], "content": message.get("content") or ""}


def results_as_user_turns(
    protocol: Protocol, messages: list[dict[str, Any]], keep_fields: bool = False
) -> list[dict[str, Any]]:
    """Canonical messages -> plain turns: each assistant message rendered by `protocol`, the
    results of one turn's calls joined into ONE `user` turn (so templates that need roles to
    alternate accept it). `keep_fields` keeps a message's other fields (e.g. reasoning_content)."""
    plain: list[dict[str, Any]] = []
    previous_role = None
    for message in messages:
        role = message["role"]
        if role == "tool":
            output = protocol.render_tool(message)
            if previous_role == "tool":
                plain[-1]["content"] += "\n" + output
            else:
                plain.append({"role": "user", "content": output})
        else:
            turn = {k: v for k, v in message.items() if k != "tool_calls"} if keep_fields else plain_message(message)
            if role == "assistant":
                turn["content"] = protocol.render_assistant(message)
            plain.append(turn)
        previous_role = role
    return plain


def parse_native_calls(raw_calls: list[dict[str, Any]], content: str) -> ParsedTurn:
    """Calls a server parsed itself (`message.tool_calls`, arguments a JSON string or an object)."""
    calls: list[ToolCall] = []
    errors: list[str] = []
    for index, raw in enumerate(raw_calls):
        function = raw.get("function") if isinstance(raw, dict) else None
        function = function if isinstance(function, dict) else {}
        call, error = tool_call(function.get("name"), function.get("arguments"), raw.get("id") or f"call_{index}")
        if call is None:
            errors.append(error)
        else:
            calls.append(call)
    return ParsedTurn(content=content, tool_calls=calls, errors=errors)


def tool_call(name: Any, arguments: Any, call_id: str) -> tuple[ToolCall | None, str]:
    """A call of any tool from its name and arguments, or why it is not one.

    Which tools exist is the agent loop's business (it answers an unknown name with a tool
    error the model reads); a code-tool call must carry a "code" string.
    """
    if not isinstance(name, str) or not name:
        return None, f'unknown tool {name!r}: a call needs a "name"'
    if isinstance(arguments, str):  # the OpenAI API's form; some models also write it so
        try:
            arguments = json.loads(arguments, strict=False)
        except json.JSONDecodeError:
            return None, "tool call arguments are a string that is not a JSON object"
    if not isinstance(arguments, dict):
        return None, 'tool call has no "arguments" object'
    if name == TOOL_NAME and not isinstance(arguments.get("code"), str):
        return None, 'tool call arguments have no "code" string'
    return ToolCall(name=name, arguments=arguments, id=call_id), ""


def messages_from_plain_turns(protocol: Protocol, turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A plain-text protocol's plain turns (`Protocol.plain_turns`) -> canonical messages: an assistant turn's
    calls parsed from its text, the `user` turn after it split into their results (`tool_outputs`). A turn that
    does not read back exactly (rendering it again differs) is kept as it is."""
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # the calls of the last assistant turn, waiting for their outputs
    for turn in turns:
        if turn["role"] == "assistant":
            parsed = protocol.parse(turn["content"])
            message = assistant_message(parsed.content, parsed.tool_calls, turn.get("reasoning_content"))
            if parsed.errors or protocol.render_assistant(message) != turn["content"]:
                message = dict(turn)
            messages.append(message)
            pending = message.get("tool_calls") or []
            continue
        outputs = (protocol.tool_outputs(turn["content"]) or []) if turn["role"] == "user" and pending else []
        results = [tool_message(call["id"], output, call["function"]["name"]) for call, output in zip(pending, outputs)]
        if (
            pending
            and len(outputs) == len(pending)
            and "\n".join(map(protocol.render_tool, results)) == turn["content"]
        ):
            messages.extend(results)
        else:
            messages.append(turn)
        pending = []
    return messages
