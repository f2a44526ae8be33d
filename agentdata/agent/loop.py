"""The agent loop: the one place where a model meets its tools.

generate → parse tool calls → run each by its tool's name (the code interpreter in the
trajectory's sandbox session, user tools in-process) → feed the real output back →
generate again, until a final answer or a budget runs out.
`collect`, `filter`'s profiling, GRPO rollouts and `eval` all call `solve`.
"""

from __future__ import annotations

import asyncio
import functools
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from agentdata.agent.config import LoopConfig
from agentdata.engines.base import Engine, Generation, GenerationRequest
from agentdata.formats import ParsedTurn, Protocol, get_protocol, parse_native_calls, split_reasoning
from agentdata.formats.health import HEALTH_KEY, measure_health
from agentdata.records import Problem, ToolCall, Trajectory, assistant_message, tool_message
from agentdata.sandbox.base import new_session_id
from agentdata.tools import Tool, ToolContext, call_tool, load_tools
from agentdata.verify.grade import grade, graded_text, quick_grade

if TYPE_CHECKING:
    from agentdata.sandbox.base import CodeSandbox

TOOL_LIMIT_NOTICE = "Tool call limit reached: the code was not run. Give your final answer now, in \\boxed{}."
REQUEST_KEYS = ("role", "content", "tool_calls", "tool_call_id", "name")
UNPARSED_CALL_NOTICE = "Your tool call could not be read ({errors}). Fix its format or give the final answer."
# The error of a trajectory whose tests could not judge its program (a library missing from the sandbox): a
# failure of the problem's environment, counted apart like any failure, but no sign that the run is broken.
UNGRADED = "ungraded: "


@dataclass
class _State:
    """What one trajectory has accumulated so far."""

    messages: list[dict[str, Any]]
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int = 0
    tool_calls: int = 0
    tool_errors: int = 0
    malformed_calls: int = 0
    limit_notified: bool = False
    continuing: bool = False
    calls_issued: int = 0
    turns: int = 0
    generation_s: float = 0.0
    tool_s: float = 0.0
    finish_reason: str = ""
    error: str | None = None
    # One entry per assistant message, each in both lists: its tokens and failed calls, and its seconds
    # (kept apart from the counts: seconds differ between two runs of the same trajectory).
    turn_stats: list[dict[str, Any]] = field(default_factory=list)
    turn_seconds: list[dict[str, float]] = field(default_factory=list)
    last_generation: dict[str, Any] = field(default_factory=dict)


def initial_messages(
    problem: Problem, protocol: Protocol, config: LoopConfig, tools: list[Tool] | None = None
) -> list[dict[str, Any]]:
    """The system prompt (the protocol's, showing every tool's schema, unless overridden) and the question."""
    if config.system_prompt is not None:
        system = config.system_prompt
    else:
        system = protocol.system_prompt([tool.schema for tool in tools or config_tools(config)])
    return [{"role": "system", "content": system}, {"role": "user", "content": problem.question}]


def config_tools(config: LoopConfig) -> list[Tool]:
    """The loop's tools, resolved once per distinct list (plug-ins are imported the first time)."""
    return list(_cached_tools(tuple(config.tools)))


@functools.lru_cache(maxsize=32)
def _cached_tools(names: tuple[str, ...]) -> tuple[Tool, ...]:
    return tuple(load_tools(names))


async def solve(
    problem: Problem,
    engine: Engine,
    sandbox: CodeSandbox,
    config: LoopConfig,
    sample_index: int = 0,
    seed: int | None = None,
) -> Trajectory:
    """Run one trajectory of `engine` on `problem` with real code execution."""
    if config.protocol is None:  # a loop not yet given its model: the engine's (collect's is already)
        config = config.for_model(engine.spec)
    protocol = get_protocol(config.protocol)
    state = _State(messages=initial_messages(problem, protocol, config))
    session_id = new_session_id(f"{problem.id}-{sample_index}")
    started = time.perf_counter()
    try:
        await _run_turns(state, protocol, engine, sandbox, session_id, config, seed)
    finally:
        await _close_session(sandbox, session_id)
    return await _to_trajectory(
        problem, state, engine, sandbox, config, sample_index, seed, time.perf_counter() - started
    )


async def _run_turns(
    state: _State,
    protocol: Protocol,
    engine: Engine,
    sandbox: Any,
    session_id: str,
    config: LoopConfig,
    seed: int | None,
) -> None:
    while not state.finish_reason:
        if state.turns >= config.max_turns:
            state.finish_reason = "max_turns"
            break
        budget = config.max_new_tokens - state.completion_tokens
        if budget <= 0:
            state.finish_reason = "max_tokens"
            break
        generation = await _generate(state, protocol, engine, config, budget, seed, session_id)
        if generation.finish_reason in ("error", "context"):  # "context": the conversation no longer fits the model
            state.finish_reason, state.error = generation.finish_reason, generation.error or "generation failed"
            break
        merged = state.continuing  # this generation continues the last message rather than starting one
        parsed, stopped_at, reasoning = _read_turn(state, protocol, engine, generation)
        calls = _numbered(state, parsed.tool_calls)
        state.messages.append(assistant_message(parsed.content, calls, reasoning))
        _count_turn(state, merged)
        if calls:
            await _run_tool_calls(state, calls, sandbox, session_id, config)
        elif parsed.errors:
            state.malformed_calls += len(parsed.errors)
            notice = UNPARSED_CALL_NOTICE.format(errors="; ".join(parsed.errors))
            state.messages.append({"role": "user", "content": notice})
        elif generation.finish_reason == "length":
            state.finish_reason = "max_tokens"
        elif stopped_at is not None:
            state.continuing = True  # e.g. a bare ``` fence in codeblock: not a call, and not the end either
        else:
            state.finish_reason = "answer"


def _count_turn(state: _State, merged: bool) -> None:
    """The last generation's tokens and time, added to its assistant message's entry."""
    if not merged or not state.turn_stats:
        state.turn_stats.append({"prompt_tokens": 0, "completion_tokens": 0, "tool_errors": 0})
        state.turn_seconds.append({"generation_s": 0.0, "tool_s": 0.0})
    entry, seconds = state.turn_stats[-1], state.turn_seconds[-1]
    entry["prompt_tokens"] = entry["prompt_tokens"] or state.last_generation["prompt_tokens"]
    entry["completion_tokens"] += state.last_generation["completion_tokens"]
    seconds["generation_s"] = round(seconds["generation_s"] + state.last_generation["generation_s"], 4)


def _numbered(state: _State, calls: list[ToolCall]) -> list[ToolCall]:
    """Give calls ids unique within the trajectory (a protocol numbers each turn from call_0)."""
    numbered = [replace(call, id=f"call_{state.calls_issued + index}") for index, call in enumerate(calls)]
    state.calls_issued += len(numbered)
    return numbered


def _read_turn(
    state: _State, protocol: Protocol, engine: Engine, generation: Generation
) -> tuple[ParsedTurn, str | None, str | None]:
    """The turn's content and calls, the stop string that ended it, and the model's reasoning."""
    thinking, text = split_reasoning(generation.text)
    reasoning = _joined(generation.reasoning, thinking)
    state.reasoning_tokens += _reasoning_tokens(engine, generation, reasoning, text)
    if state.continuing:  # the last turn stopped on a stop string without a call: this text continues it
        previous = state.messages.pop()
        text = protocol.render_assistant(previous) + text
        reasoning = _joined(previous.get("reasoning_content"), reasoning)
        state.continuing = False
    # A server that says "stop" both at a stop string and at the end of a turn leaves it to the text.
    stopped_at = generation.stop_reason if generation.stop_known else protocol.stop_after(text)
    if stopped_at in engine.turn_stops:  # the model began the user's next turn: its own turn is over
        stopped_at = None
    if generation.tool_calls:  # the server parsed the calls itself (native tool calling)
        return parse_native_calls(generation.tool_calls, text), None, reasoning
    return protocol.parse(text + (stopped_at or "")), stopped_at, reasoning


def _joined(*parts: str | None) -> str | None:
    return "\n".join(part for part in parts if part) or None


def _reasoning_tokens(engine: Engine, generation: Generation, reasoning: str | None, text: str) -> int:
    """The server's count, else the engine's tokenizer, else the reasoning's share of the characters."""
    if generation.reasoning_tokens is not None:
        return int(generation.reasoning_tokens)
    if not reasoning:
        return 0
    if engine.tokenizer is not None:
        return len(engine.tokenizer(reasoning, add_special_tokens=False)["input_ids"])
    return round(generation.completion_tokens * len(reasoning) / (len(reasoning) + len(text)))


async def _generate(
    state: _State,
    protocol: Protocol,
    engine: Engine,
    config: LoopConfig,
    budget: int,
    seed: int | None,
    session: str | None = None,
) -> Generation:
    plain = protocol.to_plain_messages(state.messages)
    continue_final = plain[-1]["role"] == "assistant"
    sampling = config.rollout_sampling(None if seed is None else seed + state.turns)  # each turn its own seed
    request = GenerationRequest(
        messages=_request_messages(plain),
        continue_final=continue_final,
        # For servers that cannot continue a message: the same turn, the tool output as the next message.
        turn_messages=_request_messages(protocol.to_plain_messages(state.messages, tool_turns=True))
        if continue_final
        else None,
        tools=[tool.schema for tool in config_tools(config)] if protocol.native_tools else None,
        session=session,
        **sampling.with_(max_new_tokens=budget, stop=_stop_strings(protocol, engine)).request_fields(),
    )
    started = time.perf_counter()
    generation = await engine.generate(request)
    elapsed = time.perf_counter() - started
    state.generation_s += elapsed
    state.turns += 1
    state.last_generation = {
        "prompt_tokens": generation.prompt_tokens,
        "completion_tokens": generation.completion_tokens,
        "generation_s": elapsed,
    }
    if not state.prompt_tokens:
        state.prompt_tokens = generation.prompt_tokens
    state.completion_tokens += generation.completion_tokens
    return generation


def _stop_strings(protocol: Protocol, engine: Engine) -> tuple[str, ...]:
    """The protocol's (a tool call ends there) and the engine's prompt text's end of turn (the plain
    template's `\nUser:`: a base model otherwise writes the user's next turn and goes on)."""
    stops = tuple(protocol.stop_strings)
    return stops + tuple(stop for stop in engine.turn_stops if stop not in stops)


def _request_messages(plain: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What an engine is sent: the chat keys only (codeblock's env_spans are for training)."""
    return [{key: value for key, value in message.items() if key in REQUEST_KEYS} for message in plain]


async def _run_tool_calls(
    state: _State, calls: list[ToolCall], sandbox: CodeSandbox, session_id: str, config: LoopConfig
) -> None:
    """Run each call by its tool's name; unknown tools and bad arguments come back as tool errors."""
    if state.limit_notified:
        state.finish_reason = "max_tool_calls"  # told the limit was reached, and it called again
        return
    tools = config_tools(config)
    context = ToolContext(sandbox, session_id, config.tool_timeout, config.tool_output_chars)
    for call in calls:
        if state.tool_calls >= config.max_tool_calls:
            state.limit_notified = True
            state.messages.append(tool_message(call.id, TOOL_LIMIT_NOTICE, call.name))
            continue
        started = time.perf_counter()
        result = await call_tool(tools, call.name, call.arguments, context)
        elapsed = time.perf_counter() - started
        state.tool_s += elapsed
        if state.turn_seconds:
            state.turn_seconds[-1]["tool_s"] = round(state.turn_seconds[-1]["tool_s"] + elapsed, 4)
        state.tool_calls += 1
        if not result.ok:
            state.tool_errors += 1
            if state.turn_stats:
                state.turn_stats[-1]["tool_errors"] += 1
        state.messages.append(tool_message(call.id, result.content, call.name))


async def _close_session(sandbox: Any, session_id: str) -> None:
    try:  # awaited, not in a thread: a thread per close was a fifth of one driver's wall time (issue 25)
        await sandbox.aclose_session(session_id)
    except Exception:  # a session that never started or a sandbox already closed: nothing to free
        pass


async def _to_trajectory(
    problem: Problem,
    state: _State,
    engine: Engine,
    sandbox: Any,
    config: LoopConfig,
    sample_index: int,
    seed: int | None,
    elapsed_s: float,
) -> Trajectory:
    text = graded_text(state.messages, problem.domain, get_protocol(config.protocol))
    # Most answers are settled by plain rules at once; only math-verify and code tests need a thread.
    verdict = quick_grade(problem, text) or await asyncio.to_thread(grade, problem, text, sandbox)
    metadata = _metadata(state)
    metadata[HEALTH_KEY] = measure_health(state.messages, config.protocol, problem.domain).as_dict()
    timings = {
        "total_s": round(elapsed_s, 4),
        "generation_s": round(state.generation_s, 4),
        "tool_s": round(state.tool_s, 4),
    }
    if state.turn_seconds:
        timings["turns"] = state.turn_seconds  # per assistant message, as metadata["turns"]
    if verdict.details:  # code: per-test results; the test time is reported apart from the tool time
        metadata["tests"] = verdict.details
        timings["test_s"] = verdict.details.get("test_s", 0.0)
    return Trajectory.of_problem(
        problem,
        f"{problem.id}-{sample_index}",
        messages=state.messages,
        tools=[tool.schema for tool in config_tools(config)],
        final_answer=verdict.final_answer,
        correct=verdict.correct,
        num_tool_calls=state.tool_calls,
        num_tool_errors=state.tool_errors,
        num_turns=state.turns,
        # Tests that could not judge the program (a library missing from the sandbox) are no wrong answer.
        finish_reason="error" if verdict.unavailable else state.finish_reason,
        prompt_tokens=state.prompt_tokens,
        completion_tokens=state.completion_tokens,
        teacher=engine.spec,
        format=config.protocol,
        sampling={**config.sampling(), "seed": seed, "sample_index": sample_index},
        timings=timings,
        error=state.error or (f"{UNGRADED}{verdict.unavailable}" if verdict.unavailable else None),
        metadata=metadata,
    )


def _metadata(state: _State) -> dict[str, Any]:
    """Counts worth keeping that not every trajectory has (reasoning tokens are in completion_tokens too),
    and per assistant message (`turns`, in order): its prompt and completion tokens and how many of its
    tool calls failed (`tool_errors`); its seconds are in `timings["turns"]`, in the same order."""
    metadata: dict[str, Any] = {}
    if state.malformed_calls:
        metadata["malformed_tool_calls"] = state.malformed_calls
    if state.reasoning_tokens:
        metadata["reasoning_tokens"] = state.reasoning_tokens
    if state.turn_stats:
        metadata["turns"] = state.turn_stats
    return metadata
