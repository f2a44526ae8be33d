"""Several sandbox services behind one `--sandbox URL,URL,...`: load spread, fail-over, a requests/s cap.

Each call goes to the member with the fewest calls in flight (ties in turn); a member that
fails (unreachable, an HTTP error, a sandbox-side error) is passed over for `cooldown_s`
and the call moves on to the next one, so a call fails only when every member does.

- Stateless endpoints (`SpreadEndpoints`, SandboxFusion's `/run_code`): any member can run
  any call, sessions included, since `FusionSandbox` replays a session's cells itself.
- agentdata services (`SpreadSandboxes`): a session's variables live on the member that ran
  its first cell, so later cells go there; if that member fails, the call fails (its state
  is gone) rather than running silently without it; new sessions go to the others.

With `max_rps` (`--sandbox-max-rps`), calls to one member are spaced at least `1 / max_rps` apart
(agentdata/pacing.py, the engine fleet's cap too); a call waits for its member's next free moment
before it counts as in flight there, as the engine fleet's requests do.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Sequence
from typing import Any

from agentdata.pacing import Pacer
from agentdata.sandbox.base import RemoteSandboxError


class AllMembersFailed(RemoteSandboxError):
    """Every member failed this call; the message lists each one's failure."""


class _Members:
    def __init__(
        self, members: Sequence[Any], failure: type[Exception] | tuple, cooldown_s: float, max_rps: float | None
    ):
        if not members:
            raise ValueError("at least one sandbox is needed")
        self.members = list(members)
        self.pacers = [Pacer(max_rps) for _ in self.members]
        self.failure = failure
        self.cooldown_s = cooldown_s
        self.in_flight = [0] * len(self.members)
        self.down_until = [0.0] * len(self.members)
        self._turn = itertools.count()

    def order(self) -> list[int]:
        """Members to try, best first: healthy before cooling down, then fewest in flight, then in turn."""
        now, start = time.monotonic(), next(self._turn)
        count = len(self.members)
        return sorted(range(count), key=lambda i: (self.down_until[i] > now, self.in_flight[i], (i - start) % count))

    def failed(self, index: int) -> None:
        self.down_until[index] = time.monotonic() + self.cooldown_s

    def call(self, indices: list[int], action: Callable[[Any], Any]) -> tuple[int, Any]:
        errors = []
        for index in indices:
            self.pacers[index].wait()
            self.in_flight[index] += 1
            try:
                return index, action(self.members[index])
            except self.failure as error:
                self.failed(index)
                errors.append(f"{error}")
            finally:
                self.in_flight[index] -= 1
        raise AllMembersFailed("; ".join(errors))

    async def acall(self, indices: list[int], action: Callable[[Any], Any]) -> tuple[int, Any]:
        errors = []
        for index in indices:
            await self.pacers[index].await_turn()
            self.in_flight[index] += 1
            try:
                return index, await action(self.members[index])
            except self.failure as error:
                self.failed(index)
                errors.append(f"{error}")
            finally:
                self.in_flight[index] -= 1
        raise AllMembersFailed("; ".join(errors))

    async def arelease(self) -> None:
        await asyncio.gather(*(member.arelease() for member in self.members))

    def close(self) -> None:
        for member in self.members:
            member.close()


class SpreadEndpoints:
    """Stateless `/run_code` endpoints as one (what `FusionSandbox` runs on)."""

    def __init__(self, endpoints: Sequence[Any], cooldown_s: float = 10.0, max_rps: float | None = None):
        self._members = _Members(endpoints, RemoteSandboxError, cooldown_s, max_rps)

    @property
    def endpoints(self) -> list[Any]:
        return self._members.members

    def run_script(self, payload: dict[str, Any]) -> Any:
        return self._members.call(self._members.order(), lambda member: member.run_script(payload))[1]

    async def arun_script(self, payload: dict[str, Any]) -> Any:
        return (await self._members.acall(self._members.order(), lambda member: member.arun_script(payload)))[1]

    async def arelease(self) -> None:
        await self._members.arelease()

    def close(self) -> None:
        self._members.close()


class SpreadSandboxes:
    """agentdata sandbox services (`RemoteSandbox`) as one `CodeSandbox`, sessions pinned to their member."""

    def __init__(self, members: Sequence[Any], cooldown_s: float = 10.0, max_rps: float | None = None):
        self._members = _Members(members, RemoteSandboxError, cooldown_s, max_rps)
        self._pins: dict[str, int] = {}

    def _candidates(self, session_id: str | None) -> list[int]:
        if session_id is not None and session_id in self._pins:
            return [self._pins[session_id]]
        return self._members.order()

    def _pin(self, session_id: str | None, index: int) -> None:
        if session_id is not None:
            self._pins[session_id] = index

    def run(self, code: str, session_id: str | None = None, timeout: float | None = None, **options: Any) -> Any:
        index, result = self._members.call(
            self._candidates(session_id), lambda member: member.run(code, session_id, timeout, **options)
        )
        self._pin(session_id, index)
        return result

    async def arun(self, code: str, session_id: str | None = None, timeout: float | None = None, **options: Any) -> Any:
        index, result = await self._members.acall(
            self._candidates(session_id), lambda member: member.arun(code, session_id, timeout, **options)
        )
        self._pin(session_id, index)
        return result

    def close_session(self, session_id: str) -> None:
        index = self._pins.pop(session_id, None)
        if index is not None:  # a request to the member too: paced as the cells are
            self._members.pacers[index].wait()
            self._members.members[index].close_session(session_id)

    async def aclose_session(self, session_id: str) -> None:
        index = self._pins.pop(session_id, None)
        if index is not None:
            await self._members.pacers[index].await_turn()
            await self._members.members[index].aclose_session(session_id)

    async def arelease(self) -> None:
        await self._members.arelease()

    def close(self) -> None:
        self._members.close()
