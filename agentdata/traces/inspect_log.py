"""Inspect AI's eval logs read as JSON: a `.json` log (one EvalLog document) or an `.eval` log (a zip of
`header.json` and one `samples/<id>_epoch_<n>.json` per sample, compressed with zstd or deflate).

An EvalLog is `{"version", "status", "eval": {"task", "model", "dataset", ...}, "samples": [...]}`; a sample
`{"id", "epoch", "uuid", "input", "target", "messages", "output", "scores", "error", "limit",
"model_usage", "attachments", ...}`. Its messages are chat messages much like agentdata's: content a string
or a list of parts (`text`, `reasoning`, media), an assistant's `tool_calls` as `{"id", "function",
"arguments": {...}}`, a tool message's `tool_call_id`, `function` and `error`. Text Inspect moved into the
sample's `attachments` (`attachment://HASH`) is put back. No inspect_ai install is needed to read them; the
tests write the logs with inspect_ai itself.
"""

from __future__ import annotations

import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from agentdata.errors import InputFileError
from agentdata.inputs import check_input
from agentdata.traces.atif import load_json
from agentdata.traces.session import Session, Unsupported, checked, count, text_of, tool_call

ATTACHMENT = "attachment://"
ZSTD = 93  # the zip compression method number of zstd (APPNOTE 4.4.5)
LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")  # a zip member's local file header
# The most one member of an .eval zip may inflate to: far above a real sample (a few MB with its events),
# far below a machine's memory. A member is inflated a chunk at a time and refused once past it.
MAX_MEMBER_BYTES = 512 * 2**20
CHUNK_BYTES = 2**20
STOP_REASONS = {"max_tokens": "max_tokens", "model_length": "context"}
LIMITS = {"token": "max_tokens", "message": "max_turns", "context": "context"}


def is_inspect_log(document: Any) -> bool:
    return isinstance(document, dict) and isinstance(document.get("eval"), dict) and "version" in document


def read_inspect(path: Path, document: Any | None = None) -> tuple[list[Session], list[str]]:
    """The samples of a log, and a line for each one left out (media agentdata cannot hold)."""
    if document is None:
        document = read_eval_zip(path) if path.suffix == ".eval" else load_json(path)
    if not is_inspect_log(document):
        raise InputFileError(path, 'not an Inspect eval log (no "eval" spec and "version")')
    spec = document["eval"]
    samples = document.get("samples") or []
    if not isinstance(samples, list):
        raise InputFileError(path, "samples must be a list")
    sessions, left_out = [], []
    for number, sample in enumerate(samples, start=1):
        where = _where(sample, number)
        if not isinstance(sample, dict):
            raise InputFileError(path, f"{where}: a sample must be a JSON object")
        try:
            sessions.append(_session(sample, spec, path, number, where))
        except Unsupported as reason:
            left_out.append(f"{path}, {where}: {reason}")
    return sessions, left_out


def _where(sample: Any, number: int) -> str:
    if not isinstance(sample, dict):
        return f"sample {number}"
    return f"sample {number} (id {sample.get('id')}, epoch {sample.get('epoch')})"


def _session(sample: dict[str, Any], spec: dict[str, Any], path: Path, number: int, where: str) -> Session:
    attachments = sample.get("attachments") if isinstance(sample.get("attachments"), dict) else {}
    raw = sample.get("messages")
    if not isinstance(raw, list) or not raw:
        raise InputFileError(path, f"{where}: a sample needs its list of messages")
    messages, tool_errors = [], 0
    for index, message in enumerate(raw, start=1):
        if not isinstance(message, dict):
            raise InputFileError(path, f"{where}, message {index}: must be a JSON object")
        message = _resolved(message, attachments)
        messages.append(_message(message, path, f"{where}, message {index}"))
        tool_errors += message.get("role") == "tool" and bool(message.get("error"))
    target = sample.get("target")
    gold = [str(t) for t in target] if isinstance(target, list) else [str(target)] if target not in (None, "") else []
    usage = sample.get("model_usage") if isinstance(sample.get("model_usage"), dict) else {}
    models = [m["model"] for m in raw if m.get("role") == "assistant" and isinstance(m.get("model"), str)]
    finish, error = _finish(sample)
    dataset = spec.get("dataset") if isinstance(spec.get("dataset"), dict) else {}
    return Session(
        checked(messages, path, where),
        row=number,
        own_id=sample.get("uuid") if isinstance(sample.get("uuid"), str) else None,
        tools=_tools(sample, attachments),
        made_by=f"inspect_ai {spec.get('task', '')}".strip(),
        teacher=str(spec.get("model") or (models[-1] if models else "")),
        problem_id=str(sample["id"]) if sample.get("id") not in (None, "") else None,
        gold=gold,
        source=str(dataset.get("name") or spec.get("task") or "inspect"),
        finish_reason=finish,
        error=error,
        prompt_tokens=sum(count(u.get("input_tokens")) for u in usage.values() if isinstance(u, dict)),
        completion_tokens=sum(count(u.get("output_tokens")) for u in usage.values() if isinstance(u, dict)),
        num_tool_errors=tool_errors,
        extra={
            "task": spec.get("task"),
            "eval_id": spec.get("eval_id"),
            "sample_id": sample.get("id"),
            "epoch": sample.get("epoch"),
            "scores": sample.get("scores"),
            "metadata": sample.get("metadata"),
        },
    )


def _message(message: dict[str, Any], path: Path, where: str) -> dict[str, Any]:
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise InputFileError(path, f"{where}: role must be system, user, assistant or tool, got {role!r}")
    content = message.get("content")
    read: dict[str, Any] = {"role": role, "content": text_of(content, path, where)}
    if role == "tool" and not read["content"] and isinstance(message.get("error"), dict):
        read["content"] = str(message["error"].get("message") or "")  # what the model was told of the failure
    if role == "assistant":
        reasoning = (
            [part.get("reasoning") for part in content if part.get("type") == "reasoning"]
            if isinstance(content, list)
            else []
        )
        if any(isinstance(text, str) and text for text in reasoning):
            read["reasoning_content"] = "\n".join(text for text in reasoning if isinstance(text, str))
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list):
            raise InputFileError(path, f"{where}: tool_calls must be a list")
        if calls:
            read["tool_calls"] = [_call(call, path, where) for call in calls]
    if role == "tool":
        if message.get("tool_call_id"):
            read["tool_call_id"] = str(message["tool_call_id"])
        if isinstance(message.get("function"), str):
            read["name"] = message["function"]
    return read


def _call(call: Any, path: Path, where: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise InputFileError(path, f"{where}: a tool call must be a JSON object")
    return tool_call(call.get("id"), call.get("function"), call.get("arguments"), path, where)


def _tools(sample: dict[str, Any], attachments: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The tools the model was offered, as its first model call recorded them (ToolInfo), in OpenAI's form."""
    events = sample.get("events") if isinstance(sample.get("events"), list) else []
    for event in events:
        if isinstance(event, dict) and event.get("event") == "model" and isinstance(event.get("tools"), list):
            return [
                {"type": "function", "function": {key: info[key] for key in ("name", "description", "parameters")}}
                for info in _resolved(event["tools"], attachments)
                if isinstance(info, dict) and all(key in info for key in ("name", "description", "parameters"))
            ]
    return None


def _finish(sample: dict[str, Any]) -> tuple[str | None, str | None]:
    """What ended the sample, in agentdata's words: an error, a limit, or how the last generation stopped."""
    error = sample.get("error")
    if error:
        return "error", str(error.get("message") if isinstance(error, dict) else error)
    limit = sample.get("limit")
    if isinstance(limit, dict) and limit.get("type") in LIMITS:
        return LIMITS[limit["type"]], None
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    choices = output.get("choices") if isinstance(output.get("choices"), list) else []
    stop = choices[0].get("stop_reason") if choices and isinstance(choices[0], dict) else None
    return STOP_REASONS.get(stop), None


def _resolved(value: Any, attachments: dict[str, Any]) -> Any:
    """`value` with every `attachment://HASH` string replaced by the text it stands for."""
    if isinstance(value, str) and value.startswith(ATTACHMENT):
        return attachments.get(value[len(ATTACHMENT) :], value)
    if isinstance(value, dict):
        return {key: _resolved(item, attachments) for key, item in value.items()}
    if isinstance(value, list):
        return [_resolved(item, attachments) for item in value]
    return value


# --------------------------------------------------------------------------- the .eval zip


def read_eval_zip(path: Path) -> dict[str, Any]:
    """An `.eval` log as the EvalLog document a `.json` log holds: its header with the samples added."""
    check_input(path)
    try:
        with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
            names = archive.namelist()
            if "header.json" not in names and "_journal/start.json" not in names:
                raise InputFileError(path, "not an Inspect .eval log (no header.json in the zip)")
            header = _member_json(archive, raw, "header.json" if "header.json" in names else "_journal/start.json")
            samples = [_member_json(archive, raw, name) for name in names if _is_sample(name)]
    except (zipfile.BadZipFile, OSError, NotImplementedError, RuntimeError) as error:
        # RuntimeError: an encrypted member; NotImplementedError: a compression neither zipfile nor zstd
        raise InputFileError(path, f"not a readable .eval zip ({error})") from None
    if not isinstance(header, dict):
        raise InputFileError(path, "header.json must be a JSON object")
    return {**header, "samples": samples}


def _is_sample(name: str) -> bool:
    return name.startswith("samples/") and name.endswith(".json")


def _member_json(archive: zipfile.ZipFile, raw: Any, name: str) -> Any:
    data = _member_bytes(archive, raw, archive.getinfo(name))
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputFileError(archive.filename, f"{name} in the zip is not JSON ({error})") from None
    except RecursionError:
        raise InputFileError(archive.filename, f"{name} in the zip is JSON nested too deeply to read") from None


def _member_bytes(archive: zipfile.ZipFile, raw: Any, info: zipfile.ZipInfo) -> bytearray:
    """A member inflated a chunk at a time and refused once it passes MAX_MEMBER_BYTES, whatever size its
    header claims: a small zip can hold gigabytes of zeros, so neither the member nor its header is trusted."""
    too_big = f"{info.filename} in the zip inflates to more than the {MAX_MEMBER_BYTES // 2**20} MiB a member may be"
    if info.file_size > MAX_MEMBER_BYTES:
        raise InputFileError(archive.filename, too_big)
    data = bytearray()
    try:
        with _zstd_stream(raw, info) if info.compress_type == ZSTD else archive.open(info) as stream:
            while chunk := stream.read(CHUNK_BYTES):
                data += chunk
                if len(data) > MAX_MEMBER_BYTES:
                    raise InputFileError(archive.filename, too_big)
    except ValueError as error:  # Arrow's zstd stream on corrupt data (ArrowInvalid)
        raise InputFileError(archive.filename, f"{info.filename} in the zip cannot be decompressed ({error})") from None
    return data


def _zstd_stream(raw: Any, info: zipfile.ZipInfo) -> Any:
    """A zstd-compressed member, which Python's zipfile cannot inflate before 3.14, as a stream: its compressed
    bytes read from after its local header, inflated by Arrow's zstd stream (pyarrow is already a dependency)."""
    import pyarrow as pa

    raw.seek(info.header_offset)
    fields = LOCAL_HEADER.unpack(raw.read(LOCAL_HEADER.size))
    name_length, extra_length = fields[-2], fields[-1]
    raw.seek(info.header_offset + LOCAL_HEADER.size + name_length + extra_length)
    compressed = raw.read(info.compress_size)
    return pa.CompressedInputStream(pa.BufferReader(compressed), "zstd")
