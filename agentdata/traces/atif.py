"""Harbor's Agent Trajectory Interchange Format (ATIF v1.8), both ways, read and written as plain JSON.

An ATIF document is one trajectory: `{"schema_version": "ATIF-v1.8", "agent": {...}, "steps": [...]}`
(the `atif` package holds its pydantic models; the tests validate what is written here with them). A
step is a system prompt, a user message or one agent turn:

    {"step_id": 1, "source": "system" | "user" | "agent", "message": str | [content parts],
     "reasoning_content"?, "tool_calls"?: [{"tool_call_id", "function_name", "arguments": {...}}],
     "observation"?: {"results": [{"source_call_id"?, "content"?}]}, "is_copied_context"?, ...}

An agent turn's observation holds the results of its calls, so one step is an assistant message and
the tool messages that answer it. A result that names no call is the outcome of an action written in
the text (a terminal agent's command): the next user message, as such harnesses send it. Steps copied
from an earlier trajectory for context (`is_copied_context`: a system prompt, a question or a turn) are left
out, as the format asks of SFT data: the question is this trajectory's own first user step. Subagent
trajectories are not read (each is a trajectory of its own). agentdata's own verdict and provenance travel
in the root `extra.agentdata`; what else a document says of itself (its root `extra`, the steps' first and
last timestamps, the cost, `final_metrics`) is kept as the row's provenance.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentdata import __version__
from agentdata.errors import InputFileError
from agentdata.inputs import read_text
from agentdata.traces.session import Session, agentdata_fields, checked, count, text_of, text_or_none, tool_call

SCHEMA_VERSION = "ATIF-v1.8"
EXTRA_KEY = "agentdata"  # the root `extra` key agentdata's own record travels under
ROLE_OF_SOURCE = {"system": "system", "user": "user", "agent": "assistant"}


# --------------------------------------------------------------------------- writing


def atif_document(
    session_id: str, messages: list[dict[str, Any]], header: dict[str, Any], tools: list[dict[str, Any]] | None
) -> dict[str, Any]:
    """One ATIF trajectory of canonical messages; `header` (agentdata's verdict and provenance) goes in `extra`."""
    model = header.get("teacher") or None
    agent: dict[str, Any] = {"name": "agentdata", "version": __version__}
    if model:
        agent["model_name"] = model
    if tools:
        agent["tool_definitions"] = tools
    steps: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "tool" and steps and steps[-1]["source"] == "agent":
            steps[-1].setdefault("observation", {"results": []})["results"].append(_result(message, steps[-1]))
        else:
            steps.append(_step(len(steps) + 1, message))
    document = {
        "schema_version": SCHEMA_VERSION,
        "session_id": session_id,
        "trajectory_id": session_id,
        "agent": agent,
        "steps": steps,
        "extra": {EXTRA_KEY: {"id": session_id, **header}},
    }
    tokens = {key: header[key] for key in ("prompt_tokens", "completion_tokens") if header.get(key)}
    document["final_metrics"] = {"total_steps": len(steps), **{f"total_{k}": v for k, v in tokens.items()}}
    return document


def _step(step_id: int, message: dict[str, Any]) -> dict[str, Any]:
    if message["role"] == "tool":  # a result with no agent turn before it: said to the agent, as a user turn
        return {"step_id": step_id, "source": "user", "message": message.get("content") or ""}
    source = {"assistant": "agent"}.get(message["role"], message["role"])
    step: dict[str, Any] = {"step_id": step_id, "source": source, "message": message.get("content") or ""}
    if source != "agent":
        return step
    if message.get("reasoning_content"):
        step["reasoning_content"] = message["reasoning_content"]
    if message.get("tool_calls"):
        step["tool_calls"] = [_call(call) for call in message["tool_calls"]]
    return step


def _call(call: dict[str, Any]) -> dict[str, Any]:
    """ATIF arguments are a JSON object: text that is not one (a malformed call, kept as the model wrote it)
    travels in the call's `extra`."""
    function = call["function"]
    arguments = function.get("arguments")
    written: dict[str, Any] = {"tool_call_id": call.get("id") or "", "function_name": function["name"]}
    try:
        decoded = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict):
        written["arguments"] = decoded
    else:
        written["arguments"], written["extra"] = {}, {"raw_arguments": arguments}
    return written


def _result(message: dict[str, Any], step: dict[str, Any]) -> dict[str, Any]:
    calls = {call["tool_call_id"] for call in step.get("tool_calls", [])}
    result: dict[str, Any] = {"content": message.get("content") or ""}
    if message.get("tool_call_id") in calls:
        result["source_call_id"] = message["tool_call_id"]
    else:  # ATIF refuses a result naming no call of its step: the id is kept aside
        result["extra"] = {"tool_call_id": message.get("tool_call_id"), "name": message.get("name")}
    return result


# --------------------------------------------------------------------------- reading


def is_atif(document: Any) -> bool:
    return isinstance(document, dict) and str(document.get("schema_version", "")).startswith("ATIF")


def read_atif(path: Path, document: Any | None = None) -> list[Session]:
    """The one trajectory of an ATIF file (`document`: its JSON, when already read)."""
    if document is None:
        document = load_json(path)
    if not is_atif(document):
        raise InputFileError(path, 'not an ATIF trajectory (no "schema_version": "ATIF-v1.x")')
    agent = _object(document.get("agent"), path, "agent")
    steps = document.get("steps")
    if not isinstance(steps, list) or not steps:
        raise InputFileError(path, "an ATIF trajectory needs a non-empty list of steps")
    messages: list[dict[str, Any]] = []
    for index, step in enumerate(steps, start=1):
        messages += _messages(_object(step, path, f"step {index}"), path, index)
    own = (document.get("extra") or {}).get(EXTRA_KEY) if isinstance(document.get("extra"), dict) else None
    own = own if isinstance(own, dict) else {}
    metrics = document.get("final_metrics") if isinstance(document.get("final_metrics"), dict) else {}
    provenance = _provenance(document, steps, metrics)
    made_by = " ".join(str(agent.get(key) or "") for key in ("name", "version")).strip()
    return [
        Session(
            checked(messages, path, "the trajectory"),
            row=0,
            own_id=text_or_none(own.get("id")) or text_or_none(document.get("trajectory_id")),
            tools=agent.get("tool_definitions") if isinstance(agent.get("tool_definitions"), list) else None,
            made_by=made_by,
            teacher=str(own.get("teacher") or agent.get("model_name") or agent.get("name") or ""),
            prompt_tokens=count(metrics.get("total_prompt_tokens")),
            completion_tokens=count(metrics.get("total_completion_tokens")),
            **agentdata_fields(own),
            extra={"session_id": document.get("session_id"), "notes": document.get("notes"), **provenance, **own},
        )
    ]


def _provenance(document: dict[str, Any], steps: list[Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """What an ATIF document records of itself beyond its messages: its root `extra` (but agentdata's own key),
    when its own steps began and ended, what it cost, its final metrics, how many copied steps were left out."""
    extra = document.get("extra") if isinstance(document.get("extra"), dict) else {}
    own = [step for step in steps if isinstance(step, dict) and not step.get("is_copied_context")]
    stamps = [step["timestamp"] for step in own if isinstance(step.get("timestamp"), str)]
    step_costs = [
        step["metrics"]["cost_usd"]
        for step in own
        if isinstance(step.get("metrics"), dict) and isinstance(step["metrics"].get("cost_usd"), (int, float))
    ]
    cost = metrics.get("total_cost_usd") if isinstance(metrics.get("total_cost_usd"), (int, float)) else None
    kept = {
        "extra": {key: value for key, value in extra.items() if key != EXTRA_KEY} or None,
        "started_at": stamps[0] if stamps else None,
        "ended_at": stamps[-1] if stamps else None,
        "cost_usd": cost if cost is not None else (sum(step_costs) if step_costs else None),
        "final_metrics": metrics or None,
        "copied_context_steps": sum(isinstance(step, dict) for step in steps) - len(own),
    }
    return {key: value for key, value in kept.items() if value is not None}


def load_json(path: Path) -> Any:
    text = read_text(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputFileError(path, f"not valid JSON ({error.msg} at line {error.lineno})") from None
    except RecursionError:
        raise InputFileError(path, "JSON nested too deeply to read") from None


def _messages(step: dict[str, Any], path: Path, index: int) -> list[dict[str, Any]]:
    where = f"step {index}"
    role = ROLE_OF_SOURCE.get(step.get("source"))
    if role is None:
        raise InputFileError(path, f"{where}: source must be system, user or agent, got {step.get('source')!r}")
    if step.get("is_copied_context"):
        return []  # copied from another trajectory for context: not this trajectory's question or turn
    message: dict[str, Any] = {"role": role, "content": text_of(step.get("message"), path, where)}
    if role != "assistant":
        return [message]
    if isinstance(step.get("reasoning_content"), str) and step["reasoning_content"]:
        message["reasoning_content"] = step["reasoning_content"]
    calls = step.get("tool_calls") or []
    if not isinstance(calls, list):
        raise InputFileError(path, f"{where}: tool_calls must be a list")
    if calls:
        message["tool_calls"] = [_read_call(call, path, where) for call in calls]
    results = (step.get("observation") or {}).get("results") if isinstance(step.get("observation"), dict) else []
    return [message, *[_read_result(result, path, where) for result in results or []]]


def _read_call(call: Any, path: Path, where: str) -> dict[str, Any]:
    call = _object(call, path, f"{where}: a tool call")
    raw = (call.get("extra") or {}).get("raw_arguments") if isinstance(call.get("extra"), dict) else None
    read = tool_call(call.get("tool_call_id"), call.get("function_name"), call.get("arguments"), path, where)
    if isinstance(raw, str):  # a malformed call agentdata exported: the text as the model wrote it
        read["function"]["arguments"] = raw
    return read


def _read_result(result: Any, path: Path, where: str) -> dict[str, Any]:
    result = _object(result, path, f"{where}: an observation result")
    content = text_of(result.get("content"), path, f"{where}: an observation result")
    extra = result.get("extra") if isinstance(result.get("extra"), dict) else {}
    call_id = result.get("source_call_id") or extra.get("tool_call_id")
    if not call_id:
        return {"role": "user", "content": content}
    message = {"role": "tool", "tool_call_id": str(call_id), "content": content}
    if extra.get("name"):
        message["name"] = str(extra["name"])
    return message


def _object(value: Any, path: Path, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputFileError(path, f"{what} must be a JSON object")
    return value
