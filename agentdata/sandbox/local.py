"""`Sandbox`: the local code sandbox, usable from plain code and from asyncio alike.

The pool lives on a private event-loop thread, so `run` works without a loop and
`arun` never blocks the caller's loop: many coroutines can await calls at once. The thread is
the standard library's, not anyio's blocking portal as the MCP client's (tools/mcp.py): the
sandbox imports with the standard library alone, as a system python of another user runs it
(tests/test_sandbox.py's unprivileged test; anyio there failed the import).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import warnings
from collections.abc import Coroutine
from typing import Any

from agentdata.sandbox.config import SandboxConfig
from agentdata.sandbox.executors import Pool
from agentdata.sandbox.result import ExecResult

logger = logging.getLogger(__name__)


class Sandbox:
    """Runs Python code in isolated, warm worker processes on this machine.

    `Sandbox()` uses the defaults of `SandboxConfig`; keyword arguments override single
    fields (`Sandbox(workers=8, timeout_s=10)`). Use it as a context manager, or call
    `close()`.
    """

    def __init__(self, config: SandboxConfig | None = None, **overrides: Any):
        self.config = dataclasses.replace(config or SandboxConfig(), **overrides)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="agentdata-sandbox", daemon=True)
        self._thread.start()
        self._closed = False
        self._pool = self._submit(self._make_pool()).result()
        try:
            self._submit(self._pool.start()).result()
        except BaseException:
            self._stop_loop()
            raise
        for warning in self._pool.warnings:
            logger.warning("sandbox: %s", warning)
            warnings.warn(f"agentdata sandbox: {warning}", RuntimeWarning, stacklevel=2)

    async def _make_pool(self) -> Pool:
        return Pool(self.config)  # built on the loop thread: its asyncio objects belong to that loop

    def _submit(self, coroutine: Coroutine) -> Any:
        if threading.current_thread() is self._thread:
            coroutine.close()
            raise RuntimeError("Sandbox.run was called from the sandbox's own thread")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop)

    @property
    def isolation(self) -> dict:
        """What isolation is in force: own uid per session, private /tmp, and startup warnings."""
        return self._pool.isolation

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
        """Run `code` and return what happened; never raises for anything the code does.

        Calls with the same `session_id` share variables like notebook cells; without one
        each call is fresh. `files` are written into the working dir first. A bare last
        expression is printed (notebook style) unless `display_last=False`.
        """
        return self._submit(self._pool.run(code, session_id, timeout, stdin, files, memory_mb, display_last)).result()

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
        """`run` for asyncio code: awaits without blocking the caller's event loop."""
        future = self._submit(self._pool.run(code, session_id, timeout, stdin, files, memory_mb, display_last))
        return await asyncio.wrap_future(future)

    def close_session(self, session_id: str) -> None:
        """Free a session: its variables, files and every process it started are gone."""
        self._submit(self._pool.close_session(session_id)).result()

    async def aclose_session(self, session_id: str) -> None:
        await asyncio.wrap_future(self._submit(self._pool.close_session(session_id)))

    async def arelease(self) -> None:
        """Nothing here is bound to the caller's event loop (the pool runs on its own thread)."""

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._submit(self._pool.close()).result(timeout=30)
        finally:
            self._stop_loop()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def _stop_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        if not self._thread.is_alive():
            self._loop.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
