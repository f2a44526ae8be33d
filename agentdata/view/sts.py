"""Trajectories in the Hub's Session Trace Simple Format (STS-Format), so a pushed dataset renders in its
trace viewer.

One JSONL file per session (trajectory): a header line

    {"type": "session", "harness": "agentdata", "id": ..., "name": ..., <our metadata>}

then one line per message, in order:

    {"type": "message", "message": {"role", "content", "reasoningContent"?, "toolCalls"?, "toolCallId"?, "model"?}}

with `toolCalls` as `[{"id", "function": {"name", "arguments"}}]` (arguments a JSON string) and each
tool result a `role: "tool"` message whose `toolCallId` names the call it answers. Extra header keys are
allowed by the format (the Hub ignores them): they carry the verdict and provenance.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentdata.errors import UserError
from agentdata.events import task
from agentdata.publish.secrets import SecretCounts, redact_tree, shared_scanner
from agentdata.records import atomic_write
from agentdata.view.api import ViewerData
from agentdata.view.export import prepare_out, selected_rows
from agentdata.view.table import ROW

HARNESS = "agentdata"
NAME_CHARS = 80
SAFE = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class StsSummary:
    out: Path
    sessions: int = 0
    messages: int = 0
    folders: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    secrets: dict[str, Any] = field(default_factory=dict)  # publish.secrets: sessions with one, per kind, mode

    def as_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "sessions": self.sessions,
            "messages": self.messages,
            "folders": self.folders,
            "skipped": self.skipped,
            "secrets": self.secrets,
        }


def session_lines(session_id: str, messages: list[dict[str, Any]], header: dict[str, Any]) -> list[dict[str, Any]]:
    """The STS lines of one conversation (canonical messages, as agentdata stores them)."""
    question = next((m.get("content") or "" for m in messages if m["role"] == "user"), "")
    name = " ".join(question.split())[:NAME_CHARS] or session_id
    lines = [{"type": "session", "harness": HARNESS, "id": session_id, "name": name, **header}]
    model = header.get("teacher") or None
    for message in messages:
        lines.append({"type": "message", "message": sts_message(message, model)})
    return lines


def sts_message(message: dict[str, Any], model: str | None = None) -> dict[str, Any]:
    shown: dict[str, Any] = {"role": message["role"], "content": message.get("content") or ""}
    if message.get("reasoning_content"):
        shown["reasoningContent"] = message["reasoning_content"]
    calls = message.get("tool_calls") or []
    if calls:
        shown["toolCalls"] = [
            {"id": call.get("id"), "function": {"name": call["function"]["name"], "arguments": _arguments(call)}}
            for call in calls
        ]
    if message["role"] == "tool" and message.get("tool_call_id"):
        shown["toolCallId"] = message["tool_call_id"]
    if message["role"] == "assistant" and model:
        shown["model"] = model
    return shown


def _arguments(call: dict[str, Any]) -> str:
    arguments = call["function"].get("arguments")
    return arguments if isinstance(arguments, str) else json.dumps(arguments or {}, ensure_ascii=False)


def file_name(session_id: str, suffix: str = ".jsonl") -> str:
    """A file name for any id: safe characters kept, a short hash added when some were replaced."""
    safe = SAFE.sub("_", session_id).strip("._")[:100] or "session"
    if safe != session_id:
        safe += "-" + hashlib.sha1(session_id.encode("utf-8")).hexdigest()[:8]
    return safe + suffix


@dataclass(frozen=True)
class SessionFormat:
    """How one exported session is written: the flag that asks for it, its file suffix, and its text (with the
    number of messages it holds) from the session's id, canonical messages, header and tools."""

    flag: str
    suffix: str
    render: Callable[[str, list[dict[str, Any]], dict[str, Any], list[dict[str, Any]] | None], tuple[str, int]]


def _sts_text(
    session_id: str, messages: list[dict[str, Any]], header: dict[str, Any], tools: list[dict[str, Any]] | None
) -> tuple[str, int]:
    lines = session_lines(session_id, messages, {**header, "tools": tools} if tools else header)
    return "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines), len(lines) - 1


STS = SessionFormat("--sts", ".jsonl", _sts_text)


def write_sts(
    data: ViewerData, out: Path, limit: int, where: Mapping[str, str] | None = None, secrets: str = "redact"
) -> StsSummary:
    """Every run, trajectory file and SFT set given (and those an eval, train or pool dir leads to; not an SFT
    set's own rejects and source runs, which hold the same trajectories again): one folder each, one session
    file per exported row. Each session's secrets are redacted first, or the session left out (`secrets`:
    redact, drop or keep; publish/secrets.py)."""
    return write_sessions(data, out, limit, where, secrets, STS)


def write_sessions(
    data: ViewerData, out: Path, limit: int, where: Mapping[str, str] | None, secrets: str, written: SessionFormat
) -> StsSummary:
    """`write_sts`, each session written in the format `written` says (STS here, ATIF in view/atif.py)."""
    where = dict(where or {})
    sessions = [a for a in data.catalog if a.has_rows and (a.is_trajectories or a.kind == "sft")]
    keys = {a.key for a in sessions}
    artifacts = [a for a in sessions if a.parent is None or a.parent not in keys]
    if not artifacts:
        raise UserError(f"{written.flag}: none of the paths holds trajectories or an SFT set to export")
    chosen = {a.key: selected_rows(a, where, limit) for a in artifacts}
    prepare_out(out, written.flag)
    summary = StsSummary(out)
    scanner, found = shared_scanner(), SecretCounts()
    used: set[str] = set()
    with task(f"{written.flag[2:]} export", total=sum(len(rows) for rows in chosen.values())) as advance:
        done = 0
        for artifact in artifacts:
            name = artifact.path.stem if artifact.path.is_file() else artifact.path.name
            folder = _folder_name(redact_tree(name, scanner=scanner) if secrets != "keep" else name, used)
            summary.folders.append(folder)
            for row in chosen[artifact.key]:
                try:
                    session_id, messages, header, tools = _session(data, artifact, row[ROW])
                except UserError as error:
                    summary.skipped.append(" ".join(str(error).split()))
                else:
                    if secrets != "keep":  # every field (the header's, the id its file is named after), not only text
                        counts: Counter = Counter()
                        messages, header, tools = redact_tree([messages, header, tools], counts, scanner)
                        session_id = redact_tree(session_id, counts, scanner)
                        found.rows, found.found = found.rows + bool(counts), found.found + counts
                        if counts and secrets == "drop":
                            done += 1
                            advance(done)
                            continue
                    text, count = written.render(session_id, messages, header, tools)
                    # two ids that differed only in a secret are one id once it is cut: neither file is lost
                    target = out / _unique(f"{folder}/{file_name(session_id, written.suffix)}", used, written.suffix)
                    atomic_write(target, lambda tmp, text=text: Path(tmp).write_text(text, encoding="utf-8"))
                    summary.sessions += 1
                    summary.messages += count
                done += 1
                advance(done)
    summary.secrets = {"mode": secrets, **found.as_dict()} if secrets != "keep" else {"mode": secrets}
    return summary


def _session(data: ViewerData, artifact: Any, row: int) -> tuple[str, list[dict[str, Any]], dict[str, Any], Any]:
    """A row's id, messages, header (its verdict and provenance) and the tools it was offered."""
    record = artifact.table().record(row)
    if "trajectory" in record:
        trajectory = record["trajectory"]
        header = {
            "problem_id": trajectory.problem_id,
            "source": trajectory.source,
            "domain": trajectory.domain,
            "teacher": trajectory.teacher,
            "protocol": trajectory.format,
            "correct": trajectory.correct,
            "final_answer": trajectory.final_answer,
            "gold_answer": trajectory.answer,
            "finish_reason": trajectory.finish_reason,
            "num_tool_calls": trajectory.num_tool_calls,
            "num_tool_errors": trajectory.num_tool_errors,
            "prompt_tokens": trajectory.prompt_tokens,
            "completion_tokens": trajectory.completion_tokens,
        }
        return trajectory.id, trajectory.messages, header, trajectory.tools
    values = record["sft_row"]
    header = {key: values.get(key) for key in ("problem_id", "source", "teacher", "format", "correct") if key in values}
    session_id = f"{values.get('problem_id') or 'row'}-sft-{row}"  # apart from the trajectories' ids
    return session_id, values["messages"], header, _tools(values.get("tools"))


def _tools(value: Any) -> list[dict[str, Any]] | None:
    """An SFT row's tools: a list of schemas, or their JSON text (some sets' form), or none."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return None
    return value if isinstance(value, list) and value else None


def _unique(name: str, used: set[str], suffix: str) -> str:
    """`name` (`FOLDER/SESSION.jsonl`), or `FOLDER/SESSION-2.jsonl`, ... when it is taken."""
    stem, number, candidate = name.removesuffix(suffix), 2, name
    while candidate in used:
        candidate, number = f"{stem}-{number}{suffix}", number + 1
    used.add(candidate)
    return candidate


def _folder_name(name: str, used: set[str]) -> str:
    """One folder per artifact, named after it (`a` for runs/a, `sft` for sft.parquet), made unique."""
    name = SAFE.sub("_", name).strip("._")[-80:] or "artifact"
    candidate, number = name, 2
    while candidate in used:
        candidate, number = f"{name}-{number}", number + 1
    used.add(candidate)
    return candidate
