"""`CodeSandbox`: what the agent loop and the tools need of a sandbox, local or remote.

`Sandbox` (this machine) and `RemoteSandbox` (`agentdata sandbox serve` over HTTP) both
satisfy it, and so must any stand-in. Code runs in sessions that keep their variables
like notebook cells; whatever the code does comes back as an `ExecResult`, never as an
exception (a sandbox that cannot be reached at all may raise).

When the sandbox itself cannot work (its template process died, its service cannot be reached
after the retries), `run` raises `SandboxUnavailable`; a remote one raises its kind
`RemoteSandboxError`. Either is the sandbox's failure, never the code's.

`arelease()` frees what the sandbox holds for the *running* event loop (the remote one's
HTTP session cannot outlive its loop); the sandbox stays usable from other loops. Callers
that run an event loop of their own (`collect`) call it before that loop ends.
"""

from __future__ import annotations

import secrets
from typing import Protocol, runtime_checkable

from agentdata.sandbox.result import ExecResult


def new_session_id(prefix: str) -> str:
    """A session's name, `PREFIX-<128 random bits>`. A session service (`sandbox serve`, like SandboxFusion) trusts
    whoever reaches it and keys sessions by the name a client gives: the name is what lets a client run in a
    session or close it, so agentdata's clients make it one no other client can guess (docs/sandbox.md)."""
    return f"{prefix}-{secrets.token_hex(16)}"


class SandboxUnavailable(RuntimeError):
    """The sandbox could not run the code at all (its own machinery failed), as opposed to code that failed."""


class RemoteSandboxError(SandboxUnavailable):
    """A sandbox service could not be reached, or answered badly, after all retries."""


@runtime_checkable
class CodeSandbox(Protocol):
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
        """Run `code` (in `session_id`'s namespace when given) and say what happened."""
        ...

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
        """`run` for asyncio code: many calls may be awaited at once."""
        ...

    def close_session(self, session_id: str) -> None:
        """Free a session: its variables, files and processes."""
        ...

    async def aclose_session(self, session_id: str) -> None: ...

    async def arelease(self) -> None:
        """Free what is bound to the running event loop; the sandbox stays usable."""
        ...

    def close(self) -> None:
        """Free everything; the sandbox is not used again."""
        ...
