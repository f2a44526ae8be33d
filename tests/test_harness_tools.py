"""A harness's tools reach the model on every engine, and the record is what the model saw (issue 47):
a chat template that drops tools gets them written into the prompt (engines/tool_prompt.py), the managed
vLLM server is started with a tool parser (and agentdata's ChatML template for SmolLM2), an engine that
cannot show tools refuses the request, the gateway keeps the prompt as the engine rendered it, a request
cut by the end of its session is recorded as cut and its generation stopped, and smollm2-tir shows its
worked examples as calls of a harness's own code tool."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from agentdata.agent.harness_record import exchange_log, teacher
from agentdata.engines import smollm2 as smollm2_module
from agentdata.engines.base import Engine, Generation, GenerationRequest
from agentdata.engines.demonstrated import DEMONSTRATION, DemonstratedEngine, code_tool
from agentdata.engines.hf_generate import render_prompt, template_messages
from agentdata.engines.openai_wire import parse_completion
from agentdata.engines.tool_prompt import CHATML_TOOLS_TEMPLATE, ignores_tools
from agentdata.engines.vllm_server import ServerSettings
from agentdata.gateway import Gateway
from tests.test_gateway import TOOLS, Answers, exchange_with, text

FINAL_ANSWER = {
    "type": "function",
    "function": {
        "name": "final_answer",
        "description": "Give the final answer",
        "parameters": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]},
    },
}
CALL = {"id": "c1", "type": "function", "function": {"name": "code_interpreter", "arguments": '{"code": "print(6*7)"}'}}
CONVERSATION = [
    {"role": "user", "content": "What is 6*7?"},
    {"role": "assistant", "content": "", "tool_calls": [CALL, {**CALL, "id": "c2"}]},
    {"role": "tool", "content": "42\n", "tool_call_id": "c1"},
    {"role": "tool", "content": "42\n", "tool_call_id": "c2"},
    {"role": "assistant", "content": "It is \\boxed{42}."},
    {"role": "user", "content": "And 6*8?"},
]


@pytest.fixture(scope="module")
def tokenizer():
    return smollm2_module.load_smollm2_tokenizer()


def test_a_template_that_drops_tools_gets_them_written_into_the_prompt(tokenizer):
    assert ignores_tools(tokenizer)  # SmolLM2's own template renders the same text with or without tools
    prompt = render_prompt(tokenizer, GenerationRequest(messages=CONVERSATION, tools=TOOLS))
    assert json.dumps(TOOLS[0]) in prompt and "<tool_call>" in prompt  # the schema and how to call
    assert '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}\n</tool_call>' in prompt
    assert "<|im_start|>user\n<tool_response>\n42\n\n</tool_response>\n<tool_response>" in prompt  # one user turn
    plain = render_prompt(tokenizer, GenerationRequest(messages=CONVERSATION[:1]))
    assert "<tools>" not in plain  # a request without tools renders as the model's own template does


def test_a_template_that_renders_tools_is_left_to_do_it(tokenizer):
    renders = "{% for m in messages %}{{ m['content'] }}{% endfor %}{% if tools %}TOOLS:{{ tools | tojson }}{% endif %}"
    original, tokenizer.chat_template = tokenizer.chat_template, renders
    try:
        assert not ignores_tools(tokenizer)
        prompt = render_prompt(tokenizer, GenerationRequest(messages=CONVERSATION[:1], tools=TOOLS))
        assert prompt == "What is 6*7?TOOLS:" + json.dumps(TOOLS)  # the template's own rendering, untouched
    finally:
        tokenizer.chat_template = original
    assert ignores_tools(tokenizer)  # asked again for the template it has now


@pytest.mark.parametrize("tools", [TOOLS, None])
@pytest.mark.parametrize("system", [[], [{"role": "system", "content": "Be brief."}]])
def test_the_vllm_template_renders_what_the_local_engines_render(tokenizer, tools, system):
    # the managed vLLM server and the transformers engine show SmolLM2 the same prompt, byte for byte
    messages = system + CONVERSATION
    local = render_prompt(tokenizer, GenerationRequest(messages=messages, tools=tools))
    served = tokenizer.apply_chat_template(
        template_messages(messages),
        tools=tools,
        chat_template=CHATML_TOOLS_TEMPLATE.read_text(),
        tokenize=False,
        add_generation_prompt=True,
    )
    assert served == local


def test_the_managed_vllm_server_is_started_for_tool_calls(tmp_path):
    from agentdata.engines.vllm_engine import ManagedVLLMEngine, tool_serving

    smollm2 = tmp_path / "smollm2"
    smollm2.mkdir()
    (smollm2 / "chat_template.jinja").write_text("{{ '<|im_start|>' + messages[0]['content'] }}")
    qwen = tmp_path / "qwen"
    qwen.mkdir()
    (qwen / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ tools }}<tool_call>"}))
    assert tool_serving(str(smollm2)) == ("hermes", str(CHATML_TOOLS_TEMPLATE))
    assert tool_serving(str(qwen)) == ("hermes", None)
    assert tool_serving(str(tmp_path / "none")) == (None, None)
    command = ServerSettings(model="m", tool_call_parser="hermes", chat_template="t.jinja").command("python", 1)
    assert command[command.index("--tool-call-parser") + 1] == "hermes" and "--enable-auto-tool-choice" in command
    assert command[command.index("--chat-template") + 1] == "t.jinja"
    engine = ManagedVLLMEngine(str(smollm2), python="python")
    assert engine.server.settings.chat_template == str(CHATML_TOOLS_TEMPLATE) and engine.tools_refusal() is None
    assert engine.extra_body["return_prompt_text"] is True  # vLLM says what it rendered
    bare = ManagedVLLMEngine(str(tmp_path / "none"), python="python")
    assert "tool_call_parser" in bare.tools_refusal()
    assert ManagedVLLMEngine(str(smollm2), python="python", tool_call_parser="none").tools_refusal()


def test_vllms_rendered_prompt_is_read_from_its_answer():
    payload = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "prompt_text": "<|im_start|>..."}
    assert parse_completion(payload, GenerationRequest(messages=[])).prompt == "<|im_start|>..."


class NoTools(Answers):
    def tools_refusal(self) -> str:
        return "this server has no tool parser"


def test_an_engine_that_cannot_show_tools_refuses_the_request():
    engine = NoTools(text("never"), text("without tools"))
    body = {"messages": [{"role": "user", "content": "q"}], "tools": TOOLS}
    (refused, plain), session, _ = exchange_with(engine, body, {"messages": body["messages"]})
    assert refused.status_code == 400
    assert refused.json()["error"]["message"] == "tools: this server has no tool parser"
    assert plain.status_code == 200 and len(engine.requests) == 1  # a request without tools is answered
    assert session.exchanges[0].status == 400


def test_the_prompt_the_engine_rendered_is_recorded_beside_the_request():
    engine = Answers(text("It is \\boxed{42}.", prompt="<|im_start|>user\nq<|im_end|>\n", answered_by="inner"))
    (response,), session, _ = exchange_with(engine, {"messages": [{"role": "user", "content": "q"}]})
    assert response.status_code == 200
    (entry,) = exchange_log(session, [])
    assert entry["prompt"] == "<|im_start|>user\nq<|im_end|>\n" and entry["answered_by"] == "inner"
    assert teacher(session, "outer") == "inner"


class Hangs(Engine):
    """Generates until cancelled, saying so."""

    spec = "hangs"

    def __init__(self):
        self.started, self.cancelled = asyncio.Event(), asyncio.Event()

    async def generate(self, request: GenerationRequest) -> Generation:
        self.started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        raise AssertionError("unreachable")


def test_a_request_cut_by_the_end_of_its_session_is_recorded_as_cut_and_stops_generating():
    async def run():
        engine = Hangs()
        async with Gateway(engine) as gateway:
            session = gateway.open("p")
            async with httpx.AsyncClient(timeout=60) as client:
                body = {"messages": [{"role": "user", "content": "q"}]}
                request = asyncio.ensure_future(client.post(f"{gateway.url(session)}/chat/completions", json=body))
                await asyncio.wait_for(engine.started.wait(), 60)
                gateway.close(session)  # the harness's run ended (its time limit): nobody reads the answer
                await asyncio.wait_for(engine.cancelled.wait(), 60)  # the generation is stopped, not finished
                response = await request
        return session, response

    session, response = asyncio.run(run())
    (exchange,) = session.exchanges
    assert exchange.status == response.status_code == 499 and exchange.error.startswith("cut: ")
    assert exchange.response is None and exchange.seconds > 0 and session.generating == set()
    assert "exchange" in exchange_log(session, [])[0]  # kept whole, as an unanswered exchange is


def test_smollm2_tir_shows_a_harness_tool_as_its_worked_examples_show_code_and_answers_in_its_tools():
    # a 135M model copies ```python blocks from two examples, not JSON calls from a schema: smollm2-tir shows
    # the harness's code tool so, and gives the harness its own calls back
    inner = Answers(
        Generation("Let me compute.\n```python\nprint(2**10)", "\n```\n", "stop", 11, 5),
        text("\nThe answer is \\boxed{1024}."),
        text("plain"),
        text("plain"),
        text("The answer is 1024."),
    )
    inner.spec = "smollm2"
    engine = DemonstratedEngine(inner, spec="smollm2-tir")
    question = [{"role": "system", "content": "Solve it."}, {"role": "user", "content": "What is 2**10?"}]
    tools = [*TOOLS, FINAL_ANSWER]
    first = asyncio.run(engine.generate(GenerationRequest(messages=question, tools=tools, stop=("Observation:",))))
    shown = inner.requests[0]
    assert shown.messages == [question[0], *DEMONSTRATION, question[1]] and shown.tools is None
    assert shown.stop == ("Observation:", "\n```\n") and not shown.continue_final
    (call,) = first.tool_calls  # the block, as a call of the harness's code tool
    assert call["function"]["name"] == "code_interpreter" and json.loads(call["function"]["arguments"]) == {
        "code": "print(2**10)"
    }
    assert first.text == "Let me compute." and first.answered_by is None  # the examples were shown
    ran = [*question, {"role": "assistant", "content": first.text, "tool_calls": first.tool_calls}]
    ran.append({"role": "tool", "content": "1024\n", "tool_call_id": call["id"]})
    second = asyncio.run(engine.generate(GenerationRequest(messages=ran, tools=tools)))
    continued = inner.requests[1]  # the output goes in the same assistant turn, which the model continues
    assert continued.continue_final and continued.messages[-1] == {
        "role": "assistant",
        "content": "Let me compute.\n```python\nprint(2**10)\n```\n```output\n1024\n```",
    }
    (final,) = second.tool_calls  # a boxed answer, as the harness's final_answer call
    assert final["function"]["name"] == "final_answer" and json.loads(final["function"]["arguments"]) == {
        "answer": "1024"
    }
    alone = asyncio.run(engine.generate(GenerationRequest(messages=question[1:], tools=TOOLS)))
    assert inner.requests[2].messages[0]["content"].startswith("You solve problems step by step and can run Python")
    assert alone.tool_calls is None and alone.text == "plain"  # no block, no final_answer tool: the text itself
    plain = asyncio.run(engine.generate(GenerationRequest(messages=question)))  # no code tool: nothing to show
    assert inner.requests[3].messages == question and plain.answered_by == "smollm2"
    assert code_tool([FINAL_ANSWER]) is None and code_tool(TOOLS) == "code_interpreter"
    # an answer with nothing boxed (smolagents shows the result in its own words, not the examples'): the harness
    # still gets its final_answer call, the text whole, rather than a parse error it would retry until its last step
    (unboxed,) = asyncio.run(engine.generate(GenerationRequest(messages=ran, tools=tools))).tool_calls
    assert json.loads(unboxed["function"]["arguments"]) == {"answer": "The answer is 1024."}
