"""`RemoteSandbox`: the `Sandbox` API over HTTP, against `agentdata sandbox serve`.

Transport failures are retried with exponential backoff and jitter. A stateless call is
always safe to repeat; a session call is repeated only when the request never reached
the server (connection refused or reset before sending), so no cell runs twice.

The blocking API uses httpx; the async one (what the agent loop calls, many at once) uses
aiohttp, whose client costs a fraction of httpx's CPU per request (measured for the
OpenAI engine: 290 against 130-180 requests/s on the same run).
"""

from __future__ import annotations

import asyncio
import base64
import json
import random
import time
from typing import Any

import aiohttp
import httpx

from agentdata.sandbox.base import RemoteSandboxError
from agentdata.sandbox.result import ExecResult

RETRY_STATUS = (502, 503, 504)


class RemoteSandbox:
    def __init__(self, url: str, retries: int = 5, backoff_s: float = 0.2, request_timeout_s: float = 60.0):
        self.url = url.rstrip("/")
        self.retries = retries
        self.backoff_s = backoff_s
        self.request_timeout_s = request_timeout_s
        self._client = httpx.Client(timeout=request_timeout_s)
        self._async_sessions: dict[int, aiohttp.ClientSession] = {}

    # -- requests
    def _payload(
        self,
        code: str,
        session_id: str | None,
        timeout: float | None,
        stdin: str | None,
        files: dict | None,
        memory_mb: int | None,
        display_last: bool,
    ) -> dict[str, Any]:
        encoded = {
            name: base64.b64encode(data.encode() if isinstance(data, str) else data).decode()
            for name, data in (files or {}).items()
        }
        return {
            "code": code,
            "session_id": session_id,
            "timeout": timeout,
            "stdin": stdin,
            "files": encoded,
            "memory_mb": memory_mb,
            "display_last": display_last,
        }

    def _http_timeout(self, timeout: float | None) -> float:
        return max(self.request_timeout_s, (timeout or 0) + 30)

    def _should_retry(self, error: Exception | None, response: httpx.Response | None, stateful: bool) -> bool:
        if response is not None:
            return response.status_code in RETRY_STATUS
        if stateful:  # the cell may already have run: only retry what never left this machine
            return isinstance(error, (httpx.ConnectError, httpx.ConnectTimeout))
        return isinstance(error, httpx.TransportError)

    def _delay(self, attempt: int) -> float:
        return self.backoff_s * (2**attempt) * (0.5 + random.random())

    def _result(self, response: httpx.Response) -> ExecResult:
        if response.status_code != 200:
            raise RemoteSandboxError(f"{self.url} answered {response.status_code}: {response.text[:200]}")
        return ExecResult.from_dict(response.json())

    def run(
        self,
        code: str,
        session_id: str | None = None,
        timeout: float | None = None,
        *,
        stdin: str | None = None,
        files: dict[str, bytes | str] | None = None,
        memory_mb: int | None = None,
        display_last: bool = True,
    ) -> ExecResult:
        payload = self._payload(code, session_id, timeout, stdin, files, memory_mb, display_last)
        for attempt in range(self.retries + 1):
            error, response = None, None
            try:
                response = self._client.post(f"{self.url}/v1/run", json=payload, timeout=self._http_timeout(timeout))
            except httpx.HTTPError as caught:
                error = caught
            if attempt < self.retries and self._should_retry(error, response, session_id is not None):
                time.sleep(self._delay(attempt))
                continue
            if error is not None:
                raise RemoteSandboxError(f"{self.url}: {error}") from error
            return self._result(response)
        raise AssertionError("unreachable")

    def _async_session(self) -> aiohttp.ClientSession:
        # A ClientSession belongs to the loop it was first used on.
        loop_id = id(asyncio.get_running_loop())
        if loop_id not in self._async_sessions:
            connector = aiohttp.TCPConnector(limit=256)
            timeout = aiohttp.ClientTimeout(total=self.request_timeout_s)
            self._async_sessions[loop_id] = aiohttp.ClientSession(connector=connector, timeout=timeout)
        return self._async_sessions[loop_id]

    async def arun(
        self,
        code: str,
        session_id: str | None = None,
        timeout: float | None = None,
        *,
        stdin: str | None = None,
        files: dict[str, bytes | str] | None = None,
        memory_mb: int | None = None,
        display_last: bool = True,
    ) -> ExecResult:
        payload = self._payload(code, session_id, timeout, stdin, files, memory_mb, display_last)
        session = self._async_session()
        http_timeout = aiohttp.ClientTimeout(total=self._http_timeout(timeout))
        for attempt in range(self.retries + 1):
            error, status, body = None, None, ""
            try:
                async with session.post(f"{self.url}/v1/run", json=payload, timeout=http_timeout) as response:
                    status, body = response.status, await response.text()
            except (aiohttp.ClientError, asyncio.TimeoutError) as caught:
                error = caught
            if attempt < self.retries and self._should_retry_async(error, status, session_id is not None):
                await asyncio.sleep(self._delay(attempt))
                continue
            if error is not None:
                raise RemoteSandboxError(f"{self.url}: {type(error).__name__}: {error}") from error
            if status != 200:
                raise RemoteSandboxError(f"{self.url} answered {status}: {body[:200]}")
            return ExecResult.from_dict(json.loads(body))
        raise AssertionError("unreachable")

    @staticmethod
    def _should_retry_async(error: Exception | None, status: int | None, stateful: bool) -> bool:
        if status is not None:
            return status in RETRY_STATUS
        if stateful:  # the cell may already have run: only retry what never left this machine
            return isinstance(error, aiohttp.ClientConnectorError)
        return True

    def close_session(self, session_id: str) -> None:
        self._client.delete(f"{self.url}/v1/sessions/{session_id}")

    async def aclose_session(self, session_id: str) -> None:
        async with self._async_session().delete(f"{self.url}/v1/sessions/{session_id}") as response:
            await response.read()

    def close(self) -> None:
        self._client.close()
        self._async_sessions.clear()  # async sessions close with their loops

    async def arelease(self) -> None:
        """Close the HTTP session of the running event loop (it cannot outlive its loop); the rest stays usable."""
        session = self._async_sessions.pop(id(asyncio.get_running_loop()), None)
        if session is not None:
            await session.close()

    async def aclose(self) -> None:
        await self.arelease()
        self.close()

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
