"""A cap on requests per second to one endpoint, shared by the engine fleet (engines/fleet.py) and the
sandbox spread (sandbox/spread.py); and the one backoff before a retry (`backoff_delay`), the engines' and the
sandbox client's.

Requests to one endpoint are spaced at least `1 / max_rps` apart: each caller books the next free
moment and waits for it, so a burst of N callers goes out over (N - 1) / max_rps seconds instead of all
at once. Booking is under a lock because the sandbox's blocking calls come from several threads (regrade,
validate); the async callers share one event loop and never wait on it for long.
"""

from __future__ import annotations

import asyncio
import random
import threading
import time
from dataclasses import field
from typing import Any

from agentdata.errors import UserError
from agentdata.settings import SettingError


def backoff_delay(retry: int, base_s: float, cap_s: float) -> float:
    """Seconds to wait before retry number `retry` (0 for the first): exponential, capped at `cap_s`, with jitter
    (half to all of it) so many clients that failed together do not retry in lockstep."""
    return min(cap_s, base_s * 2**retry) * random.uniform(0.5, 1.0)


def check_max_rps(max_rps: float | None, what: str) -> float | None:
    """`max_rps` as a float, or None (no cap); anything but a positive finite number is refused."""
    if max_rps is None:
        return None
    if isinstance(max_rps, bool) or not isinstance(max_rps, (int, float)) or not 0 < max_rps < float("inf"):
        raise UserError(f"{what}: max_rps must be a positive number of requests per second, got {max_rps!r}")
    return float(max_rps)


class Pacer:
    """One endpoint's schedule: with `max_rps` None, nobody waits."""

    def __init__(self, max_rps: float | None = None):
        self.max_rps = check_max_rps(max_rps, "pacer")
        self._next_send = 0.0  # monotonic time of the earliest next request
        self._lock = threading.Lock()

    def book(self) -> float:
        """Take the next free moment; the seconds to wait for it (0: go now)."""
        if self.max_rps is None:
            return 0.0
        with self._lock:
            now = time.monotonic()
            send_at = max(now, self._next_send)
            self._next_send = send_at + 1.0 / self.max_rps
        return send_at - now

    def wait(self) -> None:
        """Block until this caller's moment (for the blocking sandbox calls)."""
        delay = self.book()
        if delay > 0:
            time.sleep(delay)

    async def await_turn(self) -> None:
        """Wait, without blocking the loop, until this caller's moment."""
        delay = self.book()
        if delay > 0:
            await asyncio.sleep(delay)


def sandbox_max_rps_field() -> Any:
    """The `sandbox_max_rps` setting (`--sandbox-max-rps`), defined once for every config with a `sandbox`.
    Like the engine's `max_rps` it is how fast, not what: not part of a run's identity (agent/rundir.py)."""
    return field(
        default=None,
        metadata={
            "help": "Requests per second each --sandbox URL gets at most (unset: no cap); needs sandbox URLs.",
            "range": "(0, inf)",
        },
    )


def check_sandbox_max_rps(sandbox: str, max_rps: float | None) -> None:
    """From a config's `__post_init__`: a cap on a local sandbox is a mistake, said before anything runs."""
    if max_rps is not None and sandbox == "local":
        raise SettingError(
            "sandbox_max_rps", max_rps, "caps requests to sandbox services, and sandbox is 'local': give URLs"
        )
