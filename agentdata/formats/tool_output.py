"""Turn what a code run produced into the text the model is shown.

Long output is cut in the middle: the head usually says what was printed and the tail
holds the last lines and, for an error, the exception. DemyAgent shows the model at most
256 characters this way; the marker says how much was cut, so the model knows output is
missing rather than reading a clipped number as the result.
"""

from __future__ import annotations

import re

DEFAULT_TOOL_OUTPUT_CHARS = 256
NO_OUTPUT = "(no output)"
FAILED_SILENTLY = "Execution failed without a message."
STATUS_NOTICES = {
    "timeout": "Execution timed out.",
    "oom": "Execution ran out of memory.",
    "killed": "Execution was killed.",
}


def truncate_middle(text: str, max_chars: int | None) -> str:
    """Cut `text` to at most `max_chars` characters, keeping its head and tail around a marker.

    None means no limit. A limit too small to hold the marker keeps just the head.
    """
    if max_chars is None or len(text) <= max_chars:
        return text
    marker = _marker(0)
    for _ in range(4):  # the marker's length depends on the count it shows: settle it
        kept = max_chars - len(marker)
        settled = _marker(len(text) - kept)
        if len(settled) == len(marker):
            marker = settled
            break
        marker = settled
    kept = max_chars - len(marker)
    if kept < 2:
        return text[: max(max_chars, 0)]
    head, tail = kept - kept // 2, kept // 2
    return text[:head] + marker + text[len(text) - tail :]


def tool_output_text(
    stdout: str, stderr: str = "", status: str = "ok", max_chars: int | None = DEFAULT_TOOL_OUTPUT_CHARS
) -> str:
    """The text shown to the model for one run: output, then errors, then a status notice.

    `status` is the sandbox's ExecResult.status ("ok", "error", "timeout", "oom", "killed").
    The result is at most `max_chars` long (None: no limit), notice included.
    """
    body = "\n".join(part.rstrip() for part in (stdout, stderr) if part and part.strip())
    notice = STATUS_NOTICES.get(status)
    if notice is None and not body:
        return FAILED_SILENTLY if status == "error" else NO_OUTPUT
    if notice is None:
        return truncate_middle(body, max_chars)
    if not body:
        return notice
    room = None if max_chars is None else max_chars - len(notice) - 1
    if room is not None and room < len(_marker(len(body))) + 2:
        return truncate_middle(notice, max_chars)
    return f"{truncate_middle(body, room)}\n{notice}"


def _marker(cut: int) -> str:
    return f"\n[... {cut} characters cut ...]\n"


_MARKER = re.compile(r"\n\[\.\.\. (\d+) characters cut \.\.\.\]\n")


def output_length(shown: str) -> int:
    """How long the output behind a tool message was before it was cut for the model (`tool_output_text`,
    `truncate_middle`): the shown text plus what its marker says was cut; the shown length where nothing was."""
    for notice in STATUS_NOTICES.values():  # a notice follows the cut body
        if shown.endswith("\n" + notice) and len(shown) > len(notice) + 1:
            return _uncut_length(shown[: -len(notice) - 1]) + len(notice) + 1
    return _uncut_length(shown)


def _uncut_length(text: str) -> int:
    """Only a marker where `truncate_middle` puts its one marker counts: a program that prints marker-like text
    in output that was not cut does not make it longer."""
    for match in _MARKER.finditer(text):
        kept = len(text) - len(match.group(0))
        if match.start() == kept - kept // 2:
            return kept + int(match.group(1))
    return len(text)
