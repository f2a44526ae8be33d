"""Any OpenAI-compatible chat-completions server (vLLM, SGLang, TGI, llama.cpp, hosted APIs).

Several base URLs spread the load (least busy first, ties in turn). Each request holds a
slot of a concurrency limit, has a timeout, and is retried with exponential backoff and
jitter on 429, 5xx, timeouts and connection errors; when retries run out it comes back
as `finish_reason="error"` instead of raising.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
from dataclasses import dataclass, field

import aiohttp

from agentdata.engines.base import Engine, Generation, GenerationRequest, cut_at_first_stop, error_generation
from agentdata.errors import UserError

RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})


def chat_completions_url(base_url: str) -> str:
    """`http://host:8000`, `.../v1` or the full endpoint all name the chat-completions endpoint."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise UserError(f"openai engine: {base_url!r} is not an http(s) URL")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return f"{url}/chat/completions"
    return f"{url}/v1/chat/completions"


class RetryableError(Exception):
    """A failure worth trying again (rate limit, server error, timeout, lost connection)."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after  # seconds the server asked us to wait, if it said


@dataclass
class _Server:
    url: str
    in_flight: int = 0


@dataclass
class _LoopState:
    """What must belong to one event loop: the HTTP session and the concurrency semaphore.

    aiohttp rather than httpx: at concurrency 64 against a server answering in 0.2 s,
    httpx's connection pool spent most of the CPU assigning requests to connections and
    reached 130-180 requests/s where aiohttp reached 290 of the ideal 320 (same run).
    """

    session: aiohttp.ClientSession
    slots: asyncio.Semaphore
    loop: asyncio.AbstractEventLoop = field(repr=False)

    @classmethod
    def create(cls, concurrency: int, timeout_s: float) -> "_LoopState":
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=timeout_s))
        return cls(session=session, slots=asyncio.Semaphore(concurrency), loop=asyncio.get_running_loop())


class OpenAIEngine(Engine):
    """Sends each request to the least busy of the given servers' chat-completions endpoints."""

    def __init__(self, urls: str | list[str], *, model: str | None = None, api_key_env: str = "OPENAI_API_KEY",
                 concurrency: int = 64, timeout_s: float = 600.0, max_retries: int = 5,
                 backoff_s: float = 1.0, max_backoff_s: float = 30.0, extra_body: dict | None = None,
                 spec: str | None = None):
        url_list = [u for u in (urls.split(",") if isinstance(urls, str) else urls) if u.strip()]
        if not url_list:
            raise UserError("openai engine: give at least one server URL, e.g. openai:http://127.0.0.1:8000/v1")
        if concurrency < 1:
            raise UserError(f"openai engine: concurrency must be at least 1, got {concurrency}")
        self.spec = spec or "openai:" + ",".join(url_list)
        self.tokenizer = None
        self.servers = [_Server(chat_completions_url(url)) for url in url_list]
        self.model = model
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.concurrency = concurrency
        self.timeout_s = timeout_s
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.extra_body = dict(extra_body or {})
        self.attempts = 0  # HTTP attempts made, retries included
        self._turn = itertools.count()
        self._state: _LoopState | None = None
        self._model_lookup: asyncio.Lock | None = None

    # ------------------------------------------------------------------ public

    async def generate(self, request: GenerationRequest) -> Generation:
        state = self._loop_state()
        async with state.slots:
            try:
                model = await self._model_name(state.session)
                return await self._generate_with_retries(state.session, self._body(request, model), request)
            except Exception as exc:  # never raise for one request
                return error_generation(f"{type(exc).__name__}: {exc}")

    async def aclose(self) -> None:
        state, self._state = self._state, None
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.session.close()

    # ------------------------------------------------------------------ request

    def _body(self, request: GenerationRequest, model: str) -> dict:
        body: dict = {
            "model": model,
            "messages": request.messages,
            "max_tokens": request.max_new_tokens,
            "temperature": request.temperature,
            "top_p": request.top_p,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.seed is not None:
            body["seed"] = request.seed
        if request.continue_final:
            # vLLM's extension: continue the last assistant message instead of opening a new turn.
            body["continue_final_message"] = True
            body["add_generation_prompt"] = False
        body.update(self.extra_body)
        return body

    async def _generate_with_retries(self, session: aiohttp.ClientSession, body: dict,
                                     request: GenerationRequest) -> Generation:
        last_error = RetryableError("no attempt made")
        for attempt in range(self.max_retries + 1):
            if attempt:
                await asyncio.sleep(self._backoff(attempt, last_error.retry_after))
            server = self._pick_server()
            server.in_flight += 1
            try:
                payload = await self._post(session, server.url, body)
                return parse_completion(payload, request)
            except RetryableError as exc:
                last_error = exc
            finally:
                server.in_flight -= 1
        return error_generation(f"gave up after {self.max_retries + 1} attempts: {last_error}")

    async def _post(self, session: aiohttp.ClientSession, url: str, body: dict) -> dict:
        self.attempts += 1
        try:
            async with session.post(url, json=body, headers=self._headers()) as response:
                text = await response.text()
                status, retry_after = response.status, _retry_after_seconds(response.headers)
        except asyncio.TimeoutError as exc:
            raise RetryableError(f"{url}: timed out after {self.timeout_s:g} s") from exc
        except aiohttp.ClientError as exc:
            raise RetryableError(f"{url}: {type(exc).__name__}: {exc}") from exc
        if status in RETRYABLE_STATUS:
            raise RetryableError(f"{url}: HTTP {status}: {text[:300]}", retry_after=retry_after)
        if status >= 400:
            raise RuntimeError(f"{url}: HTTP {status}: {text[:500]}")
        return json.loads(text)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """Exponential backoff with jitter, so many clients do not retry in lockstep.

        A server's Retry-After is honoured, up to `max_backoff_s`.
        """
        delay = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1)) * random.uniform(0.5, 1.0)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def _pick_server(self) -> _Server:
        """The least busy server; among equals, take turns."""
        turn = next(self._turn)
        count = len(self.servers)
        rotated = [self.servers[(turn + offset) % count] for offset in range(count)]
        return min(rotated, key=lambda server: server.in_flight)

    # ------------------------------------------------------------------ setup

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = _LoopState.create(self.concurrency, self.timeout_s)
            self._model_lookup = asyncio.Lock()
        return self._state

    async def _model_name(self, session: aiohttp.ClientSession) -> str:
        """The `model` option, or the first model the first server lists (asked once)."""
        if self.model:
            return self.model
        async with self._model_lookup:
            if not self.model:
                models_url = self.servers[0].url.removesuffix("/chat/completions") + "/models"
                async with session.get(models_url, headers=self._headers()) as response:
                    response.raise_for_status()
                    listed = (await response.json(content_type=None)).get("data") or []
                if not listed:
                    raise RuntimeError(f"{models_url} lists no model; pass model=NAME")
                self.model = listed[0]["id"]
        return self.model


def parse_completion(payload: dict, request: GenerationRequest) -> Generation:
    """A chat-completions response -> Generation, with the stop string that ended it."""
    choice = (payload.get("choices") or [None])[0]
    if not choice:
        raise RuntimeError(f"response has no choices: {str(payload)[:300]}")
    text = (choice.get("message") or {}).get("content") or ""
    finish_reason = choice.get("finish_reason") or "stop"
    usage = payload.get("usage") or {}
    # Some servers leave the stop string in the text; cut it so every engine agrees.
    text, stop_in_text = cut_at_first_stop(text, tuple(request.stop))
    stop_reason = _matched_stop(choice, stop_in_text, request, finish_reason)
    return Generation(
        text=text,
        stop_reason=stop_reason,
        finish_reason="length" if finish_reason == "length" else "stop",
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
    )


def _matched_stop(choice: dict, stop_in_text: str | None, request: GenerationRequest,
                  finish_reason: str) -> str | None:
    if stop_in_text is not None:
        return stop_in_text
    if finish_reason != "stop" or not request.stop:
        return None
    if "stop_reason" in choice:
        # vLLM-style servers say what stopped them: the stop string, or null / a token id at end of turn.
        server_stop_reason = choice["stop_reason"]
        return server_stop_reason if isinstance(server_stop_reason, str) and server_stop_reason in request.stop else None
    # The server stopped without saying why: with exactly one stop string, take that one (a plain
    # end of turn cannot be told apart from it on such servers).
    return request.stop[0] if len(request.stop) == 1 else None


def _retry_after_seconds(headers) -> float | None:
    try:
        return float(headers.get("retry-after", ""))
    except ValueError:
        return None
