"""The forms an SFT set is written in (docs/curate.md, "Who reads which form").

- `canonical` (the default): the rows as collect stores them (records.py): OpenAI messages with
  `tool_calls[].function.arguments` as a JSON string, every protocol's calls as tool calls (a
  codeblock row's too), `tools` a JSON string, plus the provenance columns. agentdata's own stages
  (`train`, `view`) read it as it is, with no conversion; the Parquet file says it is in
  this form (`FORM_KEY` in its metadata), so no reader has to guess.
- `hf` (`--for trl` and `--for verl` write the same file): an export, Parquet whose `messages` hold
  `tool_calls[].function.arguments` as a mapping (an Arrow struct) and whose `tools` is a list of JSON
  schemas (a list of structs). This is what chat templates expect: TRL's SFTTrainer and verl's
  MultiTurnSFTDataset hand both straight to `apply_chat_template`, and every template TRL bundles renders
  the call once, decoded (with arguments as a JSON string, many templates fail and some double-encode it).
- `openai`: an export, OpenAI's chat fine-tuning JSONL: `{"messages", "tools"}` per line, arguments as
  a JSON string (what that API takes), tool messages with only `tool_call_id` and `content`.

A codeblock trajectory is not a tool-calling conversation for its model: it wrote ```python
blocks in plain text, as its system prompt asks. In both exports its turns are plain text
(each assistant turn with its fenced code, each result as a `user` turn holding the
```output block the model was shown) and it lists no tools: a template given tools adds its own
calling instructions (`<tool_call>` JSON, XML functions) to the system prompt, which would
contradict the one the model was prompted with. So no template renders it as call markup, and
the results stay out of the loss of trainers that train on assistant turns. Its `tools` is `[]`
there (not null: verl hands a null to the template as pandas' NA, which it cannot iterate); a
Parquet set in which no row lists a tool is written without the column (sft_set.hf_form.
decoded_tools), because Llama 3.x templates render tool-calling instructions for `[]`.
`canonical_messages` turns an export (or a set from elsewhere) back into canonical form, for a user
who hands agentdata's SFT stage such a file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentdata.formats import protocol_of
from agentdata.formats.base import Protocol, decoded_arguments, messages_from_plain_turns

SFT_TARGETS = ("canonical", "hf", "trl", "verl", "openai")
FORMS = ("canonical", "hf", "openai")
FORM_KEY = "agentdata.form"  # Parquet key-value metadata: the form the file's rows are in (one of FORMS)


def target_form(target: str) -> str:
    """The form `--for target` writes: `trl` and `verl` read the same file, the `hf` form."""
    if target not in SFT_TARGETS:
        raise ValueError(f"--for must be one of {', '.join(SFT_TARGETS)}, got {target!r}")
    return "hf" if target in ("trl", "verl") else target


def target_suffix(target: str) -> str:
    """The file suffix `--for target` writes: OpenAI fine-tuning takes JSONL, every other reader Parquet."""
    return ".jsonl" if target_form(target) == "openai" else ".parquet"


def form_metadata(form: str) -> dict[str, str]:
    """The Parquet metadata that says which form a file is in."""
    return {FORM_KEY: form}


def file_form(path: str | Path) -> str | None:
    """The form a Parquet SFT set records in its metadata; None for JSONL or a file that records none
    (written by an older agentdata or elsewhere): its rows are read as an export, through `canonical_messages`."""
    import pyarrow.parquet as pq

    if Path(path).suffix.lower() != ".parquet" or not Path(path).is_file():
        return None
    try:
        metadata = pq.read_metadata(path).metadata or {}
    except (OSError, ValueError):  # an unreadable file says so where its rows are read
        return None
    form = metadata.get(FORM_KEY.encode(), b"").decode(errors="replace")
    return form if form in FORMS else None


def encoded_arguments(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call whose `function.arguments` is a JSON string (OpenAI's wire and fine-tuning form)."""
    function = dict(call["function"])
    if not isinstance(function.get("arguments"), str):
        function["arguments"] = json.dumps(function.get("arguments") or {}, ensure_ascii=False)
    return {**call, "function": function}


def plain_text_protocol(format: str | None) -> Protocol | None:
    """The protocol of a row whose calls are plain text (see the module doc); None for tool-calling rows."""
    protocol = protocol_of(format)
    return protocol if protocol is not None and not protocol.tagged else None


def consumer_tools(tools: list[dict[str, Any]] | None, format: str | None) -> list[dict[str, Any]] | None:
    """The `tools` a template is given: none for a plain-text protocol's rows (see the module doc)."""
    protocol = protocol_of(format)
    return [] if protocol is not None and not protocol.carries_tool_schemas else tools


def hf_messages(messages: list[dict[str, Any]], format: str | None) -> list[dict[str, Any]]:
    """Canonical -> the `hf` form (see the module doc)."""
    if protocol := plain_text_protocol(format):
        return protocol.plain_turns(messages)
    return [
        {**m, "tool_calls": [decoded_arguments(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m
        for m in messages
    ]


def openai_messages(messages: list[dict[str, Any]], format: str | None) -> list[dict[str, Any]]:
    """Canonical -> OpenAI's fine-tuning form (no reasoning: that format has no field for it)."""
    if protocol := plain_text_protocol(format):
        messages = protocol.plain_turns(messages)
    converted = []
    for message in messages:
        message = {key: value for key, value in message.items() if key != "reasoning_content"}
        if message.get("tool_calls"):
            message["tool_calls"] = [encoded_arguments(call) for call in message["tool_calls"]]
            if not message.get("content"):
                message.pop("content", None)  # "required unless tool_calls is given"
        if message["role"] == "tool":
            message.pop("name", None)
        converted.append(message)
    return converted


def canonical_messages(messages: list[dict[str, Any]], format: str | None) -> list[dict[str, Any]]:
    """An export (or a set from elsewhere) -> canonical messages (arguments as JSON strings, a plain-text
    protocol's results as tool messages), so agentdata's SFT stage renders every form the same way. A
    canonical file never comes here (`file_form`)."""
    protocol = plain_text_protocol(format)
    if protocol is not None and not any(m.get("tool_calls") for m in messages):
        return messages_from_plain_turns(protocol, messages)
    return [
        {**m, "tool_calls": [encoded_arguments(c) for c in m["tool_calls"]]} if m.get("tool_calls") else m
        for m in messages
    ]
