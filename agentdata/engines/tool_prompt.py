"""Tools for a model whose chat template ignores them: agentdata writes them into the prompt text itself.

Many small chat models' templates (SmolLM2's, the embedded default) render the messages and drop `tools=`:
the same text comes out with or without them, and the model is never told it has a tool. For such a
template (`ignores_tools`: a probe conversation rendered with and without a tool gives the same text),
`with_tools_in_text` rewrites the conversation the way Qwen2.5's template (the hermes convention) shows
tools, and the template then renders that plain conversation:

- the system message gets a `# Tools` section listing each tool's JSON schema between `<tools>` tags and
  saying to answer with `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`;
- an assistant turn's calls follow its text as `<tool_call>` JSON blocks;
- the results of one turn's calls go back as one user turn of `<tool_response>` blocks.

The model's text is read back with the native protocol's parser (`<tool_call>` JSON). The managed vLLM
server renders the same text for a ChatML model: `chatml_tools.jinja` beside this module is SmolLM2's
template with this rewriting in it (tests check the two agree byte for byte).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentdata.formats.hermes import CLOSE_TAG, OPEN_TAG

CHATML_TOOLS_TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
TOOLS_INTRO = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_OUTRO = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    '<tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n'
    "</tool_call>"
)
_PROBE_MESSAGES = [{"role": "user", "content": "probe"}]
_PROBE_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "agentdata_probe_tool",
            "description": "probe",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]
_IGNORES_TOOLS_ATTRIBUTE = "_agentdata_ignores_tools"


def ignores_tools(tokenizer: Any) -> bool:
    """Whether `tokenizer`'s chat template renders a conversation the same with and without tools
    (asked once per tokenizer and template)."""
    template = getattr(tokenizer, "chat_template", None)
    known = getattr(tokenizer, _IGNORES_TOOLS_ATTRIBUTE, None)
    if known is not None and known[0] == template:
        return known[1]
    render = tokenizer.apply_chat_template
    with_tools = render(_PROBE_MESSAGES, tools=_PROBE_TOOLS, tokenize=False, add_generation_prompt=True)
    without = render(_PROBE_MESSAGES, tokenize=False, add_generation_prompt=True)
    answer = with_tools == without
    try:
        setattr(tokenizer, _IGNORES_TOOLS_ATTRIBUTE, (template, answer))
    except AttributeError:  # a tokenizer that takes no attributes is asked each time
        pass
    return answer


def tools_section(tools: list[dict[str, Any]]) -> str:
    """The system prompt's `# Tools` section: each schema as JSON on a line of its own."""
    return TOOLS_INTRO + "".join("\n" + json.dumps(tool, ensure_ascii=False) for tool in tools) + TOOLS_OUTRO


def with_tools_in_text(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with its tools, calls and results written as text (see the module's docstring).
    `messages` are template messages: content a string, call arguments mappings."""
    section = tools_section(tools)
    messages = [{**message, "content": message.get("content") or ""} for message in messages]
    if messages and messages[0]["role"] == "system":
        first, rest = [{**messages[0], "content": messages[0]["content"] + "\n\n" + section}], messages[1:]
    else:
        first, rest = [{"role": "system", "content": section}], messages
    plain: list[dict[str, Any]] = list(first)
    previous_role = None
    for message in rest:
        if message["role"] == "tool":
            response = f"<tool_response>\n{message['content']}\n</tool_response>"
            if previous_role == "tool":
                plain[-1]["content"] += "\n" + response
            else:
                plain.append({"role": "user", "content": response})
        elif message["role"] == "assistant" and message.get("tool_calls"):
            blocks = [_call_text(call) for call in message["tool_calls"]]
            text = [message["content"]] if message["content"] else []
            plain.append({"role": "assistant", "content": "\n".join(text + blocks)})
        else:
            plain.append({"role": message["role"], "content": message["content"]})
        previous_role = message["role"]
    return plain


def _call_text(call: dict[str, Any]) -> str:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    arguments = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    return f'{OPEN_TAG}\n{{"name": "{function.get("name")}", "arguments": {arguments}}}\n{CLOSE_TAG}'
