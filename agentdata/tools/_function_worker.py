"""A user tool's worker process: loads the function once, then answers one JSON line per call.

Run by `agentdata.tools.function` as `python -m agentdata.tools._function_worker`. The first line
it reads names the function (a plug-in path) and the parent's `sys.path`; it answers `{"ready": true}`
or `{"error": ...}`. Then each line `{"arguments": {...}, "max_chars": N}` gets `{"ok": true, "text": ...}` or
`{"ok": false, "error": "RuntimeError: ..."}`. What the function prints goes to stderr, never into
the replies. The parent ends a call that passes its time limit by killing this process.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
import sys


def _text(value: object, max_chars: int) -> str:
    """The value as the model reads it (JSON for non-strings), its middle cut past `max_chars`."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= max_chars:
        return text
    half = max_chars // 2
    return f"{text[:half]}\n... [{len(text) - 2 * half} characters cut] ...\n{text[-half:]}"


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")  # the protocol's own channel
    os.dup2(2, 1)  # the function's prints go to stderr
    sys.stdout = sys.stderr

    def reply(message: dict) -> None:
        replies.write(json.dumps(message, ensure_ascii=False) + "\n")
        replies.flush()

    start = json.loads(sys.stdin.readline())
    sys.path[:] = start["path"]
    try:
        from agentdata.registry import load_object

        function = load_object(start["spec"])
    except BaseException as error:  # noqa: BLE001 - whatever the plug-in does at import is reported, not raised
        reply({"error": f"{type(error).__name__}: {error}"})
        return
    reply({"ready": True})
    for line in sys.stdin:
        call = json.loads(line)
        try:
            value = function(**call["arguments"])
            if inspect.isawaitable(value):
                value = asyncio.run(_awaited(value))
            reply({"ok": True, "text": _text(value, call["max_chars"])})
        except Exception as error:  # the tool's own failure: shown to the model as a tool error
            reply({"ok": False, "error": f"{type(error).__name__}: {error}"})


async def _awaited(awaitable):
    return await awaitable


if __name__ == "__main__":
    main()
