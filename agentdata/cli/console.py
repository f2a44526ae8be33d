"""Where the CLI writes: the two consoles, the one-line error, whole lines and JSON.

Every command and `app.main` print through these, so an error looks the same whichever
caught it (typer's test runner calls the commands without `main`).
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console
from rich.markup import escape

console = Console()
err_console = Console(stderr=True)


MAX_ERROR_CHARS = 2000  # a message quoting a huge value is cut here, whatever made it


def print_error(message: str, style: str = "bold red") -> None:
    """The one line on stderr of a failed command: whitespace folded, cut to MAX_ERROR_CHARS, markup escaped."""
    one_line = " ".join(str(message).split())
    if len(one_line) > MAX_ERROR_CHARS:
        one_line = f"{one_line[: MAX_ERROR_CHARS - 40]}… ({len(one_line):,} characters in all)"
    err_console.print(f"[{style}]error:[/] {escape(one_line)}", highlight=False, soft_wrap=True)


def print_line(markup: str) -> None:
    """One line of a command's story (what it is about to do, a result as it arrives), in rich markup:
    printed whole, never folded at the width, so a log file or CI keeps it on one line."""
    console.print(markup, soft_wrap=True)


def print_json(data: Any) -> None:
    """The summary as one JSON document on stdout (paths and other objects as strings)."""
    console.out(json.dumps(data, indent=2, default=str, ensure_ascii=False), highlight=False)
