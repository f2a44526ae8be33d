"""What the gateway records: per session, every exchange exactly as it went over the wire.

A session is one problem's run of a harness. The gateway hands it a base URL with the session's id in
its path; a request to a session that was never opened, or is closed, is refused, so a harness killed
and started again can never write into the new run's record, nor a stray one into anybody's.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from agentdata.engines.base import Sampling

# Request fields kept as the sampling settings of an exchange (the messages and tools are kept whole).
SAMPLING_FIELDS = (
    "model",
    "temperature",
    "top_p",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "seed",
    "n",
    "tool_choice",
    "parallel_tool_calls",
    "response_format",
    "reasoning_effort",
    "stream",
)


CUT = 499  # the status of a request whose session ended before the engine answered (nginx's "client closed")


@dataclass
class Exchange:
    """One request and what was answered: `response` is the body returned (a streamed one too, whole),
    `status` its HTTP status, `error` what the engine or the request got wrong. `prompt` is the prompt as the
    engine rendered it (the chat template's text with the tools; None where the engine does not say), and
    `answered_by` the engine that answered where it is not the gateway's own (smollm2-tir without its examples)."""

    messages: list[Any]
    tools: list[Any] | None
    sampling: dict[str, Any]
    started_at: float
    seconds: float = 0.0
    status: int = 200
    response: dict[str, Any] | None = None
    error: str | None = None
    # How the engine was asked to sample: the request's fields, the session's where it left them unset
    # (gateway/wire.py); None for a request that was refused before it reached the engine.
    used: dict[str, Any] | None = None
    prompt: str | None = None
    answered_by: str | None = None

    def cut(self, why: str) -> None:
        """Recorded as cut: the session ended (its harness exited or was killed) before the engine answered."""
        self.status, self.error = CUT, f"cut: {why} before the engine answered"
        self.seconds = round(time.time() - self.started_at, 4)

    def as_dict(self) -> dict[str, Any]:
        return {
            "messages": self.messages,
            "tools": self.tools,
            "sampling": self.sampling,
            "used": self.used,
            "response": self.response,
            "status": self.status,
            "error": self.error,
            "started_at": self.started_at,
            "seconds": self.seconds,
        }


def new_exchange(body: dict[str, Any]) -> Exchange:
    return Exchange(
        messages=body.get("messages") if isinstance(body.get("messages"), list) else [],
        tools=body.get("tools") if isinstance(body.get("tools"), list) else None,
        sampling={name: body[name] for name in SAMPLING_FIELDS if name in body},
        started_at=time.time(),
    )


@dataclass
class Session:
    id: str
    sampling: Sampling = field(default_factory=Sampling)  # what fills the fields a request leaves unset
    exchanges: list[Exchange] = field(default_factory=list)
    in_flight: int = 0  # requests the engine has not answered yet
    generating: set[asyncio.Future] = field(default_factory=set)  # their generations, cancelled when it closes
    closed: bool = False

    def end(self) -> None:
        """Close: the generations still running are cancelled (nobody will read them: a local engine stops
        spending its cores on them) and their requests recorded as cut."""
        self.closed = True
        for exchange in self.exchanges:
            if exchange.response is None and exchange.error is None:
                exchange.cut("the session ended")
        for generation in list(self.generating):
            generation.cancel()

    def answered(self) -> list[Exchange]:
        """The exchanges the model answered (HTTP 200), in the order they were made."""
        return [exchange for exchange in self.exchanges if exchange.status == 200 and exchange.response]


class Recorder:
    """The open sessions; `open` hands out a new one, `close` ends it and returns what it recorded."""

    def __init__(self) -> None:
        self._sessions: dict[str, Session] = {}

    def open(self, label: str = "", sampling: Sampling | None = None) -> Session:
        safe = "".join(char if char.isalnum() or char in "-_." else "_" for char in label)[:80]
        session = Session(id=f"{safe}-{uuid.uuid4().hex[:12]}" if safe else uuid.uuid4().hex)
        if sampling is not None:
            session.sampling = sampling
        self._sessions[session.id] = session
        return session

    def close_all(self) -> None:
        for session_id in list(self._sessions):
            self.close(session_id)

    def get(self, session_id: str) -> Session | None:
        return self._sessions.get(session_id)

    def close(self, session_id: str) -> Session | None:
        session = self._sessions.pop(session_id, None)
        if session is not None:
            session.end()
        return session
