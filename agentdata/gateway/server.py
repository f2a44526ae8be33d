"""The recording gateway: an OpenAI-compatible endpoint in front of any agentdata engine.

`POST /s/{session}/v1/chat/completions` (plain or streamed) and `GET /s/{session}/v1/models`; every
exchange is recorded on its session (gateway/recorder.py). `Gateway` runs the server inside the caller's
event loop, so the engine's requests are made where the agent loop would make them (a local engine
batches a harness's requests with the other sessions' like the loop's own).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
import uuid
from collections.abc import Iterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from agentdata.engines.base import Engine, Sampling
from agentdata.errors import UserError
from agentdata.gateway.recorder import CUT, Exchange, Recorder, Session, new_exchange
from agentdata.gateway.wire import BadRequest, ChatRequest, completion_body, read_body, read_request, stream_events

# The model name /v1/models lists (harnesses ask for it, some check it): requests may name any model.
MODEL_ID = "agentdata"
ENGINE_FAILED = 502  # the engine could not answer: a server error, so a harness's client may try again


def _error(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": kind, "code": code}}, status_code=status)


def build_app(engine: Engine, recorder: Recorder) -> Starlette:
    async def chat_completions(request: Request) -> Response:
        session = recorder.get(request.path_params["session"])
        if session is None:
            return _error(404, "no such gateway session (it ended, or was never opened)", "invalid_request_error")
        try:
            body = read_body(await request.body())
        except BadRequest as error:
            return _error(400, str(error), "invalid_request_error")
        exchange = new_exchange(body if isinstance(body, dict) else {})
        session.exchanges.append(exchange)
        try:
            chat = read_request(body, session.id, session.sampling)
        except BadRequest as error:
            return _refused(exchange, 400, str(error), "invalid_request_error")
        refusal = engine.tools_refusal() if chat.generation.tools else None
        if refusal:  # an engine that cannot show the tools must not answer as if there were none
            return _refused(exchange, 400, f"tools: {refusal}", "invalid_request_error")
        exchange.used = chat.generation.sampling.as_dict()
        return await _answer(engine, session, exchange, chat)

    async def models(request: Request) -> JSONResponse:
        if recorder.get(request.path_params["session"]) is None:
            return _error(404, "no such gateway session", "invalid_request_error")
        model = {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": engine.spec or "agentdata"}
        return JSONResponse({"object": "list", "data": [model]})

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "engine": engine.spec})

    return Starlette(
        routes=[
            Route("/s/{session}/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/s/{session}/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ]
    )


def _refused(exchange: Exchange, status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    exchange.status, exchange.error = status, message
    exchange.seconds = round(time.time() - exchange.started_at, 4)
    return _error(status, message, kind, code)


async def _answer(engine: Engine, session: Session, exchange: Exchange, chat: ChatRequest) -> Response:
    session.in_flight += 1
    generating = asyncio.ensure_future(engine.generate(chat.generation))
    session.generating.add(generating)
    try:
        generation = await generating
    except asyncio.CancelledError:
        if not session.closed:
            raise  # the server is stopping
        generation = None
    finally:
        session.in_flight -= 1
        session.generating.discard(generating)
    if generation is None or session.closed:  # cut when the session ended: recorded as such, nobody reads this
        return _error(CUT, exchange.error or "cut: the session ended", "invalid_request_error", "cut")
    exchange.prompt, exchange.answered_by = generation.prompt, generation.answered_by
    if generation.finish_reason == "context":
        message = generation.error or "the prompt is longer than the model's context"
        return _refused(exchange, 400, message, "invalid_request_error", "context_length_exceeded")
    if generation.finish_reason == "error":
        return _refused(exchange, ENGINE_FAILED, generation.error or "the engine failed", "server_error")
    body = completion_body(generation, chat, f"chatcmpl-{uuid.uuid4().hex}")
    exchange.response, exchange.seconds = body, round(time.time() - exchange.started_at, 4)
    if chat.stream:
        return StreamingResponse(iter(stream_events(body, chat.include_usage)), media_type="text/event-stream")
    return JSONResponse(body)


class _Server(uvicorn.Server):
    """uvicorn's server without its signal handlers: Ctrl-C belongs to the command that runs the gateway."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class Gateway:
    """`async with Gateway(engine) as gateway:` serves on 127.0.0.1 (a free port unless `port` is given)
    in the running event loop; `gateway.open(label)` hands out a session, `gateway.url(session)` its
    base URL (what a harness gets as OPENAI_BASE_URL), `gateway.close(session)` ends it."""

    def __init__(self, engine: Engine, host: str = "127.0.0.1", port: int = 0):
        self.engine, self.host, self.port = engine, host, port
        self.recorder = Recorder()
        self._server: Any = None
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> Gateway:
        sock = _listen(self.host, self.port)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            build_app(self.engine, self.recorder), log_level="warning", access_log=False, lifespan="off"
        )
        self._server = _Server(config)
        self._task = asyncio.ensure_future(self._server.serve(sockets=[sock]))
        while not self._server.started:  # serving before the first harness starts
            if self._task.done():
                self._task.result()  # its failure, raised here
                raise UserError("the recording gateway stopped before it started serving")
            await asyncio.sleep(0.01)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self.recorder.close_all()  # a generation still running for a session is cancelled, not waited for
        if self._server is not None:
            self._server.should_exit = True
        if self._task is not None:
            await self._task

    def open(self, label: str = "", sampling: Sampling | None = None) -> Session:
        """A new session; `sampling` fills what its requests leave unset (default: `Sampling()`'s defaults)."""
        return self.recorder.open(label, sampling)

    def url(self, session: Session) -> str:
        return f"http://{self.host}:{self.port}/s/{session.id}/v1"

    def close(self, session: Session) -> Session:
        return self.recorder.close(session.id) or session


def _listen(host: str, port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind((host, port))
        sock.listen(1024)
    except OSError as error:
        sock.close()
        raise UserError(f"the recording gateway cannot listen on {host}:{port}: {error.strerror or error}") from None
    return sock
