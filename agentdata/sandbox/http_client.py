"""The one HTTP client of sandbox services: JSON posts with retries, blocking (httpx) and async (aiohttp).

Both kinds of service use it: `agentdata sandbox serve` (`remote.py`) and a stock SandboxFusion
(`fusion.py`); they differ only in what they retry, which each says in a `RetryRule`. A failed try
waits with the one backoff (`pacing.backoff_delay`: exponential, jittered). A request that may have
reached the server is repeated only when the rule allows it (`stateful`: a session cell may already have
run, so only a request that never left this machine is sent again, and no cell runs twice).

The async side uses aiohttp, whose client costs a fraction of httpx's CPU per request (measured for the
OpenAI engine: 290 against 130-180 requests/s on the same run); an aiohttp session belongs to the event
loop it was made on, so there is one per loop, and `arelease` closes the running loop's.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp
import httpx

from agentdata.pacing import backoff_delay
from agentdata.sandbox.base import RemoteSandboxError

T = TypeVar("T")
MAX_BACKOFF_S = 30.0  # the longest wait between two tries


@dataclass(frozen=True)
class RetryRule:
    """What a service's client tries again: these statuses, transport failures, and unreadable answers."""

    statuses: tuple[int, ...]
    stateful: bool = False  # only a request that never reached the server is sent again
    unreadable_answers: bool = False  # a 200 whose body `read` refused (SandboxFusion's own SandboxError)


class SandboxHttpClient:
    def __init__(self, url: str, retries: int, backoff_s: float = 0.2, request_timeout_s: float = 60.0):
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.request_timeout_s = request_timeout_s
        self._client = httpx.Client(timeout=request_timeout_s)
        self._async_sessions: dict[int, aiohttp.ClientSession] = {}

    def http_timeout(self, run_timeout: float | None) -> float:
        """A request's limit: the code's own time limit and a margin, never under the client's."""
        return max(self.request_timeout_s, (run_timeout or 0) + 30)

    def _delay(self, attempt: int) -> float:
        return backoff_delay(attempt, self.backoff_s, MAX_BACKOFF_S)

    def post(
        self, path: str, payload: dict[str, Any], run_timeout: float | None, rule: RetryRule, read: Callable[[str], T]
    ) -> T:
        """POST `payload` as JSON; the 200 answer's text through `read`; a RemoteSandboxError when no try worked."""
        for attempt in range(self.retries + 1):
            try:
                response = self._client.post(f"{self.url}{path}", json=payload, timeout=self.http_timeout(run_timeout))
            except httpx.HTTPError as error:
                problem: Exception = error
                retry = isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout)) or (
                    not rule.stateful and isinstance(error, httpx.TransportError)
                )
            else:
                problem, retry = self._answer(response.status_code, response.text, rule, read)
                if not isinstance(problem, Exception):
                    return problem
            if not retry or attempt == self.retries:
                raise self._failure(problem) from problem
            time.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    async def apost(
        self, path: str, payload: dict[str, Any], run_timeout: float | None, rule: RetryRule, read: Callable[[str], T]
    ) -> T:
        """`post` on the running event loop."""
        timeout = aiohttp.ClientTimeout(total=self.http_timeout(run_timeout))
        for attempt in range(self.retries + 1):
            try:
                async with self._session().post(f"{self.url}{path}", json=payload, timeout=timeout) as response:
                    status, text = response.status, await response.text()
            except (aiohttp.ClientError, asyncio.TimeoutError) as error:
                problem: Exception = error
                retry = isinstance(error, aiohttp.ClientConnectorError) or not rule.stateful
            else:
                problem, retry = self._answer(status, text, rule, read)
                if not isinstance(problem, Exception):
                    return problem
            if not retry or attempt == self.retries:
                raise self._failure(problem) from problem
            await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    def _answer(self, status: int, text: str, rule: RetryRule, read: Callable[[str], T]) -> tuple[Any, bool]:
        """(what `read` made of a 200, False), or (the problem, whether to try again)."""
        if status != 200:
            return RemoteSandboxError(f"{self.url} answered {status}: {text[:200]}"), status in rule.statuses
        if not rule.unreadable_answers:
            return read(text), False
        try:
            return read(text), False
        except (ValueError, RemoteSandboxError) as error:
            return error, True

    def _failure(self, problem: Exception) -> RemoteSandboxError:
        if isinstance(problem, RemoteSandboxError):
            return problem
        return RemoteSandboxError(f"{self.url}: {type(problem).__name__}: {problem}")

    def delete(self, path: str) -> None:
        self._client.delete(f"{self.url}{path}")

    async def adelete(self, path: str) -> None:
        async with self._session().delete(f"{self.url}{path}") as response:
            await response.read()

    def _session(self) -> aiohttp.ClientSession:
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._async_sessions:
            self._async_sessions[loop_id] = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=256), timeout=aiohttp.ClientTimeout(total=self.request_timeout_s)
            )
        return self._async_sessions[loop_id]

    async def arelease(self) -> None:
        """Close the running loop's session (it cannot outlive its loop); the client stays usable."""
        session = self._async_sessions.pop(id(asyncio.get_running_loop()), None)
        if session is not None:
            await session.close()

    def close(self) -> None:
        self._client.close()
        self._async_sessions.clear()  # async sessions close with their loops
