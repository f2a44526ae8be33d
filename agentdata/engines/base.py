"""The one interface every model backend implements: a request in, a `Generation` out.

A single request's failure never raises: it comes back as `finish_reason="error"` with
the message, so one bad request cannot take down a collect run of thousands.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass, replace
from typing import Any

# "context": the prompt does not fit the model's context, so nothing was generated.
FINISH_REASONS = ("stop", "length", "context", "error")

# How a rollout samples is one value, `Sampling`, with every default written here once. The agent loop builds
# its requests from its loop's (`LoopConfig.rollout_sampling`), the recording gateway fills what a harness's
# request leaves unset from the run's, GRPO's rollouts, filter's profile and validation during training sample
# at ROLLOUT_TEMPERATURE; what the user types (`--temperature`, `temperature=`, `loop.temperature=`) lands in a
# `LoopConfig`, which hands its `Sampling` on.

# collect's and eval's teacher: a little below the model's full distribution.
DEFAULT_TEMPERATURE = 0.7
# RL rollouts sample the full distribution (the findings' setting: exploration needs it). GRPO's rollouts run at
# it, filter profiles the student at it so the pass rates are the ones GRPO will see, and validation during
# training evaluates at it.
ROLLOUT_TEMPERATURE = 1.0
DEFAULT_TOP_P = 1.0
DEFAULT_MAX_NEW_TOKENS = 512  # the agent loop: every turn of a trajectory together; the gateway: each request's cap


@dataclass(frozen=True)
class Sampling:
    """One rollout's sampling settings. `max_new_tokens` is a budget: the agent loop spends it over a
    trajectory's turns, the gateway caps each request of a harness at it. `seed` None: unseeded."""

    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def request_fields(self) -> dict[str, Any]:
        """The keywords of a `GenerationRequest` that samples so."""
        return asdict(self)

    def with_(self, **changes: Any) -> Sampling:
        return replace(self, **changes)

    def as_dict(self) -> dict[str, Any]:
        """As a trajectory records it: the stop strings as a list."""
        return {**asdict(self), "stop": list(self.stop)}


@dataclass
class GenerationRequest:
    """One chat completion to make."""

    messages: list[dict]  # chat messages (Protocol.to_plain_messages, or canonical ones for `tools`)
    continue_final: bool = False  # continue the last (assistant) message instead of opening a new turn
    # The same conversation with the last assistant turn closed (tool output as the next message),
    # for servers that refuse to continue a message; None: send `messages` as a new turn.
    turn_messages: list[dict] | None = None
    tools: list[dict] | None = None  # JSON schemas for the server's / chat template's native tool calling
    max_new_tokens: int = DEFAULT_MAX_NEW_TOKENS
    temperature: float = DEFAULT_TEMPERATURE
    top_p: float = DEFAULT_TOP_P
    stop: tuple[str, ...] = ()
    seed: int | None = None
    # The conversation (trajectory) this request is a turn of: a fleet keeps its turns on one replica,
    # whose prefix cache then holds the conversation so far (engines/fleet.py). None: no conversation.
    session: str | None = None

    @property
    def sampling(self) -> Sampling:
        """How this request samples, as one value (what a recorder keeps)."""
        return Sampling(self.temperature, self.top_p, self.max_new_tokens, self.seed, tuple(self.stop))


@dataclass
class Generation:
    """What the model produced for one request."""

    text: str  # generated text, WITHOUT the stop string
    stop_reason: str | None  # the stop string that ended it, or None (end of turn / length / error)
    finish_reason: str  # "stop" (stop string or end of turn) | "length" | "context" | "error"
    prompt_tokens: int
    completion_tokens: int
    error: str | None = None
    # False when the server stopped without saying whether at a stop string or at the end of
    # its turn (OpenAI's API, `transformers serve`): the caller judges from the text.
    stop_known: bool = True
    tool_calls: list[dict] | None = None  # native tool calls, OpenAI form, arguments as the server sent them
    reasoning: str | None = None  # the server's `reasoning_content` (reasoning parsers, hosted APIs)
    reasoning_tokens: int | None = None  # reasoning tokens, when the server counts them (part of completion_tokens)
    # The prompt exactly as the model read it (the chat template's text, or the tokens decoded), where the
    # engine knows it: the recording gateway keeps it beside the request. None: the server did not say.
    prompt: str | None = None
    # The engine that answered, where a wrapper answered through another (smollm2-tir without its worked
    # examples answers as plain smollm2); None: the engine asked.
    answered_by: str | None = None


def error_generation(message: str, prompt_tokens: int = 0) -> Generation:
    """The result for a request that could not be served."""
    return Generation(
        text="",
        stop_reason=None,
        finish_reason="error",
        prompt_tokens=prompt_tokens,
        completion_tokens=0,
        error=message,
    )


def context_generation(message: str, prompt_tokens: int = 0) -> Generation:
    """The result for a prompt longer than the model's context: refused before any generation."""
    return Generation(
        text="",
        stop_reason=None,
        finish_reason="context",
        prompt_tokens=prompt_tokens,
        completion_tokens=0,
        error=message,
    )


def cut_at_first_stop(text: str, stop: tuple[str, ...]) -> tuple[str, str | None]:
    """Cut `text` before the earliest stop string in it; return (text, the stop string or None)."""
    earliest_index, matched = len(text), None
    for stop_string in stop:
        index = text.find(stop_string)
        if index != -1 and index < earliest_index:
            earliest_index, matched = index, stop_string
    return text[:earliest_index], matched


def engine_label(engine: Any) -> str:
    """What a summary calls the engine that ran: its `label`, else (a plug-in) its class name."""
    label = getattr(engine, "label", None)
    return label if isinstance(label, str) and label else type(engine).__name__


class Engine:
    """A model backend. Subclasses implement `generate`; `aclose` frees what they hold."""

    spec: str = ""
    tokenizer: Any = None
    # The engine that runs the model, in a user's words ("transformers", "vllm (managed server)"): summaries
    # name it, since a spec such as the default `smollm2` runs on whichever engine this machine has.
    label: str = ""

    async def generate(self, request: GenerationRequest) -> Generation:
        raise NotImplementedError

    @property
    def turn_stops(self) -> tuple[str, ...]:
        """Stop strings that end the assistant's turn in this engine's prompt text, which the agent loop
        adds to the protocol's: `\nUser:` when the tokenizer has the plain template (engines.prompt_template)."""
        from agentdata.engines.prompt_template import turn_end_stops

        return turn_end_stops(self.tokenizer)

    def tools_refusal(self) -> str | None:
        """Why this engine cannot honour a request's `tools` (the recording gateway then refuses the request
        with HTTP 400 naming them, rather than answer without them); None when it can: a local engine shows
        them through its chat template (engines/tool_prompt.py), a server parses calls itself."""
        return None

    async def generate_many(self, requests: list[GenerationRequest]) -> list[Generation]:
        """All requests at once, so local engines can batch them; results in request order."""
        return list(await asyncio.gather(*(self.generate(request) for request in requests)))

    async def ready(self) -> None:
        """Called once before any work: raise a UserError when the engine cannot serve at all (a server
        that cannot be reached, or never answers), so a run stops at once instead of waiting on it."""
        return None

    def waiting_on(self) -> str | None:
        """What the requests in flight are waiting for (a slow or silent server, retries), to show while
        nothing comes back; None when there is nothing to say beyond "generating"."""
        return None

    def wait_idle(self) -> None:
        """Block until nothing of this engine uses its model any more (a local engine's generating thread
        can outlive the last result by a moment); a served engine's model is elsewhere: nothing to wait for."""
        return None

    async def aclose(self) -> None:
        return None

    async def arelease(self) -> None:
        """Drop what belongs to the running event loop (an HTTP session) and keep the rest (a model, a server):
        a run lent this engine calls it before its loop ends, so the next run's loop starts clean."""
        return None

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec!r})"
