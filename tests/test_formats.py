"""Tool-call protocols: round trips, plain messages, env spans, malformed calls, stop strings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentdata.errors import UserError
from agentdata.formats import PROTOCOLS, ParsedTurn, get_protocol, tool_output_text, truncate_middle
from agentdata.formats.codeblock import CLOSE_FENCE, OPEN_FENCE
from agentdata.formats.hermes import CLOSE_TAG, OPEN_TAG
from agentdata.records import CODE_TOOL, ToolCall, assistant_message, tool_message

HERMES = get_protocol("hermes")
CODEBLOCK = get_protocol("codeblock")
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])

# Fragments that stress each protocol's markup, mixed into arbitrary unicode text.
TRICKY = [
    "```",
    "```python\n",
    "```py",
    "\n```\n",
    "```output\n",
    "`",
    "``",
    "\n",
    "\r\n",
    "\t",
    " ",
    "{",
    "}",
    '"',
    "'",
    "\\",
    "\\n",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    '{"name": ',
    "é",
    "∑",
    "😀",
    "\u2028",
    "\x00",
]
texts = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(TRICKY)), max_size=8).map("".join)


# --------------------------------------------------------------------------- what cannot round-trip


def hermes_content_ok(content: str) -> bool:
    return OPEN_TAG not in content and CLOSE_TAG not in content


def codeblock_content_ok(content: str) -> bool:
    return OPEN_FENCE.search(content + "\n") is None


def codeblock_code_ok(code: str) -> bool:
    return CLOSE_FENCE.search(code + "\n") is None


ROUND_TRIP_RULES = {
    "hermes": (hermes_content_ok, lambda code: True),
    "codeblock": (codeblock_content_ok, codeblock_code_ok),
}


def message_strategy(protocol_name: str, min_calls: int = 0, max_calls: int = 3):
    content_ok, code_ok = ROUND_TRIP_RULES[protocol_name]
    contents = texts.filter(content_ok)
    codes = st.lists(texts.filter(code_ok), min_size=min_calls, max_size=max_calls)
    return st.builds(
        lambda content, codes: assistant_message(
            content, [ToolCall(code, id=f"call_{i}") for i, code in enumerate(codes)]
        ),
        contents,
        codes,
    )


def message_from(turn: ParsedTurn) -> dict:
    return assistant_message(turn.content, turn.tool_calls)


# --------------------------------------------------------------------------- registry


def test_protocols_are_registered_by_name():
    assert PROTOCOLS == ("hermes", "codeblock", "qwen3coder", "native")
    assert [get_protocol(name).name for name in PROTOCOLS] == list(PROTOCOLS)


def test_unknown_protocol_is_a_user_error():
    with pytest.raises(UserError, match="unknown tool-call format 'json'.*hermes, codeblock"):
        get_protocol("json")


# --------------------------------------------------------------------------- round trips


@FAST
@given(message=message_strategy("hermes"))
def test_hermes_parse_of_render_is_identity(message):
    turn = HERMES.parse(HERMES.render_assistant(message))
    assert turn.errors == []
    assert message_from(turn) == message


@FAST
@given(message=message_strategy("codeblock"))
def test_codeblock_parse_of_render_is_identity(message):
    turn = CODEBLOCK.parse(CODEBLOCK.render_assistant(message))
    assert turn.errors == []
    assert message_from(turn) == message


def test_hermes_code_holding_the_closing_tag_round_trips():
    message = assistant_message("Check:", [ToolCall('print("</tool_call>")\n# </tool_call>')])
    assert message_from(HERMES.parse(HERMES.render_assistant(message))) == message


def test_hermes_content_holding_the_tags_does_not_round_trip():
    message = assistant_message("I will write <tool_call> next.", [ToolCall("print(1)")])
    turn = HERMES.parse(HERMES.render_assistant(message))
    assert message_from(turn) != message
    assert turn.errors  # the stray tag swallows the real call: reported, not raised


def test_codeblock_code_with_a_bare_fence_line_does_not_round_trip():
    message = assistant_message("", [ToolCall('s = """\n```\n"""\nprint(s)')])
    turn = CODEBLOCK.parse(CODEBLOCK.render_assistant(message))
    assert [call.code for call in turn.tool_calls] == ['s = """']  # the ``` line closed the block
    assert message_from(turn) != message


def test_codeblock_content_with_a_python_fence_does_not_round_trip():
    message = assistant_message("Write ```python\nlike this", [])
    turn = CODEBLOCK.parse(CODEBLOCK.render_assistant(message))
    assert turn.errors == ["unclosed ```python block: no closing ``` line after the code"]
    assert turn.content == message["content"]  # nothing lost


def test_codeblock_code_with_inline_backticks_round_trips():
    message = assistant_message("Go.\n", [ToolCall('fence = "```"\nprint(f"{fence}x{fence}")\n```py')])
    assert message_from(CODEBLOCK.parse(CODEBLOCK.render_assistant(message))) == message


# --------------------------------------------------------------------------- literal renderings


def test_hermes_renders_like_qwens_template():
    message = assistant_message("Let me check.", [ToolCall("print(1)"), ToolCall('x = "é"', id="call_1")])
    assert HERMES.render_assistant(message) == (
        "Let me check.\n"
        '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(1)"}}\n</tool_call>\n'
        '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "x = \\"é\\""}}\n</tool_call>'
    )
    assert HERMES.render_assistant(assistant_message("", [ToolCall("1")])).startswith("<tool_call>")


def test_codeblock_renders_fences():
    message = assistant_message("Let me check.", [ToolCall("print(1)")])
    assert CODEBLOCK.render_assistant(message) == "Let me check.\n```python\nprint(1)\n```\n"
    assert CODEBLOCK.render_assistant(assistant_message("Done: \\boxed{2}")) == "Done: \\boxed{2}"


def conversation() -> list[dict]:
    return [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What is 2+3 and 4*5?"},
        assistant_message("Compute both.", [ToolCall("print(2+3)"), ToolCall("print(4*5)", id="call_1")]),
        tool_message("call_0", "5"),
        tool_message("call_1", "20"),
        assistant_message("\nCheck the product once more.", [ToolCall("4*5", id="call_2")]),
        tool_message("call_2", "20"),
        assistant_message("\nSo the answers are \\boxed{5} and \\boxed{20}."),
    ]


def test_hermes_plain_messages_literal():
    assert HERMES.to_plain_messages(conversation()) == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What is 2+3 and 4*5?"},
        {
            "role": "assistant",
            "content": (
                "Compute both.\n"
                '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(2+3)"}}\n</tool_call>\n'
                '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(4*5)"}}\n</tool_call>'
            ),
        },
        {"role": "user", "content": "<tool_response>\n5\n</tool_response>\n<tool_response>\n20\n</tool_response>"},
        {
            "role": "assistant",
            "content": (
                "\nCheck the product once more.\n"
                '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "4*5"}}\n</tool_call>'
            ),
        },
        {"role": "user", "content": "<tool_response>\n20\n</tool_response>"},
        {"role": "assistant", "content": "\nSo the answers are \\boxed{5} and \\boxed{20}."},
    ]


def test_codeblock_plain_messages_literal():
    content = (
        "Compute both.\n```python\nprint(2+3)\n```\n```python\nprint(4*5)\n```\n"
        "```output\n5\n```\n```output\n20\n```"
        "\nCheck the product once more.\n```python\n4*5\n```\n"
        "```output\n20\n```"
        "\nSo the answers are \\boxed{5} and \\boxed{20}."
    )
    assert CODEBLOCK.to_plain_messages(conversation()) == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What is 2+3 and 4*5?"},
        {"role": "assistant", "content": content, "env_spans": [[64, 96], [144, 160]]},
    ]
    assert content[64:96] == "```output\n5\n```\n```output\n20\n```"
    assert content[144:160] == "```output\n20\n```"


def test_plain_messages_do_not_touch_the_input():
    messages = conversation()
    snapshot = json.dumps(messages)
    for protocol in (HERMES, CODEBLOCK):
        protocol.to_plain_messages(messages)
    assert json.dumps(messages) == snapshot


def test_codeblock_adds_a_masked_newline_before_a_glued_continuation():
    messages = [
        {"role": "user", "content": "Q"},
        assistant_message("", [ToolCall("print(7)")]),
        tool_message("call_0", "7"),
        assistant_message("It is \\boxed{7}."),
    ]
    (_, assistant) = CODEBLOCK.to_plain_messages(messages)
    assert assistant["content"] == "```python\nprint(7)\n```\n```output\n7\n```\nIt is \\boxed{7}."
    start, end = assistant["env_spans"][0]
    assert assistant["content"][start:end] == "```output\n7\n```\n"


def test_codeblock_tool_message_without_assistant_is_rejected():
    with pytest.raises(ValueError, match="message 1: a tool message must follow an assistant message"):
        CODEBLOCK.to_plain_messages([{"role": "user", "content": "Q"}, tool_message("call_0", "1")])


rounds = st.lists(
    st.tuples(
        texts.filter(codeblock_content_ok), st.lists(texts.filter(codeblock_code_ok), min_size=1, max_size=2), texts
    ),
    min_size=1,
    max_size=3,
)


@FAST
@given(rounds=rounds, final=texts)
def test_env_spans_cover_exactly_the_tool_output(rounds, final):
    messages = [{"role": "user", "content": "Q"}]
    expected_outputs = []
    for content, codes, output in rounds:
        calls = [ToolCall(code, id=f"call_{i}") for i, code in enumerate(codes)]
        messages.append(assistant_message(content, calls))
        results = [tool_message(call.id, f"{output}#{call.id}") for call in calls]
        messages.extend(results)
        expected_outputs.append("\n".join(CODEBLOCK.render_tool(result) for result in results))
    messages.append(assistant_message(final))
    (_, assistant) = CODEBLOCK.to_plain_messages(messages)
    text, spans = assistant["content"], assistant["env_spans"]
    assert len(spans) == len(rounds)
    for (start, end), expected in zip(spans, expected_outputs):
        # the span is the rendered output, plus the newline added when the model's text is glued on
        assert text[start:end] in (expected, expected + "\n")
    model_text = "".join(
        text[end:next_start] for (_, end), (next_start, _) in zip([(0, 0)] + spans, spans + [(len(text), 0)])
    )
    assert model_text == "".join(CODEBLOCK.render_assistant(m) for m in messages if m["role"] == "assistant")


# --------------------------------------------------------------------------- accepted variants


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(1)"}}</tool_call>',
        '<tool_call>\n  {"name": "code_interpreter", "arguments": "{\\"code\\": \\"print(1)\\"}"}  \n</tool_call>',
        '<tool_call>\n{"name": "code_interpreter", "parameters": {"code": "print(1)"}}\n</tool_call>',
        '<tool_call>\n{"arguments": {"code": "print(1)", "timeout": 5}, "name": "code_interpreter"}\n</tool_call>',
    ],
)
def test_hermes_accepts_common_variants(text):
    assert HERMES.parse(text) == ParsedTurn(content="", tool_calls=[ToolCall("print(1)")], errors=[])


def test_hermes_accepts_raw_newlines_inside_the_code_string():
    text = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "x = 1\nprint(x)"}}\n</tool_call>'
    assert HERMES.parse(text).tool_calls == [ToolCall("x = 1\nprint(x)")]


@pytest.mark.parametrize(
    "text",
    [
        "```py\nprint(1)\n```",
        "``` python \nprint(1)\n```   \n",
        "```Python3\nprint(1)\n```",
        "```python\nprint(1)\n```\n\n",
    ],
)
def test_codeblock_accepts_common_variants(text):
    turn = CODEBLOCK.parse(text)
    assert (turn.tool_calls, turn.errors) == ([ToolCall("print(1)")], [])
    assert turn.content.strip() == ""


def test_text_after_a_call_joins_the_content():
    assert CODEBLOCK.parse("A:\n```python\n1\n```\nB").content == "A:\nB"
    assert (
        HERMES.parse('A:\n<tool_call>{"name": "code_interpreter", "arguments": {"code": "1"}}</tool_call>B').content
        == "A:\nB"
    )


def test_other_fenced_blocks_are_plain_text():
    text = "Shell:\n```bash\nls\n```\nand output:\n```output\n3\n```"
    assert CODEBLOCK.parse(text) == ParsedTurn(content=text)


# --------------------------------------------------------------------------- malformed calls

HERMES_MALFORMED = [
    ('<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(1)"}\n</tool_call>', "bad JSON"),
    ('<tool_call>\n{"arguments": {"code": "1"}}\n</tool_call>', "unknown tool None"),
    ('<tool_call>\n{"name": "code_interpreter", "arguments": {"script": "1"}}\n</tool_call>', 'no "code" string'),
    ('<tool_call>\n{"name": "code_interpreter", "arguments": {"code": 1}}\n</tool_call>', 'no "code" string'),
    ('<tool_call>\n{"name": "code_interpreter"}\n</tool_call>', 'no "arguments" object'),
    ('<tool_call>\n{"name": "code_interpreter", "arguments": "print(1)"}\n</tool_call>', "not a JSON object"),
    ("<tool_call>\n[1, 2]\n</tool_call>", "must be a JSON object"),
    ('<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "1"}}', "unclosed <tool_call>"),
    ("I am done.</tool_call>", "without an opening"),
]


@pytest.mark.parametrize("text,error", HERMES_MALFORMED)
def test_hermes_reports_malformed_calls(text, error):
    turn = HERMES.parse("Try:\n" + text)
    assert turn.tool_calls == []
    assert len(turn.errors) == 1 and error in turn.errors[0]
    assert turn.content == "Try:\n" + text  # what the model wrote is kept


def test_hermes_carries_calls_to_any_tool():
    # Which tools exist is the agent loop's business: it answers an unknown name with a tool error.
    text = '<tool_call>\n{"name": "word_count", "arguments": {"text": "a b", "unique": true}}\n</tool_call>'
    turn = HERMES.parse(text)
    assert turn.tool_calls == [ToolCall(name="word_count", arguments={"text": "a b", "unique": True})]
    assert HERMES.render_assistant(assistant_message("", turn.tool_calls)) == text


def test_hermes_keeps_good_calls_next_to_a_broken_one():
    good = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "2"}}\n</tool_call>'
    bad = "<tool_call>\n{oops}\n</tool_call>"
    turn = HERMES.parse(f"{bad}\n{good}")
    assert turn.tool_calls == [ToolCall("2")]
    assert turn.content == bad and len(turn.errors) == 1


@pytest.mark.parametrize(
    "text", ["Try:\n```python\nprint(1)", "Try:\n```python\nprint(1)\n``", "Try:\n```python\nprint('```')"]
)
def test_codeblock_reports_unclosed_fences(text):
    turn = CODEBLOCK.parse(text)
    assert turn.tool_calls == [] and turn.content == text
    assert turn.errors == ["unclosed ```python block: no closing ``` line after the code"]


@FAST
@given(text=texts)
def test_parse_never_raises(text):
    for protocol in (HERMES, CODEBLOCK):
        turn = protocol.parse(text)
        assert isinstance(turn.content, str) and all(isinstance(e, str) for e in turn.errors)
        assert all(isinstance(call.code, str) for call in turn.tool_calls)


# --------------------------------------------------------------------------- stop strings


def engine_cut(model_output: str, stop_strings: tuple[str, ...]) -> tuple[str, str | None]:
    """What an engine returns: text up to the earliest stop string (excluded) and that string."""
    hits = [(model_output.find(stop), stop) for stop in stop_strings if stop in model_output]
    if not hits:
        return model_output, None
    index, stop = min(hits)
    return model_output[:index], stop


RAMBLE = "\n<tool_response>\n42\n</tool_response>\n```output\n42\n```\nSo \\boxed{42}"


@FAST
@given(message=message_strategy("hermes", 1, 1).filter(lambda m: CLOSE_TAG not in json.dumps(m, ensure_ascii=False)))
def test_hermes_stops_right_after_the_call(message):
    rendered = HERMES.render_assistant(message)
    text, stop = engine_cut(rendered + RAMBLE, HERMES.stop_strings)
    assert stop == CLOSE_TAG
    assert text + stop == rendered  # nothing the model wrote after the call is kept
    assert message_from(HERMES.parse(text + stop)) == message


@FAST
@given(message=message_strategy("codeblock", 1, 1).filter(lambda m: "\n```\n" not in m["content"] + "\n"))
def test_codeblock_stops_right_after_the_call(message):
    rendered = CODEBLOCK.render_assistant(message)
    text, stop = engine_cut(rendered + RAMBLE, CODEBLOCK.stop_strings)
    assert stop == "\n```\n"
    assert text + stop == rendered
    assert message_from(CODEBLOCK.parse(text + stop)) == message
    # a model that ends its turn right at the fence needs no stop string
    assert message_from(CODEBLOCK.parse(rendered.removesuffix("\n"))) == message


def test_stop_strings_do_not_fire_on_the_opening_fence_or_tag():
    assert engine_cut("Plan:\n```python\nx = 1", CODEBLOCK.stop_strings) == ("Plan:\n```python\nx = 1", None)
    assert engine_cut("Plan:\n<tool_call>\n{", HERMES.stop_strings) == ("Plan:\n<tool_call>\n{", None)


def test_hermes_code_printing_the_closing_tag_is_cut_and_reported():
    message = assistant_message("", [ToolCall('print("</tool_call>")')])
    text, stop = engine_cut(HERMES.render_assistant(message), HERMES.stop_strings)
    turn = HERMES.parse(text + stop)
    assert turn.tool_calls == [] and "bad JSON" in turn.errors[0]


def test_engine_hit_max_tokens_mid_call():
    turn = HERMES.parse('<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "pri')
    assert turn.errors and not turn.tool_calls


# --------------------------------------------------------------------------- system prompts


@pytest.mark.parametrize("name", [name for name in PROTOCOLS if not get_protocol(name).native_tools])
def test_system_prompt_teaches_a_call_the_protocol_parses(name):
    protocol = get_protocol(name)
    prompt = protocol.system_prompt([CODE_TOOL])
    assert "\\boxed{" in prompt and "stop calling" in prompt
    assert len(prompt) < 1400  # small models have small contexts
    turn = protocol.parse(prompt)
    assert [call.code for call in turn.tool_calls] == ["print(2 + 3)"] and turn.errors == []


@pytest.mark.parametrize("name", ["hermes", "qwen3coder"])
def test_system_prompt_lists_the_tools(name):
    other = {"type": "function", "function": {"name": "search", "parameters": {}}}
    prompt = get_protocol(name).system_prompt([CODE_TOOL, other])
    tools_block = re.search(r"<tools>\n(.*)\n</tools>", prompt, re.S).group(1)
    assert [json.loads(line) for line in tools_block.splitlines()] == [CODE_TOOL, other]


# Written by the protocols before their shared parts moved to formats/prompts.py. A system
# prompt shapes every trajectory collected with it: change one on purpose, then this file.
SYSTEM_PROMPTS = Path(__file__).parent / "data" / "system_prompts.json"
SEARCH_TOOL = {"type": "function", "function": {"name": "search", "description": "Séarch", "parameters": {}}}


@pytest.mark.parametrize("name", list(PROTOCOLS))
def test_system_prompts_are_unchanged(name):
    expected = json.loads(SYSTEM_PROMPTS.read_text(encoding="utf-8"))[name]
    protocol = get_protocol(name)
    assert [protocol.system_prompt(tools) for tools in ([], [CODE_TOOL], [CODE_TOOL, SEARCH_TOOL])] == expected


# --------------------------------------------------------------------------- tool output


def marker_count(text: str) -> int:
    return int(re.search(r"\[\.\.\. (\d+) characters cut \.\.\.\]", text).group(1))


@FAST
@given(text=st.text(min_size=0, max_size=2000), max_chars=st.integers(min_value=40, max_value=600))
def test_truncate_middle_keeps_head_and_tail_within_the_limit(text, max_chars):
    cut = truncate_middle(text, max_chars)
    if len(text) <= max_chars:
        assert cut == text
        return
    assert len(cut) == max_chars
    head, marker, tail = re.split(r"(\n\[\.\.\. \d+ characters cut \.\.\.\]\n)", cut, maxsplit=1)
    assert text.startswith(head) and text.endswith(tail)
    assert len(head) + marker_count(marker) + len(tail) == len(text)
    assert 0 <= len(head) - len(tail) <= 1


def test_truncate_middle_without_limit_or_with_a_tiny_one():
    assert truncate_middle("x" * 10_000, None) == "x" * 10_000
    assert truncate_middle("abcdefghij" * 3, 5) == "abcde"


def test_tool_output_for_each_status():
    assert tool_output_text("4\n") == "4"
    assert tool_output_text("") == "(no output)"
    assert tool_output_text("", "", "error") == "Execution failed without a message."
    assert (
        tool_output_text("partial\n", "Traceback ...\nNameError: x\n", "error")
        == "partial\nTraceback ...\nNameError: x"
    )
    assert tool_output_text("", "", "timeout") == "Execution timed out."
    assert tool_output_text("1\n2\n", "", "oom") == "1\n2\nExecution ran out of memory."


def test_tool_output_keeps_the_exception_and_the_notice_when_cut():
    traceback = "Traceback (most recent call last):\n" + "  frame\n" * 200 + "ZeroDivisionError: division by zero\n"
    shown = tool_output_text("", traceback, "error", max_chars=256)
    assert len(shown) <= 256 and shown.startswith("Traceback") and shown.endswith("ZeroDivisionError: division by zero")
    shown = tool_output_text("y" * 5000, "", "timeout", max_chars=100)
    assert len(shown) <= 100 and shown.endswith("\nExecution timed out.") and marker_count(shown) > 4900
    assert tool_output_text("y" * 5000, "", "killed", max_chars=30) == "Execution was killed."
