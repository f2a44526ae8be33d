"""The openai: engine against bench/fake_openai_server.py on 127.0.0.1."""

from __future__ import annotations

import asyncio
import importlib.util
import socket
import sys
import time
from pathlib import Path

import pytest

from agentdata.engines import GenerationRequest, load_engine
from agentdata.engines.openai_compat import chat_completions_url
from agentdata.errors import UserError

_SERVER_FILE = Path(__file__).resolve().parents[1] / "bench" / "fake_openai_server.py"
_spec = importlib.util.spec_from_file_location("fake_openai_server", _SERVER_FILE)
fake = importlib.util.module_from_spec(_spec)
sys.modules["fake_openai_server"] = fake
_spec.loader.exec_module(fake)

FAST_RETRIES = dict(backoff_s=0.01, max_backoff_s=0.05)
TOOL_STOP = ("</tool_call>",)


def ask(text: str, **fields) -> GenerationRequest:
    return GenerationRequest(messages=[{"role": "user", "content": text}], **fields)


def run_all(engine, requests):
    async def go():
        try:
            return await engine.generate_many(requests)
        finally:
            await engine.aclose()

    return asyncio.run(go())


@pytest.fixture
def server():
    with fake.FakeOpenAIServer(script="echo") as running:
        yield running


def test_normal_completion_text_and_token_counts(server):
    engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
    [generation] = run_all(engine, [ask("two words", max_new_tokens=50, temperature=0.3, top_p=0.9, seed=7)])
    assert generation.text == "You said: two words"
    assert (generation.finish_reason, generation.stop_reason, generation.error) == ("stop", None, None)
    assert generation.prompt_tokens == 2 and generation.completion_tokens == 5
    body = server.requests[0]
    assert (body["model"], body["max_tokens"], body["temperature"], body["top_p"], body["seed"]) == (
        "m",
        50,
        0.3,
        0.9,
        7,
    )
    assert "continue_final_message" not in body


def test_length_finish(server):
    engine = load_engine(f"openai:{server.url}", model="m")
    [generation] = run_all(engine, [ask("a b c d e f", max_new_tokens=3)])
    assert generation.finish_reason == "length"
    assert generation.text == "You said: a"


def test_tool_call_stops_at_stop_string_and_names_it():
    with fake.FakeOpenAIServer(script="tool") as server:
        engine = load_engine(f"openai:{server.url}", model="m")
        [generation] = run_all(engine, [ask("what is 6*7?", stop=TOOL_STOP)])
    assert generation.text == fake.TOOL_CALL_TEXT.removesuffix("</tool_call>")
    assert generation.stop_reason == "</tool_call>" and generation.finish_reason == "stop"


def test_tool_script_answers_after_a_tool_response():
    with fake.FakeOpenAIServer(script="tool") as server:
        engine = load_engine(f"openai:{server.url}", model="m")
        messages = [
            {"role": "user", "content": "what is 6*7?"},
            {"role": "assistant", "content": fake.TOOL_CALL_TEXT},
            {"role": "user", "content": "<tool_response>42\n</tool_response>"},
        ]
        [generation] = run_all(engine, [GenerationRequest(messages=messages, stop=TOOL_STOP)])
    assert generation.text == "The answer is \\boxed{42}."
    assert generation.stop_reason is None


@pytest.mark.parametrize("stops", [TOOL_STOP, ("</tool_call>", "<|im_end|>")], ids=["one-stop", "two-stops"])
def test_server_that_does_not_say_why_it_stopped_leaves_it_open(stops):
    """OpenAI's API: "stop" at a stop string and at the end of a turn alike, the stop string cut."""
    with fake.FakeOpenAIServer(script="tool", report_stop_reason=False) as server:
        engine = load_engine(f"openai:{server.url}", model="m")
        [generation] = run_all(engine, [ask("go", stop=stops)])
    assert (generation.stop_reason, generation.stop_known) == (None, False)  # never guessed from the count
    assert "</tool_call>" not in generation.text


def test_stop_string_left_in_the_text_is_cut_and_named():
    """`transformers serve` leaves the stop string in the text: then it is known."""
    with fake.FakeOpenAIServer(script="tool", report_stop_reason=False, keep_stop_string=True) as server:
        engine = load_engine(f"openai:{server.url}", model="m")
        [generation] = run_all(engine, [ask("go", stop=TOOL_STOP)])
    assert generation.text == fake.TOOL_CALL_TEXT.removesuffix("</tool_call>")
    assert (generation.stop_reason, generation.stop_known) == ("</tool_call>", True)


@pytest.mark.parametrize(
    ("status", "text", "refused"),
    [
        (
            422,
            "{\"detail\": \"Unexpected fields in the request: {'continue_final_message', 'add_generation_prompt'}\"}",
            ["continue_final_message", "add_generation_prompt"],
        ),
        (
            400,
            '{"error": {"message": "Unsupported parameter: \'max_tokens\' is not supported with this model. '
            'Use \'max_completion_tokens\' instead.", "param": "max_tokens"}}',
            ["max_tokens"],
        ),
        (400, '{"error": {"message": "Unsupported value: temperature", "param": "temperature"}}', ["temperature"]),
        (400, '{"error": {"message": "messages: stop before you send garbage"}}', []),
        (500, "'stop'", []),
    ],
)
def test_refused_fields_are_read_from_the_answer(status, text, refused):
    from agentdata.engines.openai_wire import refused_fields

    body = {
        "model": "m",
        "messages": [],
        "max_tokens": 5,
        "stop": ["x"],
        "temperature": 0.7,
        "continue_final_message": True,
        "add_generation_prompt": False,
    }
    assert refused_fields(status, text, body) == refused


def test_refusal_naming_no_field_is_an_error_not_a_loop():
    with fake.FakeOpenAIServer(script="echo", fail_always=422) as server:
        engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
        [generation] = run_all(engine, [ask("hi")])
    assert generation.finish_reason == "error" and "HTTP 422" in generation.error and len(server.requests) == 1


# ------------------------------------------------------------------ prompts over the model's context
@pytest.mark.parametrize("wording", ["vllm", "openai"])
def test_a_prompt_over_the_context_ends_as_context_not_error(wording):
    with fake.FakeOpenAIServer(script="echo", context_tokens=10, context_errors=wording) as server:
        engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
        [generation] = run_all(engine, [ask(" ".join(["word"] * 12), max_new_tokens=50)])
    assert generation.finish_reason == "context", generation.error
    assert "maximum context length is 10 tokens" in generation.error and generation.prompt_tokens == 12
    assert len(server.requests) == 1  # not retried, and no field "learned" from the wording


@pytest.mark.parametrize("wording", ["vllm", "openai"])
def test_a_prompt_that_fits_is_asked_again_for_what_is_left_of_the_context(wording):
    with fake.FakeOpenAIServer(script="echo", context_tokens=10, context_errors=wording) as server:
        engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
        [generation] = run_all(engine, [ask("a b c", max_new_tokens=50)])
    assert (generation.finish_reason, generation.text) == ("stop", "You said: a b c")
    assert [body.get("max_tokens") for body in server.requests] == [50, 7]  # vLLM's 'max_tokens' quote taught nothing
    assert engine.adaptations == []


@pytest.mark.parametrize(
    ("text", "context", "prompt"),
    [
        # vLLM before its errors were nested under "error"
        (
            '{"object":"error","message":"This model\'s maximum context length is 8192 tokens. However, you requested '
            "9100 tokens (8100 in the messages, 1000 in the completion). Please reduce the length of the messages or "
            'completion.","type":"BadRequestError","param":null,"code":400}',
            8192,
            8100,
        ),
        # vLLM's newest wording
        (
            '{"error":{"message":"This model\'s maximum context length is 131072 tokens. However, you '
            "requested 4096 output "
            "tokens and your prompt contains at least 126977 input tokens, for a total of at least "
            "131073 tokens. Please "
            "reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, "
            'value=126977)","type":"BadRequestError","param":"input_tokens","code":400}}',
            131072,
            126977,
        ),
        # OpenAI
        (
            '{"error":{"message":"This model\'s maximum context length is 128000 tokens. However, your '
            "messages resulted in "
            "130000 tokens. Please reduce the length of the "
            'messages.","type":"invalid_request_error","param":"messages",'
            '"code":"context_length_exceeded"}}',
            128000,
            130000,
        ),
        (
            '{"error":{"message":"Your input exceeds the context window of this model. Please adjust '
            "your input and try "
            'again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}',
            None,
            None,
        ),
        # vLLM in process (the vllm: engine), the prompt exactly as long as the context
        (
            "The decoder prompt (length 1024) plus the number of requested output tokens (at least 1) "
            "is longer than the maximum model length of 1024. "
            "Make sure that `max_model_len` is no smaller than the number of text tokens.",
            1024,
            1024,
        ),
    ],
)
def test_context_overflows_are_read_from_the_real_wordings(text, context, prompt):
    from agentdata.engines.overflow import context_overflow

    overflow = context_overflow(text)
    assert (overflow.context_tokens, overflow.prompt_tokens) == (context, prompt)
    assert overflow.room() == (max(context - prompt, 0) if context and prompt else 0)
    assert not overflow.message.startswith("{")


@pytest.mark.parametrize(
    "text", ['{"error": {"message": "Unsupported parameter: \'max_tokens\'"}}', "injected failure 400", ""]
)
def test_other_refusals_are_no_context_overflow(text):
    from agentdata.engines.overflow import context_overflow

    assert context_overflow(text) is None


def test_bad_engine_options_are_user_errors(server):
    with pytest.raises(UserError, match="max_tokens_field"):
        load_engine(f"openai:{server.url}", max_tokens_field="tokens")
    with pytest.raises(UserError, match="extra_body"):
        load_engine(f"openai:{server.url}", extra_body="[1]")
    with pytest.raises(UserError, match="drop_fields"):
        load_engine(f"openai:{server.url}", drop_fields=[1])


@pytest.mark.parametrize("given", [["stop", "top_p"], "stop,top_p", '["stop", "top_p"]'])
def test_drop_fields_from_python_or_the_command_line(server, given):
    engine = load_engine(f"openai:{server.url}", model="m", drop_fields=given)
    run_all(engine, [ask("hi", stop=("x",))])
    assert not {"stop", "top_p"} & set(server.requests[0]) and "temperature" in server.requests[0]


def test_vllm_style_null_stop_reason_means_end_of_turn(server):
    engine = load_engine(f"openai:{server.url}", model="m")
    [generation] = run_all(engine, [ask("hello", stop=("</tool_call>",))])
    assert generation.stop_reason is None and generation.finish_reason == "stop"


def test_continue_final_sends_vllm_fields(server):
    engine = load_engine(f"openai:{server.url}", model="m")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "partial"}]
    run_all(engine, [GenerationRequest(messages=messages, continue_final=True)])
    body = server.requests[0]
    assert body["continue_final_message"] is True and body["add_generation_prompt"] is False
    assert body["messages"] == messages


def test_retries_429_then_succeeds():
    with fake.FakeOpenAIServer(script="echo", fail_first=[429, 503]) as server:
        engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
        [generation] = run_all(engine, [ask("hi")])
    assert generation.finish_reason == "stop" and generation.text == "You said: hi"
    assert len(server.requests) == 3 and engine.attempts == 3


def test_server_error_forever_becomes_error_generation():
    with fake.FakeOpenAIServer(script="echo", fail_always=500) as server:
        engine = load_engine(f"openai:{server.url}", model="m", max_retries=2, **FAST_RETRIES)
        [generation] = run_all(engine, [ask("hi")])
    assert generation.finish_reason == "error" and generation.text == ""
    assert "HTTP 500" in generation.error and "3 attempts" in generation.error
    assert len(server.requests) == 3


def test_client_error_is_not_retried():
    with fake.FakeOpenAIServer(script="echo", fail_always=400) as server:
        engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
        [generation] = run_all(engine, [ask("hi")])
    assert generation.finish_reason == "error" and "HTTP 400" in generation.error
    assert len(server.requests) == 1


def test_timeout_is_retried_then_error():
    with fake.FakeOpenAIServer(script="echo", latency=1.0) as server:
        engine = load_engine(f"openai:{server.url}", model="m", timeout_s=0.2, max_retries=1, **FAST_RETRIES)
        started = time.perf_counter()
        [generation] = run_all(engine, [ask("hi")])
        elapsed = time.perf_counter() - started
    assert generation.finish_reason == "error" and "no answer within 0.2 s" in generation.error
    assert elapsed < 0.9
    assert len(server.requests) == 2


def test_connection_refused_becomes_error_generation():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed_port = probe.getsockname()[1]
    engine = load_engine(f"openai:http://127.0.0.1:{closed_port}/v1", model="m", max_retries=1, **FAST_RETRIES)
    [generation] = run_all(engine, [ask("hi")])
    assert generation.finish_reason == "error" and "Cannot connect" in generation.error


def test_several_urls_share_the_load():
    with (
        fake.FakeOpenAIServer(script="echo", latency=0.1) as first,
        fake.FakeOpenAIServer(script="echo", latency=0.1) as second,
    ):
        engine = load_engine(f"openai:{first.url},{second.url}", model="m")
        generations = run_all(engine, [ask(f"q{i}") for i in range(8)])
    assert [g.text for g in generations] == [f"You said: q{i}" for i in range(8)]
    assert len(first.requests) == 4 and len(second.requests) == 4


def test_concurrency_limit_is_respected():
    with fake.FakeOpenAIServer(script="echo", latency=0.05) as server:
        engine = load_engine(f"openai:{server.url}", model="m", concurrency=2)
        generations = run_all(engine, [ask(f"q{i}") for i in range(6)])
    assert all(g.finish_reason == "stop" for g in generations)
    assert server.max_in_flight == 2


def test_model_name_is_discovered_and_api_key_sent(server, monkeypatch):
    monkeypatch.setenv("MY_KEY", "secret-123")
    engine = load_engine(f"openai:{server.url}", api_key_env="MY_KEY")
    run_all(engine, [ask("a"), ask("b")])
    assert [body["model"] for body in server.requests] == ["fake-model", "fake-model"]
    assert server.authorizations == ["Bearer secret-123"] * 2


def test_engine_works_across_event_loops(server):
    engine = load_engine(f"openai:{server.url}", model="m")
    first = asyncio.run(engine.generate(ask("one")))
    second = asyncio.run(engine.generate(ask("two")))
    assert (first.text, second.text) == ("You said: one", "You said: two")


@pytest.mark.parametrize(
    ("given", "endpoint"),
    [
        ("http://h:1", "http://h:1/v1/chat/completions"),
        ("http://h:1/v1/", "http://h:1/v1/chat/completions"),
        ("https://h/api/v1/chat/completions", "https://h/api/v1/chat/completions"),
    ],
)
def test_chat_completions_url(given, endpoint):
    assert chat_completions_url(given) == endpoint


@pytest.mark.parametrize("spec", ["openai:", "openai:ftp://h", "openai:,"])
def test_bad_openai_specs_are_user_errors(spec):
    with pytest.raises(UserError):
        load_engine(spec)


def test_trailing_comma_in_url_list_is_ignored():
    engine = load_engine("openai:http://h:1,", model="m")
    assert [server.url for server in engine.servers] == ["http://h:1/v1/chat/completions"]


def test_unknown_option_is_a_user_error(server):
    with pytest.raises(UserError, match="does not take"):
        load_engine(f"openai:{server.url}", temprature=0.5)


def test_high_concurrency_is_fully_used():
    with fake.FakeOpenAIServer(script="echo", latency=0.3) as server:
        engine = load_engine(f"openai:{server.url}", model="m", concurrency=40)

        async def go():
            generations = await engine.generate_many([ask(f"q{i}") for i in range(80)])
            await engine.aclose()
            return generations

        generations = asyncio.run(go())
    assert all(g.finish_reason == "stop" for g in generations)
    assert server.max_in_flight == 40


def test_a_run_lent_the_engine_closes_its_session_and_leaves_it_usable(server, tmp_path):
    """collect runs its own event loop: an engine lent to it (not built by it) has the HTTP session of that loop
    closed when the run ends (aiohttp's "Unclosed client session" otherwise), and serves the next run."""
    from agentdata.agent.config import CollectConfig, LoopConfig
    from agentdata.agent.runner import collect
    from agentdata.problems import Problem

    engine = load_engine(f"openai:{server.url}", model="m", **FAST_RETRIES)
    problems = [Problem(id="p1", question="two plus two", answer="4")]
    config = CollectConfig(loop=LoopConfig(max_turns=1, protocol="codeblock"))
    for run in ("first", "second"):
        collect(problems, tmp_path / run, config, engine=engine, sandbox=None)
        assert engine._state is None  # the loop's session is closed, not left to the garbage collector
    assert len(server.requests) == 2
