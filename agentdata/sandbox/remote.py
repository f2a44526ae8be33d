"""`RemoteSandbox`: the `Sandbox` API over HTTP, against `agentdata sandbox serve`.

Transport failures are retried with exponential backoff and jitter (`http_client.py`, the client
SandboxFusion's endpoints use too). A stateless call is always safe to repeat; a session call is
repeated only when the request never reached the server (connection refused or reset before
sending), so no cell runs twice.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from agentdata.sandbox.http_client import RetryRule, SandboxHttpClient
from agentdata.sandbox.result import ExecResult

RETRY_STATUS = (502, 503, 504)


def _result(text: str) -> ExecResult:
    return ExecResult.from_dict(json.loads(text))


class RemoteSandbox:
    def __init__(self, url: str, retries: int = 5, backoff_s: float = 0.2, request_timeout_s: float = 60.0):
        self.http = SandboxHttpClient(url, retries, backoff_s, request_timeout_s)
        self.url = self.http.url

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
        return self.http.post("/v1/run", payload, timeout, _retry_rule(session_id), _result)

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
        return await self.http.apost("/v1/run", payload, timeout, _retry_rule(session_id), _result)

    def close_session(self, session_id: str) -> None:
        self.http.delete(f"/v1/sessions/{session_id}")

    async def aclose_session(self, session_id: str) -> None:
        await self.http.adelete(f"/v1/sessions/{session_id}")

    def close(self) -> None:
        self.http.close()

    async def arelease(self) -> None:
        """Close the HTTP session of the running event loop (it cannot outlive its loop); the rest stays usable."""
        await self.http.arelease()

    async def aclose(self) -> None:
        await self.arelease()
        self.close()

    def __enter__(self) -> RemoteSandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _retry_rule(session_id: str | None) -> RetryRule:
    """A session's cell may already have run: only what never reached the server is sent again."""
    return RetryRule(RETRY_STATUS, stateful=session_id is not None)
