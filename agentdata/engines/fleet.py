"""Which replica of an `openai:URL1,URL2,...` fleet gets a request: the router of engines/openai_compat.py.

- **Balance by outstanding requests**: a new conversation goes to the replica with the fewest requests in
  flight (ties in turn), so a slow or busy replica gets less.
- **One conversation, one replica**: every later turn of a trajectory (`GenerationRequest.session`) goes
  to the replica its first turn went to, so that replica's prefix cache holds the conversation so far (as
  SkyRL's router and vLLM's production stack route by session). The map keeps the most recent sessions
  (`STICKY_SESSIONS`); a forgotten or failed-over one is placed afresh.
- **Health and fail-over**: a replica that fails a request (connection refused or reset, a timeout, a 5xx)
  is out for `cooldown_s`, doubled at each failure in a row up to `MAX_COOLDOWN_S`; then it is tried again
  (a success puts it back). Its conversations move to a healthy replica. With every replica out, the
  least recently failed one is tried, so a fleet that went down comes back without a restart.
- **A cap on requests per second per replica** (`max_rps`): requests to one replica are spaced at least
  `1 / max_rps` apart (agentdata/pacing.py, shared with the sandbox spread); the wait happens before the
  request takes a replica's slot.
"""

from __future__ import annotations

import itertools
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from agentdata.pacing import Pacer

STICKY_SESSIONS = 100_000  # conversations remembered: far more than are in flight at once
MAX_COOLDOWN_S = 60.0


@dataclass
class Replica:
    url: str
    in_flight: int = 0
    sent: int = 0  # requests sent, for summaries and benchmarks
    failures: int = 0  # in a row
    down_until: float = 0.0  # monotonic time; 0: healthy
    pacer: Pacer = field(default_factory=Pacer)  # with max_rps: when its next request may go

    def healthy(self, now: float) -> bool:
        return self.down_until <= now


class Fleet:
    """The replicas of one engine and where each conversation lives."""

    def __init__(self, urls: list[str], cooldown_s: float = 5.0, max_rps: float | None = None):
        self.replicas = [Replica(url, pacer=Pacer(max_rps)) for url in urls]
        self.cooldown_s = cooldown_s
        self.sessions: OrderedDict[str, Replica] = OrderedDict()
        self.failovers = 0  # conversations moved off a failed replica
        self._turn = itertools.count()

    def pick(self, session: str | None = None) -> Replica:
        """The replica for the next request of `session` (None: a request of no conversation)."""
        now = time.monotonic()
        home = self.sessions.get(session) if session is not None else None
        if home is not None and home.healthy(now):
            self.sessions.move_to_end(session)
            return home
        replica = self._least_busy(now)
        if session is not None:
            if home is not None:
                self.failovers += 1
            self.sessions[session] = replica
            self.sessions.move_to_end(session)
            if len(self.sessions) > STICKY_SESSIONS:
                self.sessions.popitem(last=False)
        return replica

    def _least_busy(self, now: float) -> Replica:
        turn, count = next(self._turn), len(self.replicas)
        rotated = [self.replicas[(turn + offset) % count] for offset in range(count)]
        healthy = [replica for replica in rotated if replica.healthy(now)]
        if not healthy:  # all out: the one whose cooldown ends first is tried again
            return min(rotated, key=lambda replica: replica.down_until)
        return min(healthy, key=lambda replica: replica.in_flight)

    def failed(self, replica: Replica) -> None:
        """A request to `replica` failed as a dead or overloaded server does: out for a while."""
        replica.failures += 1
        cooldown = min(MAX_COOLDOWN_S, self.cooldown_s * 2 ** (replica.failures - 1))
        replica.down_until = time.monotonic() + cooldown

    def succeeded(self, replica: Replica) -> None:
        replica.failures, replica.down_until = 0, 0.0

    def any_other_healthy(self, replica: Replica) -> bool:
        now = time.monotonic()
        return any(other is not replica and other.healthy(now) for other in self.replicas)

    async def paced(self, replica: Replica) -> None:
        """With `max_rps`: wait for `replica`'s next free moment, and book the one after it."""
        await replica.pacer.await_turn()
