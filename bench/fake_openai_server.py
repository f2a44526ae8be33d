"""A small OpenAI-compatible chat-completions server with a fixed response latency.

A benchmark instrument (how fast does the agent loop go when the model answers in
exactly N seconds?) and a test double for the `openai:` engine. It answers from a
script instead of a model, applies the request's stop strings and `max_tokens` the way
vLLM does (the stop string is cut and named in `stop_reason`), and can fail on purpose.

    python bench/fake_openai_server.py --port 8011 --latency 0.2 --script tool

Scripts:
  tool       first a hermes tool call
             <tool_call>{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}</tool_call>
             then, once the last message holds a tool response, "The answer is \\boxed{42}."
  codeblock  the same call as a ```python block, then the answer once an ```output block was shown
  answer     the final answer at once, no tool call
  verdict    an LLM judge's reply: a rationale, then "Score: 7"
  echo       "You said: <last message content>"

Modes that copy what real servers do (each seen on one; see docs/engines.md):
  report_stop_reason=False  no `stop_reason` (OpenAI's API, `transformers serve`)
  keep_stop_string=True     the matched stop string stays in the text (`transformers serve`)
  strict=True               HTTP 422 on any field outside the OpenAI schema (`transformers serve`)
  reasoning_model=True      HTTP 400 naming `max_tokens`, `stop`, `temperature`, `top_p`
                            (OpenAI's reasoning models: they take `max_completion_tokens`)
  native_tools=True         with `tools` in the request, a call comes back in `message.tool_calls`
                            (arguments a JSON string, finish_reason "tool_calls"), as vLLM with
                            a tool parser, SGLang and hosted APIs do
  reasoning="..."           `message.reasoning_content` and its token count (reasoning parsers)
  context_tokens=N          HTTP 400 when the prompt's words + max_tokens pass N, with the body
                            `context_errors` names: "vllm" (its two wordings: prompt alone, or
                            'max_tokens' too large) or "openai" (code context_length_exceeded)

In Python (tests): `with FakeOpenAIServer(latency=0.0, fail_first=[429]) as server: server.url`.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOOL_CALL_TEXT = '<tool_call>{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}}</tool_call>'
CODEBLOCK_CALL_TEXT = "Let me compute it.\n```python\nprint(6*7)\n```\n"
FINAL_ANSWER_TEXT = "The answer is \\boxed{42}."
# Fields of OpenAI's chat-completions request; a strict server refuses any other (`transformers serve`
# takes these, minus a few it ignores, plus `seed`, `generation_config` and `chat_template_kwargs`).
OPENAI_FIELDS = frozenset(
    {
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "reasoning_effort",
        "response_format",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "web_search_options",
    }
)
REASONING_MODEL_REFUSES = ("max_tokens", "stop", "temperature", "top_p")

Responder = Callable[[dict], str]


def saw_tool_output(body: dict) -> bool:
    last = (body.get("messages") or [{}])[-1]
    content = last.get("content") or ""
    return last.get("role") == "tool" or "<tool_response>" in content or "```output" in content


def tool_script(body: dict) -> str:
    """A tool call first; the final answer once the model has seen the tool's output."""
    return FINAL_ANSWER_TEXT if saw_tool_output(body) else TOOL_CALL_TEXT


def codeblock_script(body: dict) -> str:
    """A ```python block first; the answer after the ```output block (continued turn or next message)."""
    if not saw_tool_output(body):
        return CODEBLOCK_CALL_TEXT
    continuing = body.get("continue_final_message") or body["messages"][-1].get("role") == "assistant"
    return ("\n" if continuing else "") + FINAL_ANSWER_TEXT


def answer_script(body: dict) -> str:
    return FINAL_ANSWER_TEXT


def verdict_script(body: dict) -> str:
    """A judge's reply: a rationale, then the score line the judge prompt asks for."""
    return "The reasoning follows from the tool outputs and the answer is supported.\nScore: 7"


def echo_script(body: dict) -> str:
    last = (body.get("messages") or [{}])[-1]
    return f"You said: {last.get('content') or ''}"


SCRIPTS: dict[str, Responder] = {
    "tool": tool_script,
    "codeblock": codeblock_script,
    "answer": answer_script,
    "verdict": verdict_script,
    "echo": echo_script,
}


def count_tokens(text: str) -> int:
    """A stand-in token count: whitespace-separated words (there is no tokenizer here)."""
    return len(text.split())


def complete(text: str, body: dict, keep_stop_string: bool = False) -> tuple[str, str, str | None, int]:
    """Apply stop strings and max_tokens to a scripted text: (text, finish_reason, stop_reason, tokens)."""
    stops = body.get("stop") or []
    stops = [stops] if isinstance(stops, str) else list(stops)
    cut_at, matched = len(text), None
    for stop in stops:
        index = text.find(stop)
        if index != -1 and index < cut_at:
            cut_at, matched = index, stop
    text = text[:cut_at] + (matched if keep_stop_string and matched else "")
    words = text.split(" ")
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None and count_tokens(text) > max_tokens:
        return " ".join(words[:max_tokens]), "length", None, max_tokens
    return text, "stop", matched, count_tokens(text) + 1  # + the stop string or end-of-turn token


def prompt_words(body: dict) -> int:
    return sum(count_tokens(message.get("content") or "") for message in body.get("messages") or [])


def vllm_context_error(context: int, prompt: int, max_tokens: int) -> dict:
    """vLLM's 400 bodies (serving_engine.py): the prompt alone, or the prompt with max_tokens."""
    if prompt >= context:
        message = (
            f"This model's maximum context length is {context} tokens. However, your request has {prompt} "
            "input tokens. Please reduce the length of the input messages."
        )
    else:
        message = (
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's maximum context "
            f"length is {context} tokens and your request has {prompt} input tokens "
            f"({max_tokens} > {context} - {prompt})."
        )
    return {"error": {"message": message, "type": "BadRequestError", "param": None, "code": 400}}


def openai_context_error(context: int, prompt: int, max_tokens: int) -> dict:
    """OpenAI's 400 body for a request over the model's context."""
    message = (
        f"This model's maximum context length is {context} tokens. However, you requested "
        f"{prompt + max_tokens} tokens ({prompt} in the messages, {max_tokens} in the completion). "
        "Please reduce the length of the messages or completion."
    )
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


CONTEXT_ERRORS = {"vllm": vllm_context_error, "openai": openai_context_error}


class FakeOpenAIServer:
    """The server in a background thread. `port=0` takes a free port; `url` is the /v1 base."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        latency: float = 0.0,
        script: str | Responder = "tool",
        model: str = "fake-model",
        fail_first: list[int] | None = None,
        fail_always: int | None = None,
        report_stop_reason: bool = True,
        keep_stop_string: bool = False,
        strict: bool = False,
        reasoning_model: bool = False,
        native_tools: bool = True,
        reasoning: str | None = None,
        context_tokens: int | None = None,
        context_errors: str = "vllm",
    ):
        self.latency = latency
        self.responder = SCRIPTS[script] if isinstance(script, str) else script
        self.model = model
        self.fail_first = list(fail_first or [])  # statuses returned to the first requests, in order
        self.fail_always = fail_always  # a status returned to every request
        self.report_stop_reason = report_stop_reason  # vLLM does; OpenAI's own API does not
        self.keep_stop_string = keep_stop_string  # transformers serve leaves it in the text
        self.strict = strict  # transformers serve: 422 on unknown fields
        self.reasoning_model = reasoning_model  # OpenAI's o-series: 400 on max_tokens, stop, ...
        self.native_tools = native_tools  # parse calls into message.tool_calls when `tools` is sent
        self.reasoning = reasoning  # reasoning_content on every answer
        self.context_tokens = context_tokens  # the model's context, in words; None: unlimited
        self.context_errors = CONTEXT_ERRORS[context_errors]  # how a request over it is refused
        self.refused = 0  # requests answered 400/422 for their fields
        self.requests: list[dict] = []  # every chat request body received
        self.authorizations: list[str | None] = []  # the Authorization header of each chat request
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = _Listener((host, port), _handler_for(self))
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://{self._httpd.server_address[0]}:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        # A short poll interval makes close() quick (it waits for the serving loop to notice).
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # ------------------------------------------------------------- request handling

    def handle_chat(self, body: dict, authorization: str | None = None) -> tuple[int, dict]:
        with self._lock:
            self.requests.append(body)
            self.authorizations.append(authorization)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            failure = self.fail_first.pop(0) if self.fail_first else self.fail_always
        try:
            time.sleep(self.latency)
            if failure is not None:
                return failure, {"error": {"message": f"injected failure {failure}", "code": failure}}
            refusal = self._refusal(body)
            if refusal is not None:
                with self._lock:
                    self.refused += 1
                return refusal
            return 200, self._completion(body)
        finally:
            with self._lock:
                self.in_flight -= 1

    def _refusal(self, body: dict) -> tuple[int, dict] | None:
        """The answer of a server that refuses the request's fields, or None when it takes them."""
        if self.strict and (unexpected := set(body) - OPENAI_FIELDS):
            return 422, {"detail": f"Unexpected fields in the request: {unexpected}"}
        for name in REASONING_MODEL_REFUSES if self.reasoning_model else ():
            if name in body:
                message = f"Unsupported parameter: '{name}' is not supported with this model."
                if name == "max_tokens":
                    message += " Use 'max_completion_tokens' instead."
                return 400, {
                    "error": {
                        "message": message,
                        "type": "invalid_request_error",
                        "param": name,
                        "code": "unsupported_parameter",
                    }
                }
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens")) or 0
        if self.context_tokens is not None and prompt_words(body) + max_tokens > self.context_tokens:
            return 400, self.context_errors(self.context_tokens, prompt_words(body), max_tokens)
        return None

    def _completion(self, body: dict) -> dict:
        prompt_tokens = prompt_words(body)
        text, finish_reason, stop_reason, completion_tokens = complete(
            self.responder(body), body, self.keep_stop_string
        )
        message: dict = {"role": "assistant", "content": text}
        if self.native_tools and body.get("tools") and text.startswith("<tool_call>"):
            message, finish_reason, stop_reason = (
                {"role": "assistant", "content": None, "tool_calls": [native_call(text, len(self.requests))]},
                "tool_calls",
                None,
            )
        if self.reasoning:
            message["reasoning_content"] = self.reasoning
            completion_tokens += count_tokens(self.reasoning)
        choice = {"index": 0, "message": message, "finish_reason": finish_reason}
        if self.report_stop_reason:
            choice["stop_reason"] = stop_reason
        return {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "completion_tokens_details": {"reasoning_tokens": count_tokens(self.reasoning or "")},
            },
        }


def native_call(text: str, number: int) -> dict:
    """A scripted hermes call as the OpenAI API returns it: arguments as a JSON string."""
    body = text.removeprefix("<tool_call>").split("</tool_call>")[0]
    call = json.loads(body)
    return {
        "id": f"call_fake{number}",
        "type": "function",
        "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])},
    }


class _Listener(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024  # the default backlog of 5 drops connections when many clients connect at once


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def do_GET(self) -> None:
            if self.path.rstrip("/").endswith("/models"):
                self._send(200, {"object": "list", "data": [{"id": server.model, "object": "model"}]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw)
            except json.JSONDecodeError:
                self._send(400, {"error": {"message": "body is not JSON"}})
                return
            self._send(*server.handle_chat(body, self.headers.get("Authorization")))

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                # Headers and body in one write: two small writes meet Nagle + delayed ACK.
                self._headers_buffer.append(b"\r\n" + data)
                self.flush_headers()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (its timeout): nothing to answer

        def log_message(self, format: str, *args: object) -> None:
            pass  # quiet: a benchmark prints its own numbers

    return Handler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8011)
    parser.add_argument("--latency", type=float, default=0.2, help="seconds before each response")
    parser.add_argument("--script", choices=sorted(SCRIPTS), default="tool")
    parser.add_argument("--model", default="fake-model")
    parser.add_argument(
        "--fail-first", default="", help="comma-separated statuses for the first requests, e.g. 429,503"
    )
    parser.add_argument("--fail-always", type=int, default=None, help="answer every request with this status")
    parser.add_argument("--no-stop-reason", action="store_true", help="omit stop_reason, as OpenAI's API does")
    parser.add_argument("--keep-stop-string", action="store_true", help="leave the stop string in the text")
    parser.add_argument("--strict", action="store_true", help="HTTP 422 on fields outside the OpenAI schema")
    parser.add_argument(
        "--context-tokens",
        type=int,
        default=None,
        help="HTTP 400 when the prompt's words + max_tokens pass this many, as a real server",
    )
    parser.add_argument(
        "--context-errors", choices=sorted(CONTEXT_ERRORS), default="vllm", help="whose wording those refusals copy"
    )
    args = parser.parse_args()
    server = FakeOpenAIServer(
        host=args.host,
        port=args.port,
        latency=args.latency,
        script=args.script,
        model=args.model,
        fail_first=[int(s) for s in args.fail_first.split(",") if s.strip()],
        fail_always=args.fail_always,
        report_stop_reason=not args.no_stop_reason,
        keep_stop_string=args.keep_stop_string,
        strict=args.strict,
        context_tokens=args.context_tokens,
        context_errors=args.context_errors,
    )
    print(f"fake OpenAI server on {server.url} (latency {args.latency:g} s, script {args.script})", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._httpd.server_close()


if __name__ == "__main__":
    main()
