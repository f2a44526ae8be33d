"""The recording gateway: OpenAI's chat-completions wire in front of an agentdata engine, every exchange
recorded on the session whose URL the request came to."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import httpx

from agentdata.engines.base import Engine, Generation, GenerationRequest, Sampling
from agentdata.gateway import Gateway
from tests.fakes import TOOL_CALL

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "code_interpreter",
            "description": "Run Python",
            "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
        },
    }
]


class Answers(Engine):
    """Answers each request with the next of `generations`, keeping the requests it was sent."""

    spec = "answers"

    def __init__(self, *generations: Generation):
        self.generations = list(generations)
        self.requests: list[GenerationRequest] = []

    async def generate(self, request: GenerationRequest) -> Generation:
        self.requests.append(request)
        return self.generations.pop(0)


def text(content: str, **fields) -> Generation:
    return Generation(content, None, "stop", 11, 5, **fields)


def exchange_with(
    engine: Engine,
    *bodies: dict,
    close_first: bool = False,
    session_id: str | None = None,
    sampling: Sampling | None = None,
):
    """POST each body to a fresh session of a gateway in front of `engine` (the run's `sampling` given to the
    session): (responses, the session, the models listing)."""

    async def run():
        async with Gateway(engine) as gateway:
            session = gateway.open("problem-1", sampling)
            url = gateway.url(session)
            if session_id is not None:
                url = url.replace(session.id, session_id)
            if close_first:
                gateway.close(session)
            async with httpx.AsyncClient(timeout=30) as client:
                responses = [await client.post(f"{url}/chat/completions", json=body) for body in bodies]
                models = await client.get(f"{url}/models")
            await engine.aclose()  # an HTTP engine's session belongs to this event loop
            return responses, gateway.close(session), models

    return asyncio.run(run())


def test_a_plain_answer_is_returned_and_recorded_exactly():
    body = {
        "model": "whatever",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "6*7?"}],
        "temperature": 0.2,
        "top_p": 0.9,
        "max_tokens": 77,
        "seed": 5,
        "stop": "\nUser:",
    }
    engine = Answers(text("It is \\boxed{42}."))
    (response,), session, models = exchange_with(engine, body)
    assert response.status_code == 200
    answer = response.json()
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": "It is \\boxed{42}."}
    assert answer["choices"][0]["finish_reason"] == "stop"
    assert answer["usage"] == {"prompt_tokens": 11, "completion_tokens": 5, "total_tokens": 16}
    sent = engine.requests[0]  # the sampling settings reach the engine as the harness set them
    assert (sent.temperature, sent.top_p, sent.max_new_tokens, sent.seed, sent.stop) == (0.2, 0.9, 77, 5, ("\nUser:",))
    assert sent.session == session.id  # a fleet keeps the session's turns on one replica
    (exchange,) = session.exchanges
    assert exchange.messages == body["messages"] and exchange.tools is None
    settings = ("model", "temperature", "top_p", "max_tokens", "seed", "stop")
    assert exchange.sampling == {key: body[key] for key in settings}
    assert exchange.response == answer and exchange.status == 200
    assert models.json()["data"][0]["id"] == "agentdata"


def test_a_text_engine_calls_tools_through_the_native_protocol():
    # hf: and the embedded model write their calls as text; the harness gets them as tool_calls
    engine = Answers(text("Let me run it.\n" + TOOL_CALL + "</tool_call>"))
    body = {"messages": [{"role": "user", "content": "6*7?"}], "tools": TOOLS}
    (response,), session, _ = exchange_with(engine, body)
    choice = response.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["content"] == "Let me run it."
    (call,) = choice["message"]["tool_calls"]
    assert call["type"] == "function" and call["function"]["name"] == "code_interpreter"
    assert json.loads(call["function"]["arguments"]) == {"code": "print(6 * 7)"}
    assert engine.requests[0].tools == TOOLS  # the chat template is given the tools
    assert session.exchanges[0].tools == TOOLS


def test_a_servers_own_tool_calls_and_reasoning_pass_through():
    calls = [{"id": "abc", "type": "function", "function": {"name": "code_interpreter", "arguments": '{"code": "1"}'}}]
    engine = Answers(text("", tool_calls=calls, reasoning="think first", reasoning_tokens=3))
    (response,), _, _ = exchange_with(engine, {"messages": [{"role": "user", "content": "q"}], "tools": TOOLS})
    answer = response.json()
    assert answer["choices"][0]["message"]["tool_calls"] == calls
    assert answer["choices"][0]["message"]["reasoning_content"] == "think first"
    assert answer["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}


def test_a_streamed_answer_says_what_the_plain_one_does():
    engine = Answers(text("Running.\n" + TOOL_CALL + "</tool_call>"))
    body = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "6*7?"}]}],
        "tools": TOOLS,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    (response,), session, _ = exchange_with(engine, body)
    assert response.headers["content-type"].startswith("text/event-stream")
    events = [line[len("data: ") :] for line in response.text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    content = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])
    calls = [call for c in chunks if c["choices"] for call in c["choices"][0]["delta"].get("tool_calls") or []]
    finish = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]]
    assert content == "Running." and finish == ["tool_calls"]
    assert json.loads(calls[0]["function"]["arguments"]) == {"code": "print(6 * 7)"}
    assert chunks[-1]["usage"]["total_tokens"] == 16
    recorded = session.exchanges[0].response["choices"][0]["message"]
    assert recorded["tool_calls"][0]["id"] == calls[0]["id"]  # the record holds what was streamed
    assert engine.requests[0].messages == [{"role": "user", "content": "6*7?"}]  # parts joined as text


def test_an_engine_failure_is_a_server_error_and_recorded():
    engine = Answers(Generation("", None, "error", 0, 0, error="server said 500"), text("late"))
    (response,), session, _ = exchange_with(engine, {"messages": [{"role": "user", "content": "q"}]})
    assert response.status_code == 502 and "server said 500" in response.json()["error"]["message"]
    assert session.exchanges[0].status == 502 and session.answered() == []


def test_a_prompt_over_the_context_is_refused_as_openai_does():
    engine = Answers(Generation("", None, "context", 9000, 0, error="9000 tokens > 8192"))
    (response,), _, _ = exchange_with(engine, {"messages": [{"role": "user", "content": "q"}]})
    assert response.status_code == 400 and response.json()["error"]["code"] == "context_length_exceeded"


def test_a_bad_request_names_its_field():
    engine = Answers()
    (response,), session, _ = exchange_with(engine, {"messages": [{"role": "user", "content": "q"}], "top_p": "x"})
    assert response.status_code == 400 and response.json()["error"]["message"].startswith("top_p:")
    assert engine.requests == [] and session.exchanges[0].status == 400
    (several,), _, _ = exchange_with(engine, {"messages": [{"role": "user", "content": "q"}], "n": 3})
    assert several.status_code == 400 and several.json()["error"]["message"].startswith("n: ")


def test_the_runs_sampling_fills_what_a_request_leaves_unset_and_caps_its_budget():
    run = Sampling(temperature=0.2, top_p=0.8, max_new_tokens=64, seed=9)
    engine = Answers(text("a"), text("b"), text("c"))
    question = [{"role": "user", "content": "q"}]
    bodies = [
        {"messages": question},  # nothing set: all the run's
        {"messages": question, "temperature": 0.9, "max_tokens": 32, "seed": 1, "stop": ["END"]},  # its own
        {"messages": question, "max_completion_tokens": 4096},  # more than the run allows: the run's cap
    ]
    responses, session, _ = exchange_with(engine, *bodies, sampling=run)
    assert [response.status_code for response in responses] == [200, 200, 200]
    assert [request.sampling for request in engine.requests] == [
        run,
        Sampling(temperature=0.9, top_p=0.8, max_new_tokens=32, seed=1, stop=("END",)),
        run,
    ]
    used = [exchange.used for exchange in session.exchanges]  # what the engine was asked, recorded per exchange
    assert used[0] == {"temperature": 0.2, "top_p": 0.8, "max_new_tokens": 64, "seed": 9, "stop": []}
    assert used[1]["temperature"] == 0.9 and used[2]["max_new_tokens"] == 64


def test_a_malformed_sampling_field_or_deeply_nested_body_is_a_400_naming_it():
    engine = Answers()
    question = [{"role": "user", "content": "q"}]
    bad = [
        ({"messages": question, "stop": 5}, "stop:"),
        ({"messages": question, "stop": ["a", 5]}, "stop:"),
        ({"messages": question, "seed": 1.5}, "seed:"),
        ({"messages": question, "max_tokens": 0}, "max_tokens:"),
        ({"messages": question, "temperature": -1}, "temperature:"),
        ({"messages": question, "top_p": 1.5}, "top_p:"),
        ({"messages": question, "temperature": 10**400}, "temperature:"),
    ]
    responses, session, _ = exchange_with(engine, *(body for body, _ in bad))
    for response, (_, field) in zip(responses, bad):
        assert response.status_code == 400 and response.json()["error"]["message"].startswith(field)
    assert engine.requests == [] and all(exchange.status == 400 for exchange in session.exchanges)

    async def post_raw(raw: bytes) -> httpx.Response:
        async with Gateway(engine) as gateway:
            url = gateway.url(gateway.open("problem-1"))
            async with httpx.AsyncClient(timeout=30) as client:
                return await client.post(f"{url}/chat/completions", content=raw)

    for depth in (100, 100_000):  # past the gateway's limit, and past the parser's own stack
        deep = b'{"messages": [{"role": "user", "content": "q"}], "x": ' + b"[" * depth + b"]" * depth + b"}"
        response = asyncio.run(post_raw(deep))
        assert response.status_code == 400 and response.json()["error"]["message"].startswith("body: ")


def test_a_closed_or_unknown_session_is_refused():
    body = {"messages": [{"role": "user", "content": "q"}]}
    engine = Answers(text("never"))
    (closed,), _, _ = exchange_with(engine, body, close_first=True)
    (unknown,), _, models = exchange_with(engine, body, session_id="made-up")
    assert closed.status_code == unknown.status_code == models.status_code == 404
    assert engine.requests == []  # a stray harness never reaches the model, nor anybody's record


def test_an_openai_engine_behind_the_gateway_passes_its_servers_calls_and_reasoning():
    # any engine spec goes behind it: here `openai:URL` against a loopback server that parses calls itself
    from agentdata.engines import load_engine

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from fake_openai_server import FakeOpenAIServer

    body = {"messages": [{"role": "user", "content": "6*7?"}], "tools": TOOLS, "max_tokens": 64}
    with FakeOpenAIServer(latency=0.0, script="tool", native_tools=True, reasoning="Let me think.") as server:
        engine = load_engine(f"openai:{server.url}")
        (response,), session, _ = exchange_with(engine, body)
        sent = server.requests[0]
    message = response.json()["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "code_interpreter"
    assert message["reasoning_content"] == "Let me think."
    assert sent["tools"] == TOOLS and sent["max_tokens"] == 64  # forwarded as the harness sent them
    assert session.exchanges[0].response["choices"][0]["message"] == message
