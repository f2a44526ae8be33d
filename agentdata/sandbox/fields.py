"""The sandbox service's request fields, each checked before anything runs.

A request is untrusted: every field is type-checked, and a wrong one is an HTTP 400 whose message
names the field (never a 500 with a traceback in the server's log). The server's own limits
(`--timeout`, `--memory-mb`) are ceilings: a request may ask for less time or memory, never more.
A valid value above the ceiling is lowered to it (SandboxFusion clients send their own default,
often above a small server's); a value that is no duration at all (NaN, negative, zero, infinite,
more than a day; memory over 16 TiB) is refused, so no typo can hold a worker.
"""

from __future__ import annotations

import base64
import binascii
import math
from dataclasses import dataclass, field
from typing import Any

from agentdata.sandbox.config import SandboxConfig

MAX_TIMEOUT_S = 86400.0  # the largest --timeout a server takes (SandboxConfig's range)
MIN_MEMORY_MB = 16  # the smallest --memory-mb a server takes: below it Python cannot start
MAX_MEMORY_MB = 1 << 24  # 16 TiB, more than any machine: a larger request is no memory size (1e300), refused
MAX_SESSION_ID = 200
SHOWN_CHARS = 60  # of a bad value, in the message


class BadField(ValueError):
    """One field of a request is wrong; the message names it."""

    def __init__(self, name: str, problem: str, value: Any = None, show: bool = True):
        self.name = name
        shown = f", got {_show(value)}" if show else ""
        super().__init__(f"{name}: {problem}{shown}")


@dataclass
class Call:
    """One checked request: what the sandbox is asked to run, within the server's limits."""

    code: str
    timeout: float
    memory_mb: int | None
    stdin: str | None = None
    files: dict[str, bytes] = field(default_factory=dict)
    fetch_files: list[str] = field(default_factory=list)
    session_id: str | None = None
    display_last: bool = True
    language: str = "python"


def run_code_call(body: Any, limits: SandboxConfig) -> Call:
    """SandboxFusion's `RunCodeRequest`: code, language, run_timeout, memory_limit_MB, stdin, files, fetch_files.

    `compile_timeout` is checked as a number and otherwise unused (Python compiles as it runs). Other
    keys are ignored, as SandboxFusion's server ignores them.
    """
    body = _mapping(body)
    _number_or_none(body, "compile_timeout")
    return Call(
        code=_text(body, "code", required=True),
        language=(_text(body, "language") or "python").lower(),
        timeout=_timeout(body, "run_timeout", limits),
        memory_mb=_memory(body, "memory_limit_MB", limits),
        stdin=_text(body, "stdin") or None,
        files=_files(body),
        fetch_files=_fetch_files(body),
    )


def session_call(body: Any, limits: SandboxConfig) -> Call:
    """agentdata's `/v1/run`: code, session_id, timeout, memory_mb, stdin, files, display_last."""
    body = _mapping(body)
    session_id = _text(body, "session_id")
    if session_id is not None and not 0 < len(session_id) <= MAX_SESSION_ID:
        raise BadField("session_id", f"must be 1 to {MAX_SESSION_ID} characters", session_id)
    display_last = body.get("display_last", True)
    if not isinstance(display_last, bool):
        raise BadField("display_last", "expected true or false", display_last)
    return Call(
        code=_text(body, "code", required=True),
        timeout=_timeout(body, "timeout", limits),
        memory_mb=_memory(body, "memory_mb", limits),
        stdin=_text(body, "stdin"),
        files=_files(body),
        session_id=session_id,
        display_last=display_last,
    )


def _mapping(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadField("body", "expected a JSON object", show=False)
    return body


def _text(body: dict[str, Any], name: str, required: bool = False) -> str | None:
    value = body.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise BadField(name, "expected a string" if value is not None else "is required (a string)", value)
    return value


def _number_or_none(body: dict[str, Any], name: str) -> float | None:
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BadField(name, "expected a number", value)
    return float(value)


def _timeout(body: dict[str, Any], name: str, limits: SandboxConfig) -> float:
    """Seconds, at most the server's --timeout; absent or null is the server's."""
    seconds = _number_or_none(body, name)
    if seconds is None:
        return limits.timeout_s
    if math.isnan(seconds) or not 0 < seconds <= MAX_TIMEOUT_S:
        raise BadField(name, f"expected seconds in (0, {MAX_TIMEOUT_S:g}]", body[name])
    return min(seconds, limits.timeout_s)


def _memory(body: dict[str, Any], name: str, limits: SandboxConfig) -> int | None:
    """MiB, at most the server's --memory-mb; absent, null, 0 or -1 (SandboxFusion's "no limit") is the server's."""
    value = _number_or_none(body, name)
    if value is None or value in (0, -1):
        return None
    if not value.is_integer() or not MIN_MEMORY_MB <= value <= MAX_MEMORY_MB:
        raise BadField(
            name, f"expected whole MiB in [{MIN_MEMORY_MB}, {MAX_MEMORY_MB}] (or -1: the server's limit)", body[name]
        )
    return min(int(value), limits.memory_mb)


def _files(body: dict[str, Any]) -> dict[str, bytes]:
    """name -> base64 content; a null content is skipped, as SandboxFusion's restore_files does."""
    files = body.get("files")
    if files is None:
        return {}
    if not isinstance(files, dict):
        raise BadField("files", "expected an object of file name -> base64 content", files)
    decoded: dict[str, bytes] = {}
    for name, content in files.items():
        where = f"files[{_show(name)}]"
        if not name:
            raise BadField("files", "a file name is empty", show=False)
        if content is None:
            continue
        if not isinstance(content, str):
            raise BadField(where, "expected base64 text or null", content)
        try:
            decoded[name] = base64.b64decode(content, validate=True)
        except (binascii.Error, ValueError):
            raise BadField(where, "not valid base64", content) from None
    return decoded


def _fetch_files(body: dict[str, Any]) -> list[str]:
    fetch = body.get("fetch_files")
    if fetch is None:
        return []
    if not isinstance(fetch, list):
        raise BadField("fetch_files", "expected a list of file paths", fetch)
    for index, name in enumerate(fetch):
        if not isinstance(name, str) or not name:
            raise BadField(f"fetch_files[{index}]", "expected a file path", name)
    return list(fetch)


def _show(value: Any) -> str:
    """A value as the message shows it: its repr, cut (a request may carry megabytes)."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[: SHOWN_CHARS - 15]}… ({len(text):,} chars)"
