"""Any OpenAI-compatible chat-completions server (vLLM, SGLang, TGI, llama.cpp, hosted APIs).

Several base URLs are a fleet (engines/fleet.py): a new trajectory goes to the replica with the fewest
requests in flight, its later turns to the same replica (its prefix cache), a failing replica is left
out for a while and its trajectories fail over, and `max_rps` caps each replica's requests per second.
Each request holds a slot of a concurrency limit, has a timeout, and is retried with exponential backoff
and jitter on 429, 5xx, timeouts and connection errors (on another replica when one is healthy, at once);
when retries run out it comes back as `finish_reason="error"` instead of raising.

A server that refuses a field (HTTP 400/422 naming `continue_final_message`, `max_tokens`,
`stop`, ...) gets the request again at once without it, and every later request is
written the same way (`openai_wire.WireSettings`); the options below set this up front.
A prompt the server says is longer than the model's context ends as `finish_reason="context"`,
as with the local engines; one that fits but leaves less room than `max_tokens` is asked again
for what is left (`overflow.py`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from dataclasses import dataclass, field

import aiohttp

from agentdata.engines.base import Engine, Generation, GenerationRequest, context_generation, error_generation
from agentdata.engines.fleet import Fleet, Replica
from agentdata.engines.openai_wire import TOKEN_FIELDS, WireSettings, parse_completion, refused_fields, request_body
from agentdata.engines.overflow import context_overflow
from agentdata.errors import UserError
from agentdata.pacing import backoff_delay, check_max_rps

logger = logging.getLogger(__name__)

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


class RefusedRequest(RuntimeError):
    """An HTTP 4xx answer: the request itself was refused, trying it again as is would not help."""

    def __init__(self, message: str, status: int, text: str):
        super().__init__(message)
        self.status, self.text = status, text


class RetryableError(Exception):
    """A failure worth trying again (rate limit, server error, timeout, lost connection)."""

    def __init__(self, message: str, retry_after: float | None = None, server_down: bool = True):
        super().__init__(message)
        self.retry_after = retry_after  # seconds the server asked us to wait, if it said
        self.server_down = server_down  # unreachable, timed out or a 5xx (not: a 429 saying it is busy)


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
    def create(cls, concurrency: int, timeout_s: float, connect_timeout_s: float) -> _LoopState:
        connector = aiohttp.TCPConnector(limit=concurrency, limit_per_host=concurrency)
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_timeout_s)
        session = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return cls(session=session, slots=asyncio.Semaphore(concurrency), loop=asyncio.get_running_loop())


class OpenAIEngine(Engine):
    """Sends each request to one replica of the fleet of chat-completions endpoints (engines/fleet.py)."""

    label = "openai-compatible server"

    @staticmethod
    def check_target(target: str) -> None:
        """What is known before any request (engines.spec.check_engine): every URL is an http(s) one."""
        for url in target.split(","):
            if url.strip():
                chat_completions_url(url)

    def __init__(
        self,
        urls: str | list[str],
        *,
        model: str | None = None,
        api_key_env: str = "OPENAI_API_KEY",
        concurrency: int = 64,
        timeout_s: float = 300.0,
        connect_timeout_s: float = 10.0,
        max_retries: int = 3,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        extra_body: dict | None = None,
        continue_final_message: bool | None = None,
        max_tokens_field: str = "max_tokens",
        drop_fields: list[str] | tuple[str, ...] | str = (),  # a str: "stop,top_p" or a JSON list, from a flag
        max_rps: float | None = None,
        cooldown_s: float = 5.0,
        spec: str | None = None,
    ):
        """`continue_final_message`: None sends vLLM's continuation fields until a server refuses
        them, then continues a turn by sending the tool output as the next message (False: always).
        `max_tokens_field`: "max_completion_tokens" for OpenAI's reasoning models.
        `drop_fields`: request fields never to send (e.g. ["stop", "temperature"]).
        A refusal naming any of these is learned from at run time as well.
        `timeout_s` bounds one attempt; `connect_timeout_s` the connection, and the check at start that
        the servers answer at all (`ready`). `max_rps`: requests per second each server gets at most;
        `cooldown_s`: how long a failing server is left out first (doubled while it keeps failing)."""
        url_list = [u for u in (urls.split(",") if isinstance(urls, str) else urls) if u.strip()]
        if not url_list:
            raise UserError("openai engine: give at least one server URL, e.g. openai:http://127.0.0.1:8000/v1")
        if concurrency < 1:
            raise UserError(f"openai engine: concurrency must be at least 1, got {concurrency}")
        self.spec = spec or "openai:" + ",".join(url_list)
        self.tokenizer = None
        max_rps = check_max_rps(max_rps, "openai engine")
        if not 0 < cooldown_s < float("inf"):
            raise UserError(f"openai engine: cooldown_s must be a positive number, got {cooldown_s!r}")
        self.fleet = Fleet([chat_completions_url(url) for url in url_list], cooldown_s, max_rps)
        self.servers = self.fleet.replicas
        self.model = model
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.concurrency = concurrency
        for name, value in (("timeout_s", timeout_s), ("connect_timeout_s", connect_timeout_s)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
                raise UserError(f"openai engine: {name} must be a positive number of seconds, got {value!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise UserError(f"openai engine: max_retries must be a whole number of at least 0, got {max_retries!r}")
        self.timeout_s = float(timeout_s)
        self.connect_timeout_s = float(connect_timeout_s)
        self.max_retries = max_retries
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        if max_tokens_field not in TOKEN_FIELDS:
            raise UserError(f"openai engine: max_tokens_field must be one of {', '.join(TOKEN_FIELDS)}")
        if not isinstance(extra_body, (dict, type(None))):
            raise UserError(
                f"openai engine: extra_body={extra_body} must be a JSON object of request fields, "
                'e.g. extra_body={"top_k": 20}'
            )
        self.extra_body = dict(extra_body or {})
        self.wire = WireSettings(continue_final_message, max_tokens_field, _field_names(drop_fields))
        self.adaptations: list[str] = []  # what was learned from refusals, in order
        self.attempts = 0  # HTTP attempts made, retries included
        self._posted: dict[int, tuple[str, float]] = {}  # attempt in flight -> (url, when it was sent)
        self._last_failure: tuple[str, int, float] | None = None  # (error, attempt it ended, when)
        self._state: _LoopState | None = None
        self._model_lookup: asyncio.Lock | None = None

    # ------------------------------------------------------------------ public

    async def generate(self, request: GenerationRequest) -> Generation:
        state = self._loop_state()
        async with state.slots:
            try:
                model = await self._model_name(state.session)
                return await self._generate_with_retries(state.session, request, model)
            except Exception as exc:  # never raise for one request
                return error_generation(f"{type(exc).__name__}: {exc}")

    async def ready(self) -> None:
        """Every server is asked GET /v1/models within `connect_timeout_s` (any HTTP status counts: it is
        alive). One that does not answer is left out (a warning; it is tried again after its cooldown); none
        answering is a UserError before any work, instead of requests that wait for ever."""
        failures = await asyncio.gather(*(self._check(replica) for replica in self.servers))
        down = [(replica, failure) for replica, failure in zip(self.servers, failures) if failure]
        if len(down) == len(self.servers):
            raise UserError(down[0][1])
        for replica, failure in down:
            self.fleet.failed(replica)
            logger.warning("openai engine: %s; left out until it answers", failure)

    async def _check(self, replica: Replica) -> str | None:
        """None when `replica` answers, else the line saying what happened."""
        state = self._loop_state()
        url = replica.url.removesuffix("/chat/completions") + "/models"
        timeout = aiohttp.ClientTimeout(total=self.connect_timeout_s)
        try:
            async with state.session.get(url, headers=self._headers(), timeout=timeout) as response:
                await response.read()
        except asyncio.TimeoutError:
            return (
                f"{self.spec}: the server accepted a connection but did not answer GET {url} within "
                f"{self.connect_timeout_s:g} s (is it still loading? engine option connect_timeout_s=N waits longer)"
            )
        except aiohttp.ClientError as error:
            where = f" ({replica.url})" if len(self.servers) > 1 else ""
            return f"{self.spec}{where}: cannot be reached ({type(error).__name__}: {error}); is it running?"
        return None

    def waiting_on(self) -> str | None:
        now = asyncio.get_running_loop().time() if self._state is not None else 0.0
        parts = []
        if self._posted:
            oldest_url, oldest = min(self._posted.values(), key=lambda posted: posted[1])
            parts.append(
                f"{len(self._posted)} request(s) waiting on the server, the oldest {now - oldest:.0f} s of its "
                f"{self.timeout_s:g} s timeout ({oldest_url})"
            )
        if self._last_failure is not None and now - self._last_failure[2] < 60:
            error, attempt, _ = self._last_failure
            parts.append(f"last failure: {error} (attempt {attempt} of {self.max_retries + 1}, retried with backoff)")
        return "; ".join(parts) or None

    async def aclose(self) -> None:
        await self.arelease()

    async def arelease(self) -> None:
        state, self._state = self._state, None
        if state is not None and state.loop is asyncio.get_running_loop():
            await state.session.close()

    # ------------------------------------------------------------------ request

    async def _generate_with_retries(
        self, session: aiohttp.ClientSession, request: GenerationRequest, model: str
    ) -> Generation:
        last_error = RetryableError("no attempt made")
        attempt, failed_over = 0, False
        while attempt <= self.max_retries:
            if attempt and not failed_over:
                await asyncio.sleep(self._backoff(attempt, last_error.retry_after))
            server = self.fleet.pick(request.session)
            await self.fleet.paced(server)
            server.in_flight += 1
            server.sent += 1
            body = request_body(request, model, self.wire, self.extra_body)
            try:
                payload = await self._post(session, server.url, body)
                self.fleet.succeeded(server)
                return parse_completion(payload, request, stop_sent="stop" in body)
            except RetryableError as exc:
                last_error = exc
                attempt += 1
                self._last_failure = (str(exc)[:200], attempt, asyncio.get_running_loop().time())
                failed_over = exc.server_down and self.fleet.any_other_healthy(server)
                if exc.server_down:  # out for a while; its trajectories move to a healthy replica at once
                    self.fleet.failed(server)
            except RefusedRequest as exc:
                failed_over = False
                overflow = context_overflow(exc.text)
                if overflow is not None:  # before learning: vLLM's wording quotes 'max_tokens'
                    if not 0 < overflow.room() < request.max_new_tokens:
                        return context_generation(
                            f"{server.url}: {overflow.message}", prompt_tokens=overflow.prompt_tokens or 0
                        )
                    # the prompt fits: ask again for what is left of the context, as the hf engine does
                    request = dataclasses.replace(request, max_new_tokens=overflow.room())
                elif not self._learn(exc, body) and request_body(request, model, self.wire, self.extra_body) == body:
                    raise  # nothing to leave out: the request itself is wrong
                # sent again at once, smaller or without the refused field; each answer teaches something new
            finally:
                server.in_flight -= 1
        return error_generation(f"gave up after {self.max_retries + 1} attempts: {last_error}")

    def _learn(self, refusal: RefusedRequest, body: dict) -> bool:
        changes = self.wire.learn(refused_fields(refusal.status, refusal.text, body))
        for change in changes:
            logger.warning("openai engine: a server refused a field (%s): from now on %s", refusal, change)
        self.adaptations.extend(changes)
        return bool(changes)

    async def _post(self, session: aiohttp.ClientSession, url: str, body: dict) -> dict:
        self.attempts += 1
        number = self.attempts
        self._posted[number] = (url, asyncio.get_running_loop().time())
        try:
            async with session.post(url, json=body, headers=self._headers()) as response:
                text = await response.text()
                status, retry_after = response.status, _retry_after_seconds(response.headers)
        except asyncio.TimeoutError as exc:
            raise RetryableError(f"{url}: no answer within {self.timeout_s:g} s") from exc
        except aiohttp.ClientError as exc:
            raise RetryableError(f"{url}: {type(exc).__name__}: {exc}") from exc
        finally:
            self._posted.pop(number, None)
        if status in RETRYABLE_STATUS:
            down = status >= 500 and retry_after is None
            raise RetryableError(f"{url}: HTTP {status}: {text[:300]}", retry_after=retry_after, server_down=down)
        if status >= 400:
            raise RefusedRequest(f"{url}: HTTP {status}: {text[:500]}", status, text)
        return json.loads(text)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        """The one backoff (pacing.backoff_delay); a server's Retry-After is honoured, up to `max_backoff_s`."""
        delay = backoff_delay(attempt - 1, self.backoff_s, self.max_backoff_s)
        if retry_after is not None:
            delay = max(delay, min(retry_after, self.max_backoff_s))
        return delay

    def _headers(self) -> dict:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    # ------------------------------------------------------------------ setup

    def _loop_state(self) -> _LoopState:
        loop = asyncio.get_running_loop()
        if self._state is None or self._state.loop is not loop:
            self._state = _LoopState.create(self.concurrency, self.timeout_s, self.connect_timeout_s)
            self._model_lookup = asyncio.Lock()
        return self._state

    async def _model_name(self, session: aiohttp.ClientSession) -> str:
        """The `model` option, or the first model the first server lists (asked once)."""
        if self.model:
            return self.model
        async with self._model_lookup:
            if not self.model:
                models_url = self.fleet.pick().url.removesuffix("/chat/completions") + "/models"  # a healthy one
                async with session.get(models_url, headers=self._headers()) as response:
                    response.raise_for_status()
                    listed = (await response.json(content_type=None)).get("data") or []
                if not listed:
                    raise RuntimeError(f"{models_url} lists no model; pass model=NAME")
                self.model = listed[0]["id"]
        return self.model


def _field_names(names: list[str] | tuple[str, ...] | str) -> set[str]:
    """A list of request field names; from the command line also "stop,temperature" or a JSON list."""
    if isinstance(names, str):
        try:
            names = json.loads(names)
        except json.JSONDecodeError:
            names = [name.strip() for name in names.split(",") if name.strip()]
    if not isinstance(names, (list, tuple, set)) or not all(isinstance(name, str) for name in names):
        raise UserError(f"openai engine: drop_fields must be a list of field names, got {names!r}")
    return set(names)


def _retry_after_seconds(headers) -> float | None:
    try:
        return float(headers.get("retry-after", ""))
    except ValueError:
        return None
