"""qwen3coder and native protocols, stop strings judged from the text, turn-form continuation, reasoning."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hypothesis import given

from agentdata.agent.loop import LoopConfig, solve
from agentdata.engines.base import Generation, GenerationRequest
from agentdata.formats import get_protocol, parse_native_calls, split_reasoning
from agentdata.formats.codeblock import STOP_STRING
from agentdata.formats.qwen3coder import CLOSE_TAG, OPEN_TAG
from agentdata.formats.reasoning import strip_reasoning
from agentdata.records import CODE_TOOL, Problem, ToolCall, assistant_message, tool_message
from tests.fakes import InProcessSandbox, ScriptedEngine
from tests.test_formats import FAST, texts

QWEN3CODER = get_protocol("qwen3coder")
NATIVE = get_protocol("native")
HERMES = get_protocol("hermes")
CODEBLOCK = get_protocol("codeblock")
TRL_TEMPLATES = Path(__import__("trl").__file__).parent / "chat_templates"


# --------------------------------------------------------------------------- qwen3coder


def qwen3coder_content_ok(content: str) -> bool:
    return OPEN_TAG not in content and CLOSE_TAG not in content


def qwen3coder_code_ok(code: str) -> bool:
    return "\n</parameter>" not in code


def qwen3coder_messages(min_calls: int = 0, code_ok=qwen3coder_code_ok):
    from hypothesis import strategies as st

    codes = st.lists(texts.filter(code_ok), min_size=min_calls, max_size=3)
    return st.builds(
        lambda content, codes: assistant_message(
            content, [ToolCall(code, id=f"call_{i}") for i, code in enumerate(codes)]
        ),
        texts.filter(qwen3coder_content_ok),
        codes,
    )


@FAST
@given(message=qwen3coder_messages())
def test_qwen3coder_parse_of_render_is_identity(message):
    turn = QWEN3CODER.parse(QWEN3CODER.render_assistant(message))
    assert turn.errors == []
    assert assistant_message(turn.content, turn.tool_calls) == message


@FAST
@given(
    message=qwen3coder_messages(min_calls=1, code_ok=lambda code: qwen3coder_code_ok(code) and CLOSE_TAG not in code)
)
def test_qwen3coder_stops_at_the_close_tag_and_is_judged_open_without_it(message):
    text = QWEN3CODER.render_assistant(message)
    before_stop = text[: text.index(CLOSE_TAG)]
    assert QWEN3CODER.stop_after(before_stop) == CLOSE_TAG
    assert (
        QWEN3CODER.parse(before_stop + CLOSE_TAG).tool_calls[0].code
        == ToolCall.from_message(message["tool_calls"][0]).code
    )


def test_qwen3coder_renders_as_qwen3_coder_templates_do():
    import jinja2

    template = jinja2.Environment().from_string((TRL_TEMPLATES / "qwen3_6.jinja").read_text())
    message = assistant_message("Let me check.", [ToolCall("x = 1\nprint(x)")])
    message["tool_calls"][0]["function"]["arguments"] = {"code": "x = 1\nprint(x)"}
    rendered = template.render(messages=[{"role": "user", "content": "q"}, message], tools=[CODE_TOOL])
    assert QWEN3CODER.render_assistant(assistant_message("Let me check.", [ToolCall("x = 1\nprint(x)")])) in rendered


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "<tool_call>\n<function=code_interpreter>\n<parameter=code>\nprint(1)\n</parameter>\n</tool_call>",
            "unclosed <function",
        ),
        ("<tool_call>\nprint(1)\n</tool_call>", "no <function=NAME>"),
        ("<tool_call>\n<function=code_interpreter>\n<parameter=code>\nx", "unclosed <tool_call>"),
    ],
)
def test_qwen3coder_malformed_calls_are_errors_and_text_is_kept(text, error):
    turn = QWEN3CODER.parse(text)
    assert turn.tool_calls == [] and error in turn.errors[0]


def test_calls_to_any_tool_are_read_and_the_loop_decides_if_it_exists():
    text = "<tool_call>\n<function=search>\n<parameter=query>\nx\n</parameter>\n</function>\n</tool_call>"
    assert QWEN3CODER.parse(text).tool_calls == [ToolCall(name="search", arguments={"query": "x"})]
    raw = [{"id": "c", "function": {"name": "web", "arguments": '{"url": "u"}'}}]
    assert parse_native_calls(raw, "").tool_calls == [ToolCall(name="web", arguments={"url": "u"}, id="c")]


def test_qwen3coder_reads_other_parameters_as_json_when_they_are():
    text = (
        "<tool_call>\n<function=code_interpreter>\n<parameter=code>\n1\n</parameter>\n"
        "<parameter=timeout>\n5\n</parameter>\n</function>\n</tool_call>"
    )
    [call] = QWEN3CODER.parse(text).tool_calls
    assert call.arguments == {"code": "1", "timeout": 5}


# --------------------------------------------------------------------------- native


@pytest.mark.parametrize("arguments", ['{"code": "print(1)"}', {"code": "print(1)"}], ids=["json-string", "object"])
def test_native_calls_take_arguments_as_string_or_object(arguments):
    raw = [{"id": "srv_1", "type": "function", "function": {"name": "code_interpreter", "arguments": arguments}}]
    turn = parse_native_calls(raw, "")
    assert turn.tool_calls == [ToolCall("print(1)", id="srv_1")] and turn.errors == []


@pytest.mark.parametrize(
    ("function", "error"),
    [
        ({"name": "code_interpreter", "arguments": "{not json"}, "not a JSON object"),
        ({"name": "", "arguments": "{}"}, "unknown tool ''"),
        ({"name": "code_interpreter", "arguments": "{}"}, 'no "code" string'),
    ],
)
def test_native_calls_that_cannot_run_are_errors(function, error):
    turn = parse_native_calls([{"id": "c", "function": function}], "text")
    assert turn.tool_calls == [] and error in turn.errors[0] and turn.content == "text"


def test_native_messages_stay_canonical_for_the_template():
    messages = [
        {"role": "user", "content": "q"},
        assistant_message("", [ToolCall("print(1)")], reasoning_content="think"),
        tool_message("call_0", "1"),
    ]
    plain = NATIVE.to_plain_messages(messages)
    assert plain[1] == {"role": "assistant", "content": "", "tool_calls": messages[1]["tool_calls"]}
    assert plain[2] == messages[2] and NATIVE.stop_strings == () and NATIVE.native_tools


def test_native_reads_template_text_from_local_engines():
    hermes_text = HERMES.render_assistant(assistant_message("Go.", [ToolCall("print(2)")]))
    coder_text = QWEN3CODER.render_assistant(assistant_message("Go.", [ToolCall("print(3)")]))
    assert [c.code for c in NATIVE.parse(hermes_text).tool_calls] == ["print(2)"]
    assert [c.code for c in NATIVE.parse(coder_text).tool_calls] == ["print(3)"]


def test_local_engine_renders_tools_and_mapping_arguments_through_the_template():
    from agentdata.engines import smollm2 as smollm2_module
    from agentdata.engines.hf_generate import render_prompt

    tokenizer = smollm2_module.load_smollm2_tokenizer()
    tokenizer.chat_template = (TRL_TEMPLATES / "qwen3.jinja").read_text()
    messages = NATIVE.to_plain_messages(
        [{"role": "user", "content": "q"}, assistant_message("", [ToolCall('print("é")')]), tool_message("call_0", "é")]
    )
    prompt = render_prompt(tokenizer, GenerationRequest(messages=messages, tools=[CODE_TOOL]))
    assert CODE_TOOL["function"]["description"] in prompt  # the schema reached the template
    assert '{"name": "code_interpreter", "arguments": {"code": "print(\\"é\\")"}}' in prompt  # decoded, once


# --------------------------------------------------------------------------- stop strings judged from the text


@pytest.mark.parametrize(
    ("protocol", "text", "stop"),
    [
        (HERMES, 'Check.\n<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "1"}}\n', "</tool_call>"),
        (HERMES, "The answer is \\boxed{42}.", None),
        (
            HERMES,
            'x <tool_call>{"name": "code_interpreter", "arguments": {"code": "1"}}</tool_call> so \\boxed{1}',
            None,
        ),
        (CODEBLOCK, "Let me compute.\n```python\nprint(6*7)", STOP_STRING),
        (CODEBLOCK, "Run this:\n```bash\nls", STOP_STRING),
        (CODEBLOCK, "```python\nprint(1)\n```\n```output\n1\n```\nSo \\boxed{1}.", None),
        (CODEBLOCK, "The answer is \\boxed{42}.", None),
    ],
)
def test_stop_after_reads_what_the_text_left_open(protocol, text, stop):
    assert protocol.stop_after(text) == stop


def test_codeblock_turn_form_puts_output_in_its_own_user_turn():
    messages = [
        {"role": "user", "content": "q"},
        assistant_message("Compute.", [ToolCall("print(1)"), ToolCall("print(2)", id="call_1")]),
        tool_message("call_0", "1"),
        tool_message("call_1", "2"),
        assistant_message("\nSo 3."),
    ]
    assert CODEBLOCK.to_plain_messages(messages, tool_turns=True) == [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "Compute.\n```python\nprint(1)\n```\n```python\nprint(2)\n```\n"},
        {"role": "user", "content": "```output\n1\n```\n```output\n2\n```"},
        {"role": "assistant", "content": "\nSo 3."},
    ]


# --------------------------------------------------------------------------- reasoning


@pytest.mark.parametrize(
    ("text", "reasoning", "rest"),
    [
        ("<think>\nplan\n</think>\n\nanswer", "plan", "answer"),
        ("plan it\n</think>\n\nanswer", "plan it", "answer"),  # the template opened <think> in the prompt
        ("<think>\nran out of tokens", "ran out of tokens", ""),
        ("no thinking here", None, "no thinking here"),
        ("a <think> mid-answer</think> is not reasoning", None, "a <think> mid-answer</think> is not reasoning"),
    ],
)
def test_split_reasoning(text, reasoning, rest):
    assert split_reasoning(text) == (reasoning, rest)


class ThinkingEngine(ScriptedEngine):
    async def generate(self, request):
        self.requests.append(request)
        if len(self.requests) == 1:
            return Generation(
                '<think>\nUse the tool.\n</think>\n\n<tool_call>\n{"name": "code_interpreter", '
                '"arguments": {"code": "print(6 * 7)"}}\n',
                "</tool_call>",
                "stop",
                5,
                20,
            )
        return Generation("<think>\nIt printed 42.\n</think>\n\\boxed{42}", None, "stop", 5, 10)


def test_think_spans_go_to_reasoning_content_and_are_counted():
    trajectory = asyncio.run(
        solve(Problem("6*7?", "42"), ThinkingEngine(), InProcessSandbox(), LoopConfig(protocol="hermes"), seed=1)
    )  # ThinkingEngine writes hermes
    first, last = trajectory.messages[2], trajectory.messages[-1]
    assert (first["reasoning_content"], first["content"]) == ("Use the tool.", "")
    assert (last["reasoning_content"], last["content"]) == ("It printed 42.", "\\boxed{42}")
    assert trajectory.correct and 0 < trajectory.metadata["reasoning_tokens"] < trajectory.completion_tokens
    assert strip_reasoning(trajectory.messages)[2] == {k: v for k, v in first.items() if k != "reasoning_content"}
